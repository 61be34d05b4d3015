package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// maxEncodeDepth bounds the recursion of the encoder (which also stops
// cyclic values). It is larger than MaxDepth so that anything the decoder
// accepts can be encoded again, whatever the performative around it.
const maxEncodeDepth = 2 * MaxDepth

// errEncode is wrapped by encoding errors (unsupported types, oversized values).
var errEncode = errors.New("amqp: cannot encode")

// Marshal encodes v as one AMQP value. See AppendValue.
func Marshal(v any) ([]byte, error) {
	return AppendValue(nil, v)
}

// AppendValue appends the AMQP encoding of v to dst. It accepts the decoded
// Go types (see the package documentation) plus int→long, uint→ulong,
// []Symbol, []string, []int64, []int32, []uint32, []uint64, []bool, []UUID,
// []time.Time→arrays, map[Symbol]any and map[string]any→maps, Described and
// *Described, the performatives, terminus, error and delivery-state types,
// and the SASL bodies (pointers or values).
//
// Integers use their smallest encoding; strings, symbols and binaries use
// the 8-bit length form when they fit. On error dst is returned unchanged
// (same length).
func AppendValue(dst []byte, v any) ([]byte, error) {
	n := len(dst)
	out, err := appendValue(dst, v, 0)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxEncodeDepth {
		return dst, fmt.Errorf("%w: nesting deeper than %d", errEncode, maxEncodeDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, codeNull), nil
	case bool:
		return appendBool(dst, v), nil
	case uint8:
		return append(dst, codeUbyte, v), nil
	case uint16:
		return append(dst, codeUshort, byte(v>>8), byte(v)), nil
	case uint32:
		return appendUint(dst, v), nil
	case uint64:
		return appendUlong(dst, v), nil
	case uint:
		return appendUlong(dst, uint64(v)), nil
	case int8:
		return append(dst, codeByte, byte(v)), nil
	case int16:
		return append(dst, codeShort, byte(uint16(v)>>8), byte(v)), nil
	case int32:
		return appendInt(dst, v), nil
	case int64:
		return appendLong(dst, v), nil
	case int:
		return appendLong(dst, int64(v)), nil
	case float32:
		dst = append(dst, codeFloat)
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(v)), nil
	case float64:
		dst = append(dst, codeDouble)
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v)), nil
	case Char:
		dst = append(dst, codeChar)
		return binary.BigEndian.AppendUint32(dst, uint32(v)), nil
	case time.Time:
		return appendTimestamp(dst, v), nil
	case UUID:
		dst = append(dst, codeUUID)
		return append(dst, v[:]...), nil
	case []byte:
		return appendBinary(dst, v)
	case string:
		return appendString(dst, v)
	case Symbol:
		return appendSymbol(dst, v)
	case []any:
		return appendList(dst, v, depth)
	case Array:
		return appendArray(dst, v, depth)
	case map[any]any:
		return appendMapAny(dst, v, depth)
	case map[Symbol]any:
		return appendFields(dst, v, depth)
	case map[string]any:
		return appendMapString(dst, v, depth)
	case []Symbol:
		return appendSymbolArray(dst, v)
	case []string:
		return appendStringArray(dst, v)
	case []int64:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeLong)
		for _, x := range v {
			dst = binary.BigEndian.AppendUint64(dst, uint64(x))
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case []int32:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeInt)
		for _, x := range v {
			dst = binary.BigEndian.AppendUint32(dst, uint32(x))
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case []uint32:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeUint)
		for _, x := range v {
			dst = binary.BigEndian.AppendUint32(dst, x)
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case []uint64:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeUlong)
		for _, x := range v {
			dst = binary.BigEndian.AppendUint64(dst, x)
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case []bool:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeBool)
		for _, x := range v {
			if x {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case []UUID:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeUUID)
		for _, x := range v {
			dst = append(dst, x[:]...)
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case []time.Time:
		dst, s := reserveCompound(dst)
		dst = append(dst, codeTimestamp)
		for _, x := range v {
			dst = binary.BigEndian.AppendUint64(dst, uint64(x.UnixMilli()))
		}
		return finishCompound(dst, s, codeArray8, codeArray32, len(v))
	case *Described:
		if v == nil {
			return append(dst, codeNull), nil
		}
		return appendDescribed(dst, v, depth)
	case Described:
		return appendDescribed(dst, &v, depth)
	}
	return appendComposite(dst, v, depth)
}

