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

// Each composite type is declared once below as a fieldTable: its fields in
// list order, each with its name in the specification and a function that
// returns a pointer to the Go struct field the value goes into. The pointer's
// type says how the value is decoded (see decoder.into): *uint32 takes any
// unsigned integer encoding up to 2³²-1, *Symbol a symbol, **Error a
// described error list, and so on; a few named types (address, filterSet,
// milliseconds) mark fields decoded in their own way. One routine,
// fieldTable.decode, walks a list against its table, with no reflection:
//
//   - a null field, and every field past the end of a shorter list, keeps the
//     value the struct was created with (the AMQP default, or the zero
//     value); mandatory fields are not enforced, as peers that omit them are
//     tolerated (an open with no fields decodes with its defaults);
//   - fields beyond the table (a later protocol version's) are decoded and
//     discarded;
//   - an error names the composite, the field's position and its name.
//
// Performatives with optional fields decode into a block type that also holds
// the values those pointers point to (see point), so that decoding one takes
// one allocation.

// A field is one position of a composite's list: its name and where a
// non-null value goes.
type field[T any] struct {
	name string
	dst  func(v *T) any
}

// A fieldTable declares the fields of one composite type, in list order.
type fieldTable[T any] struct {
	name   string
	fields []field[T]
}

// decode reads the n fields of a list body into v.
func (t *fieldTable[T]) decode(d *decoder, n int, v *T) error {
	declared := t.fields[:min(n, len(t.fields))]
	for i := range declared {
		f := &declared[i]
		null, err := d.isNull()
		if err == nil && !null {
			// The most frequent destination skips into's type switch.
			p := f.dst(v)
			if u, ok := p.(*uint32); ok {
				err = uintInto(d, u, math.MaxUint32)
			} else {
				err = d.into(p)
			}
		}
		if err != nil {
			return malformed("%s field %d (%s): %v", t.name, i, f.name, unwrapMalformed(err))
		}
	}
	for i := len(declared); i < n; i++ {
		if _, err := d.value(); err != nil {
			return malformed("%s field %d: %v", t.name, i, unwrapMalformed(err))
		}
	}
	return nil
}

// decodeAs decodes the n fields of a list body into v and returns v.
func decodeAs[T any](d *decoder, n int, t *fieldTable[T], v *T) (*T, error) {
	return v, t.decode(d, n, v)
}

// point makes the optional field *p point at v, whose value is decoded next.
func point[U any](p **U, v *U) *U {
	*p = v
	return v
}

// Named types of destinations decoded in their own way.
type (
	address      string         // a string, or a symbol (some clients send one)
	filterSet    map[Symbol]any // a source's filter map, values kept as decoded
	milliseconds time.Duration  // a uint count of milliseconds
)

var openFields = fieldTable[Open]{"open", []field[Open]{
	{"container-id", func(v *Open) any { return &v.ContainerID }},
	{"hostname", func(v *Open) any { return &v.Hostname }},
	{"max-frame-size", func(v *Open) any { return &v.MaxFrameSize }},
	{"channel-max", func(v *Open) any { return &v.ChannelMax }},
	{"idle-time-out", func(v *Open) any { return (*milliseconds)(&v.IdleTimeout) }},
	{"outgoing-locales", func(v *Open) any { return &v.OutgoingLocales }},
	{"incoming-locales", func(v *Open) any { return &v.IncomingLocales }},
	{"offered-capabilities", func(v *Open) any { return &v.OfferedCapabilities }},
	{"desired-capabilities", func(v *Open) any { return &v.DesiredCapabilities }},
	{"properties", func(v *Open) any { return &v.Properties }},
}}

type beginBlock struct {
	Begin
	remoteChannel uint16
}

