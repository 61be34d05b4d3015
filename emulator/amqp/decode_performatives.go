package amqp

import (
	"math"
	"time"
)

// UnmarshalPerformative decodes one described composite this package knows
// (a performative, SASL body, terminus, error or delivery state) from the
// front of b and returns it as a pointer (*Open, *Source, *Accepted, ...).
// Binary fields alias b. Every error wraps ErrMalformed.
func UnmarshalPerformative(b []byte) (v any, n int, err error) {
	d := decoder{b: b}
	v, err = d.composite()
	if err != nil {
		return nil, 0, err
	}
	return v, d.pos, nil
}

// describedHeader reads a described-list header: the descriptor, then the
// list constructor, size and count. It returns a child decoder over the list
// body. A null reports null=true.
func (d *decoder) describedHeader() (code uint64, child decoder, count int, null bool, err error) {
	c, err := d.readByte()
	if err != nil {
		return 0, decoder{}, 0, false, err
	}
	if c == codeNull {
		return 0, decoder{}, 0, true, nil
	}
	if c != codeDescribed {
		return 0, decoder{}, 0, false, malformed("constructor 0x%02x where a described list was expected", c)
	}
	desc, err := d.descriptor()
	if err != nil {
		return 0, decoder{}, 0, false, err
	}
	switch desc := desc.(type) {
	case uint64:
		code = desc
	case Symbol:
		var ok bool
		if code, ok = symbolicDescriptors[string(desc)]; !ok {
			return 0, decoder{}, 0, false, malformed("unknown descriptor %q", desc)
		}
	}
	lc, err := d.readByte()
	if err != nil {
		return 0, decoder{}, 0, false, err
	}
	switch lc {
	case codeList0:
		return code, decoder{b: d.b[:d.pos], pos: d.pos, depth: d.depth + 1, copy: d.copy}, 0, false, nil
	case codeList8, codeList32:
		child, n, err := d.compound(lc == codeList32)
		return code, child, n, false, err
	}
	return 0, decoder{}, 0, false, malformed("descriptor 0x%x with constructor 0x%02x (want a list)", code, lc)
}

// composite decodes one known described composite as its Go type.
func (d *decoder) composite() (any, error) {
	if d.depth >= MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	code, c, n, null, err := d.describedHeader()
	if err != nil {
		return nil, err
	}
	if null {
		return nil, malformed("null where a performative was expected")
	}
	var v any
	switch code {
	case DescriptorOpen:
		v, err = c.open(n)
	case DescriptorBegin:
		v, err = c.begin(n)
	case DescriptorAttach:
		v, err = c.attach(n)
	case DescriptorFlow:
		v, err = c.flow(n)
	case DescriptorTransfer:
		v, err = c.transfer(n)
	case DescriptorDisposition:
		v, err = c.disposition(n)
	case DescriptorDetach:
		v, err = c.detach(n)
	case DescriptorEnd:
		e := &End{}
		e.Error, err = c.errorFields(n, "end")
		v = e
	case DescriptorClose:
		e := &Close{}
		e.Error, err = c.errorFields(n, "close")
		v = e
	case DescriptorError:
		v, err = c.errorBody(n)
	case DescriptorSource:
		v, err = c.source(n)
	case DescriptorTarget:
		v, err = c.target(n)
	case DescriptorReceived, DescriptorAccepted, DescriptorRejected, DescriptorReleased, DescriptorModified:
		v, err = c.stateBody(code, n)
	case DescriptorSASLMechanisms:
		v, err = c.saslMechanisms(n)
	case DescriptorSASLInit:
		v, err = c.saslInit(n)
	case DescriptorSASLChallenge:
		s := &SASLChallenge{}
		s.Challenge, err = c.singleBinary(n, "sasl-challenge")
		v = s
	case DescriptorSASLResponse:
		s := &SASLResponse{}
		s.Response, err = c.singleBinary(n, "sasl-response")
		v = s
	case DescriptorSASLOutcome:
		v, err = c.saslOutcome(n)
	default:
		return nil, malformed("unknown descriptor 0x%x", code)
	}
	if err != nil {
		return nil, err
	}
	return v, c.done()
}

func fieldErr(what string, i int, err error) error {
	return malformed("%s field %d: %v", what, i, unwrapMalformed(err))
}