func appendDescribed(dst []byte, d *Described, depth int) ([]byte, error) {
	dst = append(dst, codeDescribed)
	var err error
	switch desc := d.Descriptor.(type) {
	case uint64:
		dst = appendUlong(dst, desc)
	case Symbol:
		dst, err = appendSymbol(dst, desc)
	default:
		return dst, fmt.Errorf("%w: descriptor of type %T (want uint64 or Symbol)", errEncode, d.Descriptor)
	}
	if err != nil {
		return dst, err
	}
	return appendValue(dst, d.Value, depth+1)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, codeTrue)
	}
	return append(dst, codeFalse)
}

func appendUint(dst []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(dst, codeUint0)
	case v < 256:
		return append(dst, codeSmallUint, byte(v))
	}
	dst = append(dst, codeUint)
	return binary.BigEndian.AppendUint32(dst, v)
}

func appendUlong(dst []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(dst, codeUlong0)
	case v < 256:
		return append(dst, codeSmallUlong, byte(v))
	}
	dst = append(dst, codeUlong)
	return binary.BigEndian.AppendUint64(dst, v)
}

func appendInt(dst []byte, v int32) []byte {
	if v >= -128 && v <= 127 {
		return append(dst, codeSmallInt, byte(int8(v)))
	}
	dst = append(dst, codeInt)
	return binary.BigEndian.AppendUint32(dst, uint32(v))
}

func appendLong(dst []byte, v int64) []byte {
	if v >= -128 && v <= 127 {
		return append(dst, codeSmallLong, byte(int8(v)))
	}
	dst = append(dst, codeLong)
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

func appendTimestamp(dst []byte, t time.Time) []byte {
	dst = append(dst, codeTimestamp)
	return binary.BigEndian.AppendUint64(dst, uint64(t.UnixMilli()))
}

func appendVariable(dst []byte, c8, c32 byte, n int) ([]byte, error) {
	if n < 256 {
		return append(dst, c8, byte(n)), nil
	}
	if uint64(n) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: %d bytes is too long", errEncode, n)
	}
	dst = append(dst, c32)
	return binary.BigEndian.AppendUint32(dst, uint32(n)), nil
}

func appendBinary(dst []byte, b []byte) ([]byte, error) {
	if b == nil {
		return append(dst, codeNull), nil
	}
	dst, err := appendVariable(dst, codeVbin8, codeVbin32, len(b))
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

func appendString(dst []byte, s string) ([]byte, error) {
	dst, err := appendVariable(dst, codeStr8, codeStr32, len(s))
	if err != nil {
		return dst, err
	}
	return append(dst, s...), nil
}

func appendSymbol(dst []byte, s Symbol) ([]byte, error) {
	dst, err := appendVariable(dst, codeSym8, codeSym32, len(s))
	if err != nil {
		return dst, err
	}
	return append(dst, s...), nil
}

// reserveCompound reserves room for the largest (32-bit) compound header:
// constructor, size and count. finishCompound writes the header and, when
// the 8-bit form fits, slides the body down over the unused bytes.
func reserveCompound(dst []byte) ([]byte, int) {
	s := len(dst)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0, 0), s
}

func finishCompound(dst []byte, s int, c8, c32 byte, count int) ([]byte, error) {
	body := len(dst) - s - 9
	if body+1 <= 255 && count <= 255 {
		dst[s] = c8
		dst[s+1] = byte(body + 1)
		dst[s+2] = byte(count)
		copy(dst[s+3:], dst[s+9:])
		return dst[:len(dst)-6], nil
	}
	if uint64(body)+4 > math.MaxUint32 || uint64(count) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: compound value too large", errEncode)
	}
	dst[s] = c32
	binary.BigEndian.PutUint32(dst[s+1:], uint32(body+4))
	binary.BigEndian.PutUint32(dst[s+5:], uint32(count))
	return dst, nil
}

func appendList(dst []byte, l []any, depth int) ([]byte, error) {
	if len(l) == 0 {
		return append(dst, codeList0), nil
	}
	dst, s := reserveCompound(dst)
	var err error
	for _, x := range l {
		if dst, err = appendValue(dst, x, depth+1); err != nil {
			return dst, err
		}
	}
	return finishCompound(dst, s, codeList8, codeList32, len(l))
}