var beginFields = fieldTable[beginBlock]{"begin", []field[beginBlock]{
	{"remote-channel", func(v *beginBlock) any { return point(&v.RemoteChannel, &v.remoteChannel) }},
	{"next-outgoing-id", func(v *beginBlock) any { return &v.NextOutgoingID }},
	{"incoming-window", func(v *beginBlock) any { return &v.IncomingWindow }},
	{"outgoing-window", func(v *beginBlock) any { return &v.OutgoingWindow }},
	{"handle-max", func(v *beginBlock) any { return &v.HandleMax }},
	{"offered-capabilities", func(v *beginBlock) any { return &v.OfferedCapabilities }},
	{"desired-capabilities", func(v *beginBlock) any { return &v.DesiredCapabilities }},
	{"properties", func(v *beginBlock) any { return &v.Properties }},
}}

type attachBlock struct {
	Attach
	ssm SenderSettleMode
	rsm ReceiverSettleMode
}

var attachFields = fieldTable[attachBlock]{"attach", []field[attachBlock]{
	{"name", func(v *attachBlock) any { return &v.Name }},
	{"handle", func(v *attachBlock) any { return &v.Handle }},
	{"role", func(v *attachBlock) any { return &v.Role }},
	{"snd-settle-mode", func(v *attachBlock) any { return point(&v.SndSettleMode, &v.ssm) }},
	{"rcv-settle-mode", func(v *attachBlock) any { return point(&v.RcvSettleMode, &v.rsm) }},
	{"source", func(v *attachBlock) any { return &v.Source }},
	{"target", func(v *attachBlock) any { return &v.Target }},
	{"unsettled", func(v *attachBlock) any { return &v.Unsettled }},
	{"incomplete-unsettled", func(v *attachBlock) any { return &v.IncompleteUnsettled }},
	{"initial-delivery-count", func(v *attachBlock) any { return &v.InitialDeliveryCount }},
	{"max-message-size", func(v *attachBlock) any { return &v.MaxMessageSize }},
	{"offered-capabilities", func(v *attachBlock) any { return &v.OfferedCapabilities }},
	{"desired-capabilities", func(v *attachBlock) any { return &v.DesiredCapabilities }},
	{"properties", func(v *attachBlock) any { return &v.Properties }},
}}

const expirySessionEnd Symbol = "session-end"

var sourceFields = fieldTable[Source]{"source", []field[Source]{
	{"address", func(v *Source) any { return (*address)(&v.Address) }},
	{"durable", func(v *Source) any { return &v.Durable }},
	{"expiry-policy", func(v *Source) any { return &v.ExpiryPolicy }},
	{"timeout", func(v *Source) any { return &v.Timeout }},
	{"dynamic", func(v *Source) any { return &v.Dynamic }},
	{"dynamic-node-properties", func(v *Source) any { return &v.DynamicNodeProperties }},
	{"distribution-mode", func(v *Source) any { return &v.DistributionMode }},
	{"filter", func(v *Source) any { return (*filterSet)(&v.Filter) }},
	{"default-outcome", func(v *Source) any { return &v.DefaultOutcome }},
	{"outcomes", func(v *Source) any { return &v.Outcomes }},
	{"capabilities", func(v *Source) any { return &v.Capabilities }},
}}

var targetFields = fieldTable[Target]{"target", []field[Target]{
	{"address", func(v *Target) any { return (*address)(&v.Address) }},
	{"durable", func(v *Target) any { return &v.Durable }},
	{"expiry-policy", func(v *Target) any { return &v.ExpiryPolicy }},
	{"timeout", func(v *Target) any { return &v.Timeout }},
	{"dynamic", func(v *Target) any { return &v.Dynamic }},
	{"dynamic-node-properties", func(v *Target) any { return &v.DynamicNodeProperties }},
	{"capabilities", func(v *Target) any { return &v.Capabilities }},
}}

type flowBlock struct {
	Flow
	nextIncoming, handle, count, credit, avail uint32
}