// unwrapMalformed strips the ErrMalformed prefix of a nested error so that
// messages do not repeat it.
func unwrapMalformed(err error) string {
	s := err.Error()
	p := ErrMalformed.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

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
// null reports an AMQP null.
func (d *decoder) uintValue(max uint64) (v uint64, null bool, err error) {
	code, err := d.readByte()
	if err != nil {
		return 0, false, err
	}
	var s int64
	signed := false
	switch code {
	case codeNull:
		return 0, true, nil
	case codeUint0, codeUlong0:
		return 0, false, nil
	case codeUbyte, codeSmallUint, codeSmallUlong:
		c, err := d.readByte()
		v = uint64(c)
		if err != nil {
			return 0, false, err
		}
	case codeUshort:
		x, err := d.u16()
		if err != nil {
			return 0, false, err
		}
		v = uint64(x)
	case codeUint:
		x, err := d.u32()
		if err != nil {
			return 0, false, err
		}
		v = uint64(x)
	case codeUlong:
		if v, err = d.u64(); err != nil {
			return 0, false, err
		}
	case codeByte, codeSmallInt, codeSmallLong:
		c, err := d.readByte()
		if err != nil {
			return 0, false, err
		}
		s, signed = int64(int8(c)), true
	case codeShort:
		x, err := d.u16()
		if err != nil {
			return 0, false, err
		}
		s, signed = int64(int16(x)), true
	case codeInt:
		x, err := d.u32()
		if err != nil {
			return 0, false, err
		}
		s, signed = int64(int32(x)), true
	case codeLong:
		x, err := d.u64()
		if err != nil {
			return 0, false, err
		}
		s, signed = int64(x), true
	default:
		return 0, false, malformed("constructor 0x%02x where an unsigned integer was expected", code)
	}
	if signed {
		if s < 0 {
			return 0, false, malformed("negative value %d where an unsigned integer was expected", s)
		}
		v = uint64(s)
	}
	if v > max {
		return 0, false, malformed("value %d exceeds %d", v, max)
	}
	return v, false, nil
}

// uint32Field stores a uint into *p, leaving *p alone for null.
func (d *decoder) uint32Field(p *uint32) (present bool, err error) {
	v, null, err := d.uintValue(math.MaxUint32)
	if err != nil || null {
		return false, err
	}
	*p = uint32(v)
	return true, nil
}

func (d *decoder) boolField(p *bool) (present bool, err error) {
	code, err := d.readByte()
	if err != nil {
		return false, err
	}
	switch code {
	case codeNull:
		return false, nil
	case codeTrue:
		*p = true
	case codeFalse:
		*p = false
	case codeBool:
		c, err := d.readByte()
		if err != nil {
			return false, err
		}
		if *p, err = boolByte(c); err != nil {
			return false, err
		}
	default:
		return false, malformed("constructor 0x%02x where a boolean was expected", code)
	}
	return true, nil
}

func (d *decoder) stringField(p *string) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeStr8, codeStr32:
		*p, err = d.str(code == codeStr32)
		return err
	}
	return malformed("constructor 0x%02x where a string was expected", code)
}

func (d *decoder) symbolField(p *Symbol) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeSym8, codeSym32:
		s, err := d.str(code == codeSym32)
		*p = Symbol(s)
		return err
	}
	return malformed("constructor 0x%02x where a symbol was expected", code)
}

func (d *decoder) binaryField(p *[]byte) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeVbin8, codeVbin32:
		*p, err = d.bytes(code == codeVbin32)
		return err
	}
	return malformed("constructor 0x%02x where a binary was expected", code)
}

// symbolsField reads a "multiple" symbol field: null, one symbol, or an
// array of symbols.
func (d *decoder) symbolsField(p *[]Symbol) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeSym8, codeSym32:
		s, err := d.str(code == codeSym32)
		if err != nil {
			return err
		}
		*p = []Symbol{Symbol(s)}
		return nil
	case codeArray8, codeArray32:
		c, n, err := d.compound(code == codeArray32)
		if err != nil {
			return err
		}
		ec, err := c.readByte()
		if err != nil {
			return err
		}
		if n == 0 {
			*p = []Symbol{}
			return c.done()
		}
		if ec != codeSym8 && ec != codeSym32 {
			return malformed("array of 0x%02x where symbols were expected", ec)
		}
		out := make([]Symbol, n)
		for i := range out {
			s, err := c.str(ec == codeSym32)
			if err != nil {
				return err
			}
			out[i] = Symbol(s)
		}
		*p = out
		return c.done()
	}
	return malformed("constructor 0x%02x where symbols were expected", code)
}

