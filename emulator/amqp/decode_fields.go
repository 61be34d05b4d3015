package amqp

// Readers of the values of composite fields, used by decoder.into. Each
// reads one non-null value (fieldTable.decode consumes nulls), checks its
// AMQP type and range, and stores it through p.

// isNull consumes a null constructor if one is next.
func (d *decoder) isNull() (bool, error) {
	c, err := d.peekByte()
	if err != nil {
		return false, err
	}
	if c == codeNull {
		d.pos++
		return true, nil
	}
	return false, nil
}

// uintValue reads any integer encoding and checks that it lies in [0, max].
func (d *decoder) uintValue(max uint64) (uint64, error) {
	code, err := d.readByte()
	if err != nil {
		return 0, err
	}
	var v uint64
	var s int64
	signed := false
	switch code {
	case codeUint0, codeUlong0:
		return 0, nil
	case codeUbyte, codeSmallUint, codeSmallUlong:
		c, err := d.readByte()
		if err != nil {
			return 0, err
		}
		v = uint64(c)
	case codeUshort:
		x, err := d.u16()
		if err != nil {
			return 0, err
		}
		v = uint64(x)
	case codeUint:
		x, err := d.u32()
		if err != nil {
			return 0, err
		}
		v = uint64(x)
	case codeUlong:
		if v, err = d.u64(); err != nil {
			return 0, err
		}
	case codeByte, codeSmallInt, codeSmallLong:
		c, err := d.readByte()
		if err != nil {
			return 0, err
		}
		s, signed = int64(int8(c)), true
	case codeShort:
		x, err := d.u16()
		if err != nil {
			return 0, err
		}
		s, signed = int64(int16(x)), true
	case codeInt:
		x, err := d.u32()
		if err != nil {
			return 0, err
		}
		s, signed = int64(int32(x)), true
	case codeLong:
		x, err := d.u64()
		if err != nil {
			return 0, err
		}
		s, signed = int64(x), true
	default:
		return 0, malformed("constructor 0x%02x where an unsigned integer was expected", code)
	}
	if signed {
		if s < 0 {
			return 0, malformed("negative value %d where an unsigned integer was expected", s)
		}
		v = uint64(s)
	}
	if v > max {
		return 0, malformed("value %d exceeds %d", v, max)
	}
	return v, nil
}

// uintInto stores an unsigned integer of at most max into *p.
func uintInto[U ~uint8 | ~uint16 | ~uint32 | ~uint64](d *decoder, p *U, max uint64) error {
	v, err := d.uintValue(max)
	if err != nil {
		return err
	}
	*p = U(v)
	return nil
}

func (d *decoder) boolInto(p *bool) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeTrue:
		*p = true
	case codeFalse:
		*p = false
	case codeBool:
		c, err := d.readByte()
		if err != nil {
			return err
		}
		*p, err = boolByte(c)
		return err
	default:
		return malformed("constructor 0x%02x where a boolean was expected", code)
	}
	return nil
}

// text reads a string or symbol whose constructors are short and long.
func (d *decoder) text(short, long byte, what string) (string, error) {
	code, err := d.readByte()
	if err != nil {
		return "", err
	}
	if code != short && code != long {
		return "", malformed("constructor 0x%02x where %s was expected", code, what)
	}
	return d.str(code == long)
}

func (d *decoder) stringInto(p *string) (err error) {
	*p, err = d.text(codeStr8, codeStr32, "a string")
	return err
}

func (d *decoder) symbolInto(p *Symbol) error {
	s, err := d.text(codeSym8, codeSym32, "a symbol")
	*p = Symbol(s)
	return err
}

func (d *decoder) binaryInto(p *[]byte) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	if code != codeVbin8 && code != codeVbin32 {
		return malformed("constructor 0x%02x where a binary was expected", code)
	}
	*p, err = d.bytes(code == codeVbin32)
	return err
}