var flowFields = fieldTable[flowBlock]{"flow", []field[flowBlock]{
	{"next-incoming-id", func(v *flowBlock) any { return point(&v.NextIncomingID, &v.nextIncoming) }},
	{"incoming-window", func(v *flowBlock) any { return &v.IncomingWindow }},
	{"next-outgoing-id", func(v *flowBlock) any { return &v.NextOutgoingID }},
	{"outgoing-window", func(v *flowBlock) any { return &v.OutgoingWindow }},
	{"handle", func(v *flowBlock) any { return point(&v.Handle, &v.handle) }},
	{"delivery-count", func(v *flowBlock) any { return point(&v.DeliveryCount, &v.count) }},
	{"link-credit", func(v *flowBlock) any { return point(&v.LinkCredit, &v.credit) }},
	{"available", func(v *flowBlock) any { return point(&v.Available, &v.avail) }},
	{"drain", func(v *flowBlock) any { return &v.Drain }},
	{"echo", func(v *flowBlock) any { return &v.Echo }},
	{"properties", func(v *flowBlock) any { return &v.Properties }},
}}

type transferBlock struct {
	Transfer
	id, mf  uint32
	settled bool
	rsm     ReceiverSettleMode
}

var transferFields = fieldTable[transferBlock]{"transfer", []field[transferBlock]{
	{"handle", func(v *transferBlock) any { return &v.Handle }},
	{"delivery-id", func(v *transferBlock) any { return point(&v.DeliveryID, &v.id) }},
	{"delivery-tag", func(v *transferBlock) any { return &v.DeliveryTag }},
	{"message-format", func(v *transferBlock) any { return point(&v.MessageFormat, &v.mf) }},
	{"settled", func(v *transferBlock) any { return point(&v.Settled, &v.settled) }},
	{"more", func(v *transferBlock) any { return &v.More }},
	{"rcv-settle-mode", func(v *transferBlock) any { return point(&v.RcvSettleMode, &v.rsm) }},
	{"state", func(v *transferBlock) any { return &v.State }},
	{"resume", func(v *transferBlock) any { return &v.Resume }},
	{"aborted", func(v *transferBlock) any { return &v.Aborted }},
	{"batchable", func(v *transferBlock) any { return &v.Batchable }},
}}

type dispositionBlock struct {
	Disposition
	last uint32
}

var dispositionFields = fieldTable[dispositionBlock]{"disposition", []field[dispositionBlock]{
	{"role", func(v *dispositionBlock) any { return &v.Role }},
	{"first", func(v *dispositionBlock) any { return &v.First }},
	{"last", func(v *dispositionBlock) any { return point(&v.Last, &v.last) }},
	{"settled", func(v *dispositionBlock) any { return &v.Settled }},
	{"state", func(v *dispositionBlock) any { return &v.State }},
	{"batchable", func(v *dispositionBlock) any { return &v.Batchable }},
}}

var (
	detachFields = fieldTable[Detach]{"detach", []field[Detach]{
		{"handle", func(v *Detach) any { return &v.Handle }},
		{"closed", func(v *Detach) any { return &v.Closed }},
		{"error", func(v *Detach) any { return &v.Error }},
	}}
	endFields   = fieldTable[End]{"end", []field[End]{{"error", func(v *End) any { return &v.Error }}}}
	closeFields = fieldTable[Close]{"close", []field[Close]{{"error", func(v *Close) any { return &v.Error }}}}
	errorFields = fieldTable[Error]{"error", []field[Error]{
		{"condition", func(v *Error) any { return &v.Condition }},
		{"description", func(v *Error) any { return &v.Description }},
		{"info", func(v *Error) any { return &v.Info }},
	}}
)