// fieldsField reads a map with symbol keys (string keys are accepted too).
func (d *decoder) fieldsField(p *map[Symbol]any) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeMap8, codeMap32:
	default:
		return malformed("constructor 0x%02x where a map was expected", code)
	}
	c, n, err := d.compound(code == codeMap32)
	if err != nil {
		return err
	}
	if n%2 != 0 {
		return malformed("map with an odd count %d", n)
	}
	m := make(map[Symbol]any, n/2)
	for i := 0; i < n; i += 2 {
		var k Symbol
		kc, err := c.readByte()
		if err != nil {
			return err
		}
		switch kc {
		case codeSym8, codeSym32, codeStr8, codeStr32:
			s, err := c.str(kc == codeSym32 || kc == codeStr32)
			if err != nil {
				return err
			}
			k = Symbol(s)
		default:
			return malformed("map key constructor 0x%02x where a symbol was expected", kc)
		}
		if m[k], err = c.value(); err != nil {
			return err
		}
	}
	*p = m
	return c.done()
}

// unsettledField reads an attach's unsettled map. Its keys are delivery
// tags, which are binary and cannot key a Go map, so binary keys become
// strings holding the same bytes. Other unhashable keys are errors.
func (d *decoder) unsettledField(p *map[any]any) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeMap8, codeMap32:
	default:
		return malformed("constructor 0x%02x where a map was expected", code)
	}
	c, n, err := d.compound(code == codeMap32)
	if err != nil {
		return err
	}
	if n%2 != 0 {
		return malformed("map with an odd count %d", n)
	}
	m := make(map[any]any, n/2)
	for i := 0; i < n; i += 2 {
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

func (d *decoder) errorField(p **Error) error {
	code, c, n, null, err := d.describedHeader()
	if err != nil || null {
		return err
	}
	if code != DescriptorError {
		return malformed("descriptor 0x%x where an error was expected", code)
	}
	e, err := c.errorBody(n)
	if err != nil {
		return err
	}
	*p = e
	return c.done()
}

func (d *decoder) stateField(p *DeliveryState) error {
	code, c, n, null, err := d.describedHeader()
	if err != nil || null {
		return err
	}
	s, err := c.stateBody(code, n)
	if err != nil {
		return err
	}
	*p = s
	return c.done()
}

// skipFields decodes and discards fields beyond those this package knows.
func (d *decoder) skip() error {
	_, err := d.value()
	return err
}

func (d *decoder) open(n int) (*Open, error) {
	o := &Open{MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = d.stringField(&o.ContainerID)
		case 1:
			err = d.stringField(&o.Hostname)
		case 2:
			_, err = d.uint32Field(&o.MaxFrameSize)
		case 3:
			var v uint64
			var null bool
			if v, null, err = d.uintValue(math.MaxUint16); err == nil && !null {
				o.ChannelMax = uint16(v)
			}
		case 4:
			var ms uint32
			_, err = d.uint32Field(&ms)
			o.IdleTimeout = time.Duration(ms) * time.Millisecond
		case 5:
			err = d.symbolsField(&o.OutgoingLocales)
		case 6:
			err = d.symbolsField(&o.IncomingLocales)
		case 7:
			err = d.symbolsField(&o.OfferedCapabilities)
		case 8:
			err = d.symbolsField(&o.DesiredCapabilities)
		case 9:
			err = d.fieldsField(&o.Properties)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("open", i, err)
		}
	}
	return o, nil
}

func (d *decoder) begin(n int) (*Begin, error) {
	type block struct {
		b  Begin
		rc uint16
	}
	blk := &block{b: Begin{HandleMax: math.MaxUint32}}
	b := &blk.b
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			var v uint64
			var null bool
			if v, null, err = d.uintValue(math.MaxUint16); err == nil && !null {
				blk.rc = uint16(v)
				b.RemoteChannel = &blk.rc
			}
		case 1:
			_, err = d.uint32Field(&b.NextOutgoingID)
		case 2:
			_, err = d.uint32Field(&b.IncomingWindow)
		case 3:
			_, err = d.uint32Field(&b.OutgoingWindow)
		case 4:
			_, err = d.uint32Field(&b.HandleMax)
		case 5:
			err = d.symbolsField(&b.OfferedCapabilities)
		case 6:
			err = d.symbolsField(&b.DesiredCapabilities)
		case 7:
			err = d.fieldsField(&b.Properties)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("begin", i, err)
		}
	}
	return b, nil
}