func appendMapAny(dst []byte, m map[any]any, depth int) ([]byte, error) {
	if m == nil {
		return append(dst, codeNull), nil
	}
	dst, s := reserveCompound(dst)
	var err error
	for k, v := range m {
		if dst, err = appendValue(dst, k, depth+1); err != nil {
			return dst, err
		}
		if dst, err = appendValue(dst, v, depth+1); err != nil {
			return dst, err
		}
	}
	return finishCompound(dst, s, codeMap8, codeMap32, 2*len(m))
}

// appendFields encodes a map with symbol keys (AMQP "fields").
func appendFields(dst []byte, m map[Symbol]any, depth int) ([]byte, error) {
	if m == nil {
		return append(dst, codeNull), nil
	}
	dst, s := reserveCompound(dst)
	var err error
	for k, v := range m {
		if dst, err = appendSymbol(dst, k); err != nil {
			return dst, err
		}
		if dst, err = appendValue(dst, v, depth+1); err != nil {
			return dst, err
		}
	}
	return finishCompound(dst, s, codeMap8, codeMap32, 2*len(m))
}

func appendMapString(dst []byte, m map[string]any, depth int) ([]byte, error) {
	if m == nil {
		return append(dst, codeNull), nil
	}
	dst, s := reserveCompound(dst)
	var err error
	for k, v := range m {
		if dst, err = appendString(dst, k); err != nil {
			return dst, err
		}
		if dst, err = appendValue(dst, v, depth+1); err != nil {
			return dst, err
		}
	}
	return finishCompound(dst, s, codeMap8, codeMap32, 2*len(m))
}

func appendSymbolArray(dst []byte, v []Symbol) ([]byte, error) {
	return appendTextArray(dst, v, codeSym8, codeSym32, "symbol")
}

func appendStringArray(dst []byte, v []string) ([]byte, error) {
	return appendTextArray(dst, v, codeStr8, codeStr32, "string")
}

// appendTextArray writes an array of strings or symbols: one constructor for
// every element, the 8-bit length form unless an element needs 32 bits.
func appendTextArray[T ~string](dst []byte, v []T, code8, code32 byte, what string) ([]byte, error) {
	if v == nil {
		return append(dst, codeNull), nil
	}
	wide := false
	for _, x := range v {
		if len(x) > 255 {
			wide = true
			break
		}
	}
	dst, s := reserveCompound(dst)
	if wide {
		dst = append(dst, code32)
		for _, x := range v {
			if uint64(len(x)) > math.MaxUint32 {
				return dst, fmt.Errorf("%w: %s too long", errEncode, what)
			}
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(x)))
			dst = append(dst, x...)
		}
	} else {
		dst = append(dst, code8)
		for _, x := range v {
			dst = append(dst, byte(len(x)))
			dst = append(dst, x...)
		}
	}
	return finishCompound(dst, s, codeArray8, codeArray32, len(v))
}

// arrayElementCode picks the single element constructor for a generic Array.
// Fixed-width types use their full-width constructor so that every element
// has the same size; variable-width types use the 8-bit form when every
// element fits.
func arrayElementCode(a Array) (byte, error) {
	var code byte
	for i, x := range a {
		var c byte
		switch x := x.(type) {
		case bool:
			c = codeBool
		case uint8:
			c = codeUbyte
		case uint16:
			c = codeUshort
		case uint32:
			c = codeUint
		case uint64:
			c = codeUlong
		case int8:
			c = codeByte
		case int16:
			c = codeShort
		case int32:
			c = codeInt
		case int64:
			c = codeLong
		case float32:
			c = codeFloat
		case float64:
			c = codeDouble
		case Char:
			c = codeChar
		case time.Time:
			c = codeTimestamp
		case UUID:
			c = codeUUID
		case []byte:
			c = codeVbin8
			if len(x) > 255 {
				c = codeVbin32
			}
		case string:
			c = codeStr8
			if len(x) > 255 {
				c = codeStr32
			}
		case Symbol:
			c = codeSym8
			if len(x) > 255 {
				c = codeSym32
			}
		case []any:
			c = codeList32
		case map[any]any:
			c = codeMap32
		case Array:
			c = codeArray32
		default:
			return 0, fmt.Errorf("%w: array element of type %T", errEncode, x)
		}
		if i == 0 {
			code = c
			continue
		}
		// Promote 8-bit length forms when a later element needs 32 bits.
		switch {
		case c == code:
		case (code == codeVbin8 && c == codeVbin32) || (code == codeStr8 && c == codeStr32) || (code == codeSym8 && c == codeSym32):
			code = c
		case (c == codeVbin8 && code == codeVbin32) || (c == codeStr8 && code == codeStr32) || (c == codeSym8 && code == codeSym32):
		default:
			return 0, fmt.Errorf("%w: array mixes element types (%T at index %d)", errEncode, x, i)
		}
	}
	return code, nil
}

