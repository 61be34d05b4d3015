package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Unmarshal decodes one AMQP value from the front of b and reports how many
// bytes it used. Binary values in the result alias b. Every error wraps
// ErrMalformed.
func Unmarshal(b []byte) (v any, n int, err error) {
	d := decoder{b: b}
	v, err = d.value()
	if err != nil {
		return nil, 0, err
	}
	return v, d.pos, nil
}

// decoder reads AMQP values from b[pos:]. Every length is checked against
// len(b) before it is used, so a decoder never reads or allocates beyond its
// input. Compound values are decoded with a child decoder whose b ends where
// the compound ends.
type decoder struct {
	b     []byte
	pos   int
	depth int
	// copy makes binary values fresh copies instead of sub-slices of b (used
	// when b is a reused read buffer).
	copy bool
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

func (d *decoder) remaining() int { return len(d.b) - d.pos }

// The accessors below stay small enough to inline; their errors are built
// out of line.

func (d *decoder) readByte() (byte, error) {
	if d.pos >= len(d.b) {
		return 0, errShort
	}
	c := d.b[d.pos]
	d.pos++
	return c, nil
}

func (d *decoder) peekByte() (byte, error) {
	if d.pos >= len(d.b) {
		return 0, errShort
	}
	return d.b[d.pos], nil
}

// errShort reports input that ends inside a value. It is a prebuilt value
// so that the hot accessors inline.
var errShort = fmt.Errorf("%w: unexpected end of data", ErrMalformed)

// next returns the next n bytes, which alias b.
func (d *decoder) next(n int) ([]byte, error) {
	if n < 0 || n > len(d.b)-d.pos {
		return nil, errShort
	}
	p := d.b[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return p, nil
}

func (d *decoder) u16() (uint16, error) {
	p, err := d.next(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(p), nil
}

func (d *decoder) u32() (uint32, error) {
	p, err := d.next(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(p), nil
}

func (d *decoder) u64() (uint64, error) {
	p, err := d.next(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(p), nil
}

// varLen reads the length prefix of a variable-width value (1 byte for the
// 8-bit forms, 4 for the 32-bit ones) and checks it against the input.
func (d *decoder) varLen(wide bool) (int, error) {
	var n uint64
	if wide {
		v, err := d.u32()
		if err != nil {
			return 0, err
		}
		n = uint64(v)
	} else {
		v, err := d.readByte()
		if err != nil {
			return 0, err
		}
		n = uint64(v)
	}
	if n > uint64(d.remaining()) {
		return 0, malformed("length %d exceeds the %d remaining bytes", n, d.remaining())
	}
	return int(n), nil
}

func (d *decoder) bytes(wide bool) ([]byte, error) {
	n, err := d.varLen(wide)
	if err != nil {
		return nil, err
	}
	p, _ := d.next(n)
	if d.copy {
		c := make([]byte, n)
		copy(c, p)
		return c, nil
	}
	return p, nil
}

func (d *decoder) str(wide bool) (string, error) {
	n, err := d.varLen(wide)
	if err != nil {
		return "", err
	}
	p, _ := d.next(n)
	return string(p), nil
}

// compound reads the size and count of a list, map or array body (after its
// constructor) and returns a child decoder over exactly that body.
func (d *decoder) compound(wide bool) (child decoder, count int, err error) {
	if d.depth >= MaxDepth {
		return decoder{}, 0, malformed("nesting deeper than %d", MaxDepth)
	}
	size, err := d.varLen(wide)
	if err != nil {
		return decoder{}, 0, err
	}
	end := d.pos + size
	child = decoder{b: d.b[:end], pos: d.pos, depth: d.depth + 1, copy: d.copy}
	d.pos = end
	var c uint64
	if wide {
		v, err := child.u32()
		if err != nil {
			return decoder{}, 0, err
		}
		c = uint64(v)
	} else {
		v, err := child.readByte()
		if err != nil {
			return decoder{}, 0, err
		}
		c = uint64(v)
	}
	// Every element takes at least one byte (arrays check their element
	// width separately), so a count beyond the body size is a lie.
	if c > uint64(child.remaining()) {
		return decoder{}, 0, malformed("count %d exceeds the %d bytes of the body", c, child.remaining())
	}
	return child, int(c), nil
}

func (d *decoder) done() error {
	if d.pos != len(d.b) {
		return malformed("%d unused bytes at the end of a compound value", len(d.b)-d.pos)
	}
	return nil
}

// value decodes one value with its constructor.
func (d *decoder) value() (any, error) {
	code, err := d.readByte()
	if err != nil {
		return nil, err
	}
	if code == codeDescribed {
		return d.described()
	}
	return d.body(code)
}

func (d *decoder) described() (any, error) {
	if d.depth >= MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	d.depth++
	defer func() { d.depth-- }()
	desc, err := d.descriptor()
	if err != nil {
		return nil, err
	}
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	return &Described{Descriptor: desc, Value: v}, nil
}

// descriptor reads a descriptor: a ulong or a symbol.
func (d *decoder) descriptor() (any, error) {
	code, err := d.readByte()
	if err != nil {
		return nil, err
	}
	switch code {
	case codeUlong0:
		return uint64(0), nil
	case codeSmallUlong:
		c, err := d.readByte()
		return uint64(c), err
	case codeUlong:
		return d.u64()
	case codeSym8, codeSym32:
		s, err := d.str(code == codeSym32)
		return Symbol(s), err
	}
	return nil, malformed("descriptor constructor 0x%02x (want ulong or symbol)", code)
}

// body decodes the data that follows constructor code.
func (d *decoder) body(code byte) (any, error) {
	switch code {
	case codeNull:
		return nil, nil
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeBool:
		c, err := d.readByte()
		if err != nil {
			return nil, err
		}
		return boolByte(c)
	case codeUbyte:
		c, err := d.readByte()
		return c, err
	case codeByte:
		c, err := d.readByte()
		return int8(c), err
	case codeUshort:
		return d.u16()
	case codeShort:
		v, err := d.u16()
		return int16(v), err
	case codeUint0:
		return uint32(0), nil
	case codeSmallUint:
		c, err := d.readByte()
		return uint32(c), err
	case codeUint:
		return d.u32()
	case codeUlong0:
		return uint64(0), nil
	case codeSmallUlong:
		c, err := d.readByte()
		return uint64(c), err
	case codeUlong:
		return d.u64()
	case codeSmallInt:
		c, err := d.readByte()
		return int32(int8(c)), err
	case codeInt:
		v, err := d.u32()
		return int32(v), err
	case codeSmallLong:
		c, err := d.readByte()
		return int64(int8(c)), err
	case codeLong:
		v, err := d.u64()
		return int64(v), err
	case codeFloat:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case codeDouble:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case codeChar:
		v, err := d.u32()
		return Char(v), err
	case codeTimestamp:
		v, err := d.u64()
		if err != nil {
			return nil, err
		}
		return time.UnixMilli(int64(v)).UTC(), nil
	case codeUUID:
		p, err := d.next(16)
		if err != nil {
			return nil, err
		}
		return UUID(p), nil
	case codeVbin8, codeVbin32:
		return d.bytes(code == codeVbin32)
	case codeStr8, codeStr32:
		return d.str(code == codeStr32)
	case codeSym8, codeSym32:
		s, err := d.str(code == codeSym32)
		return Symbol(s), err
	case codeList0:
		return []any{}, nil
	case codeList8, codeList32:
		return d.list(code == codeList32)
	case codeMap8, codeMap32:
		return d.mapAny(code == codeMap32)
	case codeArray8, codeArray32:
		return d.array(code == codeArray32)
	case codeDecimal32, codeDecimal64, codeDecimal128:
		return nil, malformed("unsupported type decimal (0x%02x)", code)
	case codeDescribed:
		return nil, malformed("described constructor where a value body was expected")
	}
	return nil, malformed("unknown type constructor 0x%02x", code)
}

func boolByte(c byte) (bool, error) {
	switch c {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, malformed("boolean byte 0x%02x", c)
}

func (d *decoder) list(wide bool) ([]any, error) {
	c, n, err := d.compound(wide)
	if err != nil {
		return nil, err
	}
	l := make([]any, n)
	for i := range l {
		if l[i], err = c.value(); err != nil {
			return nil, err
		}
	}
	return l, c.done()
}

func (d *decoder) mapAny(wide bool) (map[any]any, error) {
	c, n, err := d.compound(wide)
	if err != nil {
		return nil, err
	}
	if n%2 != 0 {
		return nil, malformed("map with an odd count %d", n)
	}
	m := make(map[any]any, n/2)
	for i := 0; i < n; i += 2 {
		k, err := c.value()
		if err != nil {
			return nil, err
		}
		if !hashable(k) {
			return nil, malformed("map key of type %T is not supported", k)
		}
		v, err := c.value()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, c.done()
}

// hashable reports whether a decoded value can be a Go map key. Described
// values are pointers, so they are hashable (by identity).
func hashable(k any) bool {
	switch k.(type) {
	case []byte, []any, map[any]any, Array:
		return false
	}
	return true
}

// elementWidth is the fixed data width of array elements of type code, or
// -1 for variable-width and compound elements.
func elementWidth(code byte) int {
	switch code {
	case codeNull, codeTrue, codeFalse, codeUint0, codeUlong0, codeList0:
		return 0
	case codeBool, codeUbyte, codeByte, codeSmallUint, codeSmallUlong, codeSmallInt, codeSmallLong:
		return 1
	case codeUshort, codeShort:
		return 2
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		return 4
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		return 8
	case codeUUID, codeDecimal128:
		return 16
	}
	return -1
}

func (d *decoder) array(wide bool) (Array, error) {
	c, n, err := d.compound(wide)
	if err != nil {
		return nil, err
	}
	code, err := c.readByte()
	if err != nil {
		return nil, err
	}
	if code == codeDescribed {
		return nil, malformed("arrays of described values are not supported")
	}
	if w := elementWidth(code); w == 0 && n > 0 {
		// Zero-width elements would let a few bytes claim billions of
		// elements; no AMQP peer needs them.
		return nil, malformed("array of %d zero-width elements (0x%02x)", n, code)
	} else if w > 0 && uint64(n)*uint64(w) != uint64(c.remaining()) {
		return nil, malformed("array of %d elements of width %d in %d bytes", n, w, c.remaining())
	}
	a := make(Array, n)
	for i := range a {
		if a[i], err = c.body(code); err != nil {
			return nil, err
		}
	}
	return a, c.done()
}