var (
	acceptedFields = fieldTable[Accepted]{name: "accepted"}
	releasedFields = fieldTable[Released]{name: "released"}
	rejectedFields = fieldTable[Rejected]{"rejected", []field[Rejected]{{"error", func(v *Rejected) any { return &v.Error }}}}
	modifiedFields = fieldTable[Modified]{"modified", []field[Modified]{
		{"delivery-failed", func(v *Modified) any { return &v.DeliveryFailed }},
		{"undeliverable-here", func(v *Modified) any { return &v.UndeliverableHere }},
		{"message-annotations", func(v *Modified) any { return &v.MessageAnnotations }},
	}}
	receivedFields = fieldTable[Received]{"received", []field[Received]{
		{"section-number", func(v *Received) any { return &v.SectionNumber }},
		{"section-offset", func(v *Received) any { return &v.SectionOffset }},
	}}
)

var (
	saslMechanismsFields = fieldTable[SASLMechanisms]{"sasl-mechanisms", []field[SASLMechanisms]{
		{"sasl-server-mechanisms", func(v *SASLMechanisms) any { return &v.Mechanisms }},
	}}
	saslInitFields = fieldTable[SASLInit]{"sasl-init", []field[SASLInit]{
		{"mechanism", func(v *SASLInit) any { return &v.Mechanism }},
		{"initial-response", func(v *SASLInit) any { return &v.InitialResponse }},
		{"hostname", func(v *SASLInit) any { return &v.Hostname }},
	}}
	saslChallengeFields = fieldTable[SASLChallenge]{"sasl-challenge", []field[SASLChallenge]{
		{"challenge", func(v *SASLChallenge) any { return &v.Challenge }},
	}}
	saslResponseFields = fieldTable[SASLResponse]{"sasl-response", []field[SASLResponse]{
		{"response", func(v *SASLResponse) any { return &v.Response }},
	}}
	saslOutcomeFields = fieldTable[SASLOutcome]{"sasl-outcome", []field[SASLOutcome]{
		{"code", func(v *SASLOutcome) any { return &v.Code }},
		{"additional-data", func(v *SASLOutcome) any { return &v.AdditionalData }},
	}}
)

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
		v, err = decodeAs(&c, n, &openFields, &Open{MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16})
	case DescriptorBegin:
		b := &beginBlock{Begin: Begin{HandleMax: math.MaxUint32}}
		v, err = &b.Begin, beginFields.decode(&c, n, b)
	case DescriptorAttach:
		b := &attachBlock{}
		v, err = &b.Attach, attachFields.decode(&c, n, b)
	case DescriptorFlow:
		b := &flowBlock{}
		v, err = &b.Flow, flowFields.decode(&c, n, b)
	case DescriptorTransfer:
		b := &transferBlock{}
		v, err = &b.Transfer, transferFields.decode(&c, n, b)
	case DescriptorDisposition:
		b := &dispositionBlock{}
		v, err = &b.Disposition, dispositionFields.decode(&c, n, b)
	case DescriptorDetach:
		v, err = decodeAs(&c, n, &detachFields, &Detach{})
	case DescriptorEnd:
		v, err = decodeAs(&c, n, &endFields, &End{})
	case DescriptorClose:
		v, err = decodeAs(&c, n, &closeFields, &Close{})
	case DescriptorError:
		v, err = decodeAs(&c, n, &errorFields, &Error{})
	case DescriptorSource:
		v, err = decodeAs(&c, n, &sourceFields, &Source{ExpiryPolicy: expirySessionEnd})
	case DescriptorTarget:
		v, err = decodeAs(&c, n, &targetFields, &Target{ExpiryPolicy: expirySessionEnd})
	case DescriptorReceived, DescriptorAccepted, DescriptorRejected, DescriptorReleased, DescriptorModified:
		v, err = c.state(code, n)
	case DescriptorSASLMechanisms:
		v, err = decodeAs(&c, n, &saslMechanismsFields, &SASLMechanisms{})
	case DescriptorSASLInit:
		v, err = decodeAs(&c, n, &saslInitFields, &SASLInit{})
	case DescriptorSASLChallenge:
		v, err = decodeAs(&c, n, &saslChallengeFields, &SASLChallenge{})
	case DescriptorSASLResponse:
		v, err = decodeAs(&c, n, &saslResponseFields, &SASLResponse{})
	case DescriptorSASLOutcome:
		v, err = decodeAs(&c, n, &saslOutcomeFields, &SASLOutcome{})
	default:
		return nil, malformed("unknown descriptor 0x%x", code)
	}
	if err != nil {
		return nil, err
	}
	return v, c.done()
}