func appendArray(dst []byte, a Array, depth int) ([]byte, error) {
	if a == nil {
		return append(dst, codeNull), nil
	}
	if len(a) == 0 {
		return append(dst, codeArray8, 2, 0, codeNull), nil
	}
	code, err := arrayElementCode(a)
	if err != nil {
		return dst, err
	}
	dst, s := reserveCompound(dst)
	dst = append(dst, code)
	for _, x := range a {
		if dst, err = appendArrayElement(dst, code, x, depth+1); err != nil {
			return dst, err
		}
	}
	return finishCompound(dst, s, codeArray8, codeArray32, len(a))
}

// appendArrayElement writes x without its constructor, in the form code
// selects. arrayElementCode has already checked the types.
func appendArrayElement(dst []byte, code byte, x any, depth int) ([]byte, error) {
	if depth > maxEncodeDepth {
		return dst, fmt.Errorf("%w: nesting deeper than %d", errEncode, maxEncodeDepth)
	}
	switch x := x.(type) {
	case bool:
		if x {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case uint8:
		return append(dst, x), nil
	case uint16:
		return binary.BigEndian.AppendUint16(dst, x), nil
	case uint32:
		return binary.BigEndian.AppendUint32(dst, x), nil
	case uint64:
		return binary.BigEndian.AppendUint64(dst, x), nil
	case int8:
		return append(dst, byte(x)), nil
	case int16:
		return binary.BigEndian.AppendUint16(dst, uint16(x)), nil
	case int32:
		return binary.BigEndian.AppendUint32(dst, uint32(x)), nil
	case int64:
		return binary.BigEndian.AppendUint64(dst, uint64(x)), nil
	case float32:
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(x)), nil
	case float64:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(x)), nil
	case Char:
		return binary.BigEndian.AppendUint32(dst, uint32(x)), nil
	case time.Time:
		return binary.BigEndian.AppendUint64(dst, uint64(x.UnixMilli())), nil
	case UUID:
		return append(dst, x[:]...), nil
	case []byte:
		return appendArrayBytes(dst, code, x)
	case string:
		return appendArrayBytes(dst, code, x)
	case Symbol:
		return appendArrayBytes(dst, code, string(x))
	case []any:
		s := len(dst)
		dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
		var err error
		for _, e := range x {
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return putSize32(dst, s, len(x))
	case map[any]any:
		s := len(dst)
		dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
		var err error
		for k, v := range x {
			if dst, err = appendValue(dst, k, depth+1); err != nil {
				return dst, err
			}
			if dst, err = appendValue(dst, v, depth+1); err != nil {
				return dst, err
			}
		}
		return putSize32(dst, s, 2*len(x))
	case Array:
		s := len(dst)
		dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
		if len(x) == 0 {
			dst = append(dst, codeNull)
			return putSize32(dst, s, 0)
		}
		c, err := arrayElementCode(x)
		if err != nil {
			return dst, err
		}
		dst = append(dst, c)
		for _, e := range x {
			if dst, err = appendArrayElement(dst, c, e, depth+1); err != nil {
				return dst, err
			}
		}
		return putSize32(dst, s, len(x))
	}
	return dst, fmt.Errorf("%w: array element of type %T", errEncode, x)
}

func appendArrayBytes[T string | []byte](dst []byte, code byte, x T) ([]byte, error) {
	switch code {
	case codeVbin8, codeStr8, codeSym8:
		dst = append(dst, byte(len(x)))
	default:
		if uint64(len(x)) > math.MaxUint32 {
			return dst, fmt.Errorf("%w: %d bytes is too long", errEncode, len(x))
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(x)))
	}
	return append(dst, x...), nil
}

// putSize32 fills the size and count words of a 32-bit compound body that
// starts at s (no constructor).
func putSize32(dst []byte, s int, count int) ([]byte, error) {
	size := len(dst) - s - 4
	if uint64(size) > math.MaxUint32 || uint64(count) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: compound value too large", errEncode)
	}
	binary.BigEndian.PutUint32(dst[s:], uint32(size))
	binary.BigEndian.PutUint32(dst[s+4:], uint32(count))
	return dst, nil
}