func (d *decoder) attach(n int) (*Attach, error) {
	type block struct {
		a   Attach
		ssm SenderSettleMode
		rsm ReceiverSettleMode
	}
	blk := &block{}
	a := &blk.a
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = d.stringField(&a.Name)
		case 1:
			_, err = d.uint32Field(&a.Handle)
		case 2:
			var r bool
			_, err = d.boolField(&r)
			a.Role = Role(r)
		case 3:
			var v uint64
			var null bool
			if v, null, err = d.uintValue(2); err == nil && !null {
				blk.ssm = SenderSettleMode(v)
				a.SndSettleMode = &blk.ssm
			}
		case 4:
			var v uint64
			var null bool
			if v, null, err = d.uintValue(1); err == nil && !null {
				blk.rsm = ReceiverSettleMode(v)
				a.RcvSettleMode = &blk.rsm
			}
		case 5:
			err = d.sourceField(&a.Source)
		case 6:
			err = d.targetField(&a.Target)
		case 7:
			err = d.unsettledField(&a.Unsettled)
		case 8:
			_, err = d.boolField(&a.IncompleteUnsettled)
		case 9:
			_, err = d.uint32Field(&a.InitialDeliveryCount)
		case 10:
			var null bool
			a.MaxMessageSize, null, err = d.uintValue(math.MaxUint64)
			_ = null
		case 11:
			err = d.symbolsField(&a.OfferedCapabilities)
		case 12:
			err = d.symbolsField(&a.DesiredCapabilities)
		case 13:
			err = d.fieldsField(&a.Properties)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("attach", i, err)
		}
	}
	return a, nil
}

func (d *decoder) sourceField(p **Source) error {
	code, c, n, null, err := d.describedHeader()
	if err != nil || null {
		return err
	}
	if code != DescriptorSource {
		return malformed("descriptor 0x%x where a source was expected", code)
	}
	s, err := c.source(n)
	if err != nil {
		return err
	}
	*p = s
	return c.done()
}

func (d *decoder) targetField(p **Target) error {
	code, c, n, null, err := d.describedHeader()
	if err != nil || null {
		return err
	}
	if code != DescriptorTarget {
		return malformed("descriptor 0x%x where a target was expected", code)
	}
	t, err := c.target(n)
	if err != nil {
		return err
	}
	*p = t
	return c.done()
}

const expirySessionEnd Symbol = "session-end"

func (d *decoder) source(n int) (*Source, error) {
	s := &Source{ExpiryPolicy: expirySessionEnd}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = d.address(&s.Address)
		case 1:
			_, err = d.uint32Field(&s.Durable)
		case 2:
			err = d.symbolField(&s.ExpiryPolicy)
		case 3:
			_, err = d.uint32Field(&s.Timeout)
		case 4:
			_, err = d.boolField(&s.Dynamic)
		case 5:
			err = d.fieldsField(&s.DynamicNodeProperties)
		case 6:
			err = d.symbolField(&s.DistributionMode)
		case 7:
			err = d.filterField(&s.Filter)
		case 8:
			s.DefaultOutcome, err = d.outcome()
		case 9:
			err = d.symbolsField(&s.Outcomes)
		case 10:
			err = d.symbolsField(&s.Capabilities)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("source", i, err)
		}
	}
	return s, nil
}

func (d *decoder) target(n int) (*Target, error) {
	t := &Target{ExpiryPolicy: expirySessionEnd}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = d.address(&t.Address)
		case 1:
			_, err = d.uint32Field(&t.Durable)
		case 2:
			err = d.symbolField(&t.ExpiryPolicy)
		case 3:
			_, err = d.uint32Field(&t.Timeout)
		case 4:
			_, err = d.boolField(&t.Dynamic)
		case 5:
			err = d.fieldsField(&t.DynamicNodeProperties)
		case 6:
			err = d.symbolsField(&t.Capabilities)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("target", i, err)
		}
	}
	return t, nil
}

// address reads a terminus address: a string, or a symbol (some clients
// send one).
func (d *decoder) address(p *string) error {
	c, err := d.peekByte()
	if err != nil {
		return err
	}
	if c == codeSym8 || c == codeSym32 {
		var s Symbol
		err := d.symbolField(&s)
		*p = string(s)
		return err
	}
	return d.stringField(p)
}