// state decodes the fields of a delivery state whose descriptor is code.
func (d *decoder) state(code uint64, n int) (DeliveryState, error) {
	switch code {
	case DescriptorAccepted:
		return decodeAs(d, n, &acceptedFields, &Accepted{})
	case DescriptorReleased:
		return decodeAs(d, n, &releasedFields, &Released{})
	case DescriptorRejected:
		return decodeAs(d, n, &rejectedFields, &Rejected{})
	case DescriptorModified:
		return decodeAs(d, n, &modifiedFields, &Modified{})
	case DescriptorReceived:
		return decodeAs(d, n, &receivedFields, &Received{})
	}
	return nil, malformed("descriptor 0x%x where a delivery state was expected", code)
}

// into decodes one non-null field value into p, as p's type says.
func (d *decoder) into(p any) error {
	switch p := p.(type) {
	case *uint32:
		return uintInto(d, p, math.MaxUint32)
	case *bool:
		return d.boolInto(p)
	case *Role:
		return d.boolInto((*bool)(p))
	case *[]byte:
		return d.binaryInto(p)
	case *DeliveryState:
		return d.stateInto(p)
	case *string:
		return d.stringInto(p)
	case *Symbol:
		return d.symbolInto(p)
	case *[]Symbol:
		return d.symbolsInto(p)
	case *map[Symbol]any:
		return d.fieldsInto(p)
	case **Error:
		*p = &Error{}
		return nested(d, DescriptorError, "an error", &errorFields, *p)
	case *uint16:
		return uintInto(d, p, math.MaxUint16)
	case *uint8:
		return uintInto(d, p, math.MaxUint8)
	case *uint64:
		return uintInto(d, p, math.MaxUint64)
	case *SenderSettleMode:
		return uintInto(d, p, uint64(SenderSettleModeMixed))
	case *ReceiverSettleMode:
		return uintInto(d, p, uint64(ReceiverSettleModeSecond))
	case *milliseconds:
		var ms uint32
		err := uintInto(d, &ms, math.MaxUint32)
		*p = milliseconds(time.Duration(ms) * time.Millisecond)
		return err
	case *address:
		if c, err := d.peekByte(); err == nil && (c == codeSym8 || c == codeSym32) {
			return d.symbolInto((*Symbol)(p))
		}
		return d.stringInto((*string)(p))
	case **Source:
		*p = &Source{ExpiryPolicy: expirySessionEnd}
		return nested(d, DescriptorSource, "a source", &sourceFields, *p)
	case **Target:
		*p = &Target{ExpiryPolicy: expirySessionEnd}
		return nested(d, DescriptorTarget, "a target", &targetFields, *p)
	case *filterSet:
		return d.filterInto((*map[Symbol]any)(p))
	case *map[any]any: // an attach's unsettled map
		return d.unsettledInto(p)
	case *any: // a source's default-outcome
		return d.outcomeInto(p)
	}
	return malformed("no decoder for a field of Go type %T", p)
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

// nested decodes a field holding a composite of the one type want into v.
func nested[T any](d *decoder, want uint64, what string, t *fieldTable[T], v *T) error {
	code, c, n, _, err := d.describedHeader()
	if err != nil {
		return err
	}
	if code != want {
		return malformed("descriptor 0x%x where %s was expected", code, what)
	}
	if err := t.decode(&c, n, v); err != nil {
		return err
	}
	return c.done()
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