// symbolsInto reads a "multiple" symbol field: one symbol or an array of
// symbols.
func (d *decoder) symbolsInto(p *[]Symbol) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeSym8, codeSym32:
		s, err := d.str(code == codeSym32)
		*p = []Symbol{Symbol(s)}
		return err
	case codeArray8, codeArray32:
		c, n, err := d.compound(code == codeArray32)
		if err != nil {
			return err
		}
		ec, err := c.readByte()
		if err != nil {
			return err
		}
		if n > 0 && ec != codeSym8 && ec != codeSym32 {
			return malformed("array of 0x%02x where symbols were expected", ec)
		}
		*p = make([]Symbol, n)
		for i := range *p {
			s, err := c.str(ec == codeSym32)
			if err != nil {
				return err
			}
			(*p)[i] = Symbol(s)
		}
		return c.done()
	}
	return malformed("constructor 0x%02x where symbols were expected", code)
}

// mapBody reads a map constructor and returns a decoder over its body and its
// number of entries.
func (d *decoder) mapBody(what string) (decoder, int, error) {
	code, err := d.readByte()
	if err != nil {
		return decoder{}, 0, err
	}
	if code != codeMap8 && code != codeMap32 {
		return decoder{}, 0, malformed("constructor 0x%02x where %s was expected", code, what)
	}
	c, n, err := d.compound(code == codeMap32)
	if err != nil {
		return decoder{}, 0, err
	}
	if n%2 != 0 {
		return decoder{}, 0, malformed("map with an odd count %d", n)
	}
	return c, n / 2, nil
}

// fieldsInto reads a map with symbol keys (string keys are accepted too).
func (d *decoder) fieldsInto(p *map[Symbol]any) error {
	c, n, err := d.mapBody("a map")
	if err != nil {
		return err
	}
	m := make(map[Symbol]any, n)
	for range n {
		kc, err := c.readByte()
		if err != nil {
			return err
		}
		if kc != codeSym8 && kc != codeSym32 && kc != codeStr8 && kc != codeStr32 {
			return malformed("map key constructor 0x%02x where a symbol was expected", kc)
		}
		k, err := c.str(kc == codeSym32 || kc == codeStr32)
		if err != nil {
			return err
		}
		if m[Symbol(k)], err = c.value(); err != nil {
			return err
		}
	}
	*p = m
	return c.done()
}

// filterInto reads a source's filter set: symbol keys (a null key reads as
// ""), values kept as decoded. A filter is a described value by the
// specification, but clients also send plain values (the JavaScript SDK's
// session filter is a bare string).
func (d *decoder) filterInto(p *map[Symbol]any) error {
	c, n, err := d.mapBody("a filter map")
	if err != nil {
		return err
	}
	m := make(map[Symbol]any, n)
	for range n {
		var k Symbol
		null, err := c.isNull()
		if err == nil && !null {
			err = c.symbolInto(&k)
		}
		if err != nil {
			return err
		}
		if m[k], err = c.value(); err != nil {
			return err
		}
	}
	*p = m
	return c.done()
}

// unsettledInto reads an attach's unsettled map. Its keys are delivery
// tags, which are binary and cannot key a Go map, so binary keys become
// strings holding the same bytes. Other unhashable keys are errors.
func (d *decoder) unsettledInto(p *map[any]any) error {
	c, n, err := d.mapBody("a map")
	if err != nil {
		return err
	}
	m := make(map[any]any, n)
	for range n {
		k, err := c.value()
		if err != nil {
			return err
		}
		if tag, ok := k.([]byte); ok {
			k = string(tag)
		} else if !hashable(k) {
			return malformed("map key of type %T is not supported", k)
		}
		if m[k], err = c.value(); err != nil {
			return err
		}
	}
	*p = m
	return c.done()
}

func (d *decoder) stateInto(p *DeliveryState) error {
	code, c, n, _, err := d.describedHeader()
	if err != nil {
		return err
	}
	if *p, err = c.state(code, n); err != nil {
		return err
	}
	return c.done()
}

// outcomeInto reads a default-outcome: a known delivery state as its Go
// type, anything else as a generic value.
func (d *decoder) outcomeInto(p *any) error {
	save := d.pos
	code, c, n, _, err := d.describedHeader()
	if err == nil && code >= DescriptorReceived && code <= DescriptorModified {
		if *p, err = c.state(code, n); err != nil {
			return err
		}
		return c.done()
	}
	d.pos = save
	var err2 error
	*p, err2 = d.value()
	return err2
}