func (d *decoder) filterField(p *map[Symbol]any) error {
	code, err := d.readByte()
	if err != nil {
		return err
	}
	switch code {
	case codeNull:
		return nil
	case codeMap8, codeMap32:
	default:
		return malformed("constructor 0x%02x where a filter map was expected", code)
	}
	c, n, err := d.compound(code == codeMap32)
	if err != nil {
		return err
	}
	if n%2 != 0 {
		return malformed("map with an odd count %d", n)
	}
	m := make(map[Symbol]any, n/2)
	for i := 0; i < n; i += 2 {
		var k Symbol
		if err := c.symbolField(&k); err != nil {
			return err
		}
		// A filter is a described value by the specification, but clients
		// also send plain values (the JavaScript SDK's session filter is a
		// bare string): keep whatever was sent.
		v, err := c.value()
		if err != nil {
			return err
		}
		m[k] = v
	}
	*p = m
	return c.done()
}

// outcome reads a default-outcome: a known delivery state as its Go type,
// anything else as a generic value.
func (d *decoder) outcome() (any, error) {
	save := d.pos
	code, c, n, null, err := d.describedHeader()
	if err == nil && !null {
		switch code {
		case DescriptorReceived, DescriptorAccepted, DescriptorRejected, DescriptorReleased, DescriptorModified:
			s, err := c.stateBody(code, n)
			if err != nil {
				return nil, err
			}
			return s, c.done()
		}
	}
	if null {
		return nil, nil
	}
	d.pos = save
	return d.value()
}

func (d *decoder) flow(n int) (*Flow, error) {
	type block struct {
		f                                          Flow
		nextIncoming, handle, count, credit, avail uint32
	}
	blk := &block{}
	f := &blk.f
	opt := func(p *uint32, pp **uint32) error {
		ok, err := d.uint32Field(p)
		if ok {
			*pp = p
		}
		return err
	}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = opt(&blk.nextIncoming, &f.NextIncomingID)
		case 1:
			_, err = d.uint32Field(&f.IncomingWindow)
		case 2:
			_, err = d.uint32Field(&f.NextOutgoingID)
		case 3:
			_, err = d.uint32Field(&f.OutgoingWindow)
		case 4:
			err = opt(&blk.handle, &f.Handle)
		case 5:
			err = opt(&blk.count, &f.DeliveryCount)
		case 6:
			err = opt(&blk.credit, &f.LinkCredit)
		case 7:
			err = opt(&blk.avail, &f.Available)
		case 8:
			_, err = d.boolField(&f.Drain)
		case 9:
			_, err = d.boolField(&f.Echo)
		case 10:
			err = d.fieldsField(&f.Properties)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("flow", i, err)
		}
	}
	return f, nil
}

func (d *decoder) transfer(n int) (*Transfer, error) {
	// One allocation for the performative and every optional field it
	// points to.
	type block struct {
		t       Transfer
		id, mf  uint32
		settled bool
		rsm     ReceiverSettleMode
	}
	blk := &block{}
	t := &blk.t
	for i := 0; i < n; i++ {
		var err error
		var ok bool
		switch i {
		case 0:
			_, err = d.uint32Field(&t.Handle)
		case 1:
			if ok, err = d.uint32Field(&blk.id); ok {
				t.DeliveryID = &blk.id
			}
		case 2:
			err = d.binaryField(&t.DeliveryTag)
		case 3:
			if ok, err = d.uint32Field(&blk.mf); ok {
				t.MessageFormat = &blk.mf
			}
		case 4:
			if ok, err = d.boolField(&blk.settled); ok {
				t.Settled = &blk.settled
			}
		case 5:
			_, err = d.boolField(&t.More)
		case 6:
			var v uint64
			var null bool
			if v, null, err = d.uintValue(1); err == nil && !null {
				blk.rsm = ReceiverSettleMode(v)
				t.RcvSettleMode = &blk.rsm
			}
		case 7:
			err = d.stateField(&t.State)
		case 8:
			_, err = d.boolField(&t.Resume)
		case 9:
			_, err = d.boolField(&t.Aborted)
		case 10:
			_, err = d.boolField(&t.Batchable)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("transfer", i, err)
		}
	}
	return t, nil
}

func (d *decoder) disposition(n int) (*Disposition, error) {
	type block struct {
		d    Disposition
		last uint32
	}
	blk := &block{}
	p := &blk.d
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			var r bool
			_, err = d.boolField(&r)
			p.Role = Role(r)
		case 1:
			_, err = d.uint32Field(&p.First)
		case 2:
			var ok bool
			if ok, err = d.uint32Field(&blk.last); ok {
				p.Last = &blk.last
			}
		case 3:
			_, err = d.boolField(&p.Settled)
		case 4:
			err = d.stateField(&p.State)
		case 5:
			_, err = d.boolField(&p.Batchable)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("disposition", i, err)
		}
	}
	return p, nil
}

func (d *decoder) detach(n int) (*Detach, error) {
	p := &Detach{}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			_, err = d.uint32Field(&p.Handle)
		case 1:
			_, err = d.boolField(&p.Closed)
		case 2:
			err = d.errorField(&p.Error)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("detach", i, err)
		}
	}
	return p, nil
}

// errorFields decodes the single-field lists of end and close.
func (d *decoder) errorFields(n int, what string) (*Error, error) {
	var e *Error
	for i := 0; i < n; i++ {
		var err error
		if i == 0 {
			err = d.errorField(&e)
		} else {
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr(what, i, err)
		}
	}
	return e, nil
}

func (d *decoder) errorBody(n int) (*Error, error) {
	e := &Error{}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = d.symbolField(&e.Condition)
		case 1:
			err = d.stringField(&e.Description)
		case 2:
			err = d.fieldsField(&e.Info)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("error", i, err)
		}
	}
	return e, nil
}

func (d *decoder) stateBody(code uint64, n int) (DeliveryState, error) {
	switch code {
	case DescriptorAccepted, DescriptorReleased:
		for i := 0; i < n; i++ {
			if err := d.skip(); err != nil {
				return nil, fieldErr("outcome", i, err)
			}
		}
		if code == DescriptorAccepted {
			return &Accepted{}, nil
		}
		return &Released{}, nil
	case DescriptorRejected:
		r := &Rejected{}
		var err error
		r.Error, err = d.errorFields(n, "rejected")
		if err != nil {
			return nil, err
		}
		return r, nil
	case DescriptorModified:
		m := &Modified{}
		for i := 0; i < n; i++ {
			var err error
			switch i {
			case 0:
				_, err = d.boolField(&m.DeliveryFailed)
			case 1:
				_, err = d.boolField(&m.UndeliverableHere)
			case 2:
				err = d.fieldsField(&m.MessageAnnotations)
			default:
				err = d.skip()
			}
			if err != nil {
				return nil, fieldErr("modified", i, err)
			}
		}
		return m, nil
	case DescriptorReceived:
		r := &Received{}
		for i := 0; i < n; i++ {
			var err error
			switch i {
			case 0:
				_, err = d.uint32Field(&r.SectionNumber)
			case 1:
				r.SectionOffset, _, err = d.uintValue(math.MaxUint64)
			default:
				err = d.skip()
			}
			if err != nil {
				return nil, fieldErr("received", i, err)
			}
		}
		return r, nil
	}
	return nil, malformed("descriptor 0x%x where a delivery state was expected", code)
}

func (d *decoder) saslMechanisms(n int) (*SASLMechanisms, error) {
	m := &SASLMechanisms{}
	for i := 0; i < n; i++ {
		var err error
		if i == 0 {
			err = d.symbolsField(&m.Mechanisms)
		} else {
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("sasl-mechanisms", i, err)
		}
	}
	return m, nil
}

func (d *decoder) saslInit(n int) (*SASLInit, error) {
	s := &SASLInit{}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			err = d.symbolField(&s.Mechanism)
		case 1:
			err = d.binaryField(&s.InitialResponse)
		case 2:
			err = d.stringField(&s.Hostname)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("sasl-init", i, err)
		}
	}
	return s, nil
}

func (d *decoder) singleBinary(n int, what string) ([]byte, error) {
	var b []byte
	for i := 0; i < n; i++ {
		var err error
		if i == 0 {
			err = d.binaryField(&b)
		} else {
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr(what, i, err)
		}
	}
	return b, nil
}

func (d *decoder) saslOutcome(n int) (*SASLOutcome, error) {
	s := &SASLOutcome{}
	for i := 0; i < n; i++ {
		var err error
		switch i {
		case 0:
			var v uint64
			v, _, err = d.uintValue(math.MaxUint8)
			s.Code = uint8(v)
		case 1:
			err = d.binaryField(&s.AdditionalData)
		default:
			err = d.skip()
		}
		if err != nil {
			return nil, fieldErr("sasl-outcome", i, err)
		}
	}
	return s, nil
}
