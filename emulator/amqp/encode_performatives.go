package amqp

import (
	"fmt"
	"math"
	"time"
)

// listEncoder writes the fields of a described list. Every field of the
// type is written, an absent one as null: AMQP lets a sender leave out
// trailing nulls, but Service Bus never does (Microsoft.Azure.Amqp encodes
// each described list with its full field count), and clients that read
// fields by position depend on it: uamqp (the Python SDK up to 7.8) reports
// an attach without max-message-size, and pyamqp (the Python SDK from 7.9)
// indexes begin, attach and transfer fields and appends a transfer's payload
// after the last decoded field.
type listEncoder struct {
	b     []byte
	hdr   int // offset of the reserved compound header
	n     int // fields written so far
	depth int
	err   error
}

func beginList(dst []byte, code uint64, depth int) listEncoder {
	dst = append(dst, codeDescribed)
	dst = appendUlong(dst, code)
	dst, hdr := reserveCompound(dst)
	return listEncoder{b: dst, hdr: hdr, depth: depth}
}

func (l *listEncoder) mark() { l.n++ }

func (l *listEncoder) null() {
	l.b = append(l.b, codeNull)
	l.n++
}

func (l *listEncoder) uint(v uint32) {
	l.b = appendUint(l.b, v)
	l.mark()
}

// uintOpt writes v, or null when v equals the field's default def.
func (l *listEncoder) uintOpt(v, def uint32) {
	if v == def {
		l.null()
		return
	}
	l.uint(v)
}

func (l *listEncoder) uintPtr(v *uint32) {
	if v == nil {
		l.null()
		return
	}
	l.uint(*v)
}

func (l *listEncoder) ulongOpt(v uint64) {
	if v == 0 {
		l.null()
		return
	}
	l.b = appendUlong(l.b, v)
	l.mark()
}

func (l *listEncoder) ubyte(v uint8) {
	l.b = append(l.b, codeUbyte, v)
	l.mark()
}

func (l *listEncoder) ushort(v uint16) {
	l.b = append(l.b, codeUshort, byte(v>>8), byte(v))
	l.mark()
}

func (l *listEncoder) bool(v bool) {
	l.b = appendBool(l.b, v)
	l.mark()
}

// boolOpt writes true, or null for false (the default of every optional
// boolean field).
func (l *listEncoder) boolOpt(v bool) {
	if !v {
		l.null()
		return
	}
	l.bool(true)
}

func (l *listEncoder) stringOpt(s string) {
	if s == "" {
		l.null()
		return
	}
	l.string(s)
}

func (l *listEncoder) string(s string) {
	if l.err != nil {
		return
	}
	l.b, l.err = appendString(l.b, s)
	l.mark()
}

func (l *listEncoder) symbolOpt(s Symbol) {
	if s == "" {
		l.null()
		return
	}
	l.symbol(s)
}

func (l *listEncoder) symbol(s Symbol) {
	if l.err != nil {
		return
	}
	l.b, l.err = appendSymbol(l.b, s)
	l.mark()
}

func (l *listEncoder) binary(b []byte) {
	if b == nil {
		l.null()
		return
	}
	if l.err != nil {
		return
	}
	l.b, l.err = appendBinary(l.b, b)
	l.mark()
}

func (l *listEncoder) symbols(v []Symbol) {
	if v == nil {
		l.null()
		return
	}
	if l.err != nil {
		return
	}
	l.b, l.err = appendSymbolArray(l.b, v)
	l.mark()
}

func (l *listEncoder) fields(m map[Symbol]any) {
	if m == nil {
		l.null()
		return
	}
	if l.err != nil {
		return
	}
	l.b, l.err = appendFields(l.b, m, l.depth+1)
	l.mark()
}

func (l *listEncoder) value(v any) {
	if v == nil {
		l.null()
		return
	}
	if l.err != nil {
		return
	}
	l.b, l.err = appendValue(l.b, v, l.depth+1)
	l.mark()
}

func (l *listEncoder) error(e *Error) {
	if e == nil {
		l.null()
		return
	}
	if l.err != nil {
		return
	}
	l.b, l.err = appendError(l.b, e, l.depth+1)
	l.mark()
}

func (l *listEncoder) state(s DeliveryState) {
	if isNilState(s) {
		l.null()
		return
	}
	if l.err != nil {
		return
	}
	l.b, l.err = appendState(l.b, s, l.depth+1)
	l.mark()
}

func (l *listEncoder) finish() ([]byte, error) {
	if l.err != nil {
		return l.b, l.err
	}
	if l.n == 0 {
		return append(l.b[:l.hdr], codeList0), nil
	}
	return finishCompound(l.b, l.hdr, codeList8, codeList32, l.n)
}

func isNilState(s DeliveryState) bool {
	switch s := s.(type) {
	case nil:
		return true
	case *Accepted:
		return s == nil
	case *Rejected:
		return s == nil
	case *Released:
		return s == nil
	case *Modified:
		return s == nil
	case *Received:
		return s == nil
	}
	return false
}

// appendComposite encodes the performative, terminus, error, delivery-state
// and SASL types, as pointers or values.
func appendComposite(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case *Open:
		if v != nil {
			return appendOpen(dst, v)
		}
	case Open:
		return appendOpen(dst, &v)
	case *Begin:
		if v != nil {
			return appendBegin(dst, v)
		}
	case Begin:
		return appendBegin(dst, &v)
	case *Attach:
		if v != nil {
			return appendAttach(dst, v)
		}
	case Attach:
		return appendAttach(dst, &v)
	case *Flow:
		if v != nil {
			return appendFlow(dst, v)
		}
	case Flow:
		return appendFlow(dst, &v)
	case *Transfer:
		if v != nil {
			return appendTransfer(dst, v)
		}
	case Transfer:
		return appendTransfer(dst, &v)
	case *Disposition:
		if v != nil {
			return appendDisposition(dst, v)
		}
	case Disposition:
		return appendDisposition(dst, &v)
	case *Detach:
		if v != nil {
			return appendDetach(dst, v)
		}
	case Detach:
		return appendDetach(dst, &v)
	case *End:
		if v != nil {
			return appendEnd(dst, v)
		}
	case End:
		return appendEnd(dst, &v)
	case *Close:
		if v != nil {
			return appendClose(dst, v)
		}
	case Close:
		return appendClose(dst, &v)
	case *Error:
		if v != nil {
			return appendError(dst, v, depth)
		}
	case Error:
		return appendError(dst, &v, depth)
	case *Source:
		if v != nil {
			return appendSource(dst, v, depth)
		}
	case Source:
		return appendSource(dst, &v, depth)
	case *Target:
		if v != nil {
			return appendTarget(dst, v, depth)
		}
	case Target:
		return appendTarget(dst, &v, depth)
	case *Accepted, *Rejected, *Released, *Modified, *Received:
		if !isNilState(v.(DeliveryState)) {
			return appendState(dst, v.(DeliveryState), depth)
		}
	case Accepted:
		return appendState(dst, &v, depth)
	case Rejected:
		return appendState(dst, &v, depth)
	case Released:
		return appendState(dst, &v, depth)
	case Modified:
		return appendState(dst, &v, depth)
	case Received:
		return appendState(dst, &v, depth)
	case *SASLMechanisms:
		if v != nil {
			return appendSASLMechanisms(dst, v)
		}
	case SASLMechanisms:
		return appendSASLMechanisms(dst, &v)
	case *SASLInit:
		if v != nil {
			return appendSASLInit(dst, v)
		}
	case SASLInit:
		return appendSASLInit(dst, &v)
	case *SASLChallenge:
		if v != nil {
			return appendSASLChallenge(dst, v)
		}
	case SASLChallenge:
		return appendSASLChallenge(dst, &v)
	case *SASLResponse:
		if v != nil {
			return appendSASLResponse(dst, v)
		}
	case SASLResponse:
		return appendSASLResponse(dst, &v)
	case *SASLOutcome:
		if v != nil {
			return appendSASLOutcome(dst, v)
		}
	case SASLOutcome:
		return appendSASLOutcome(dst, &v)
	default:
		return dst, fmt.Errorf("%w: unsupported type %T", errEncode, v)
	}
	// A typed nil pointer.
	return append(dst, codeNull), nil
}

func millis(d time.Duration) (uint32, error) {
	if d < 0 {
		return 0, fmt.Errorf("%w: negative idle timeout %v", errEncode, d)
	}
	ms := d / time.Millisecond
	if ms > math.MaxUint32 {
		return 0, fmt.Errorf("%w: idle timeout %v too large", errEncode, d)
	}
	return uint32(ms), nil
}

func appendOpen(dst []byte, o *Open) ([]byte, error) {
	idle, err := millis(o.IdleTimeout)
	if err != nil {
		return dst, err
	}
	l := beginList(dst, DescriptorOpen, 0)
	l.string(o.ContainerID)
	l.stringOpt(o.Hostname)
	l.uint(o.MaxFrameSize)
	l.ushort(o.ChannelMax)
	l.uintOpt(idle, 0)
	l.symbols(o.OutgoingLocales)
	l.symbols(o.IncomingLocales)
	l.symbols(o.OfferedCapabilities)
	l.symbols(o.DesiredCapabilities)
	l.fields(o.Properties)
	return l.finish()
}

func appendBegin(dst []byte, b *Begin) ([]byte, error) {
	l := beginList(dst, DescriptorBegin, 0)
	if b.RemoteChannel == nil {
		l.null()
	} else {
		l.ushort(*b.RemoteChannel)
	}
	l.uint(b.NextOutgoingID)
	l.uint(b.IncomingWindow)
	l.uint(b.OutgoingWindow)
	l.uint(b.HandleMax)
	l.symbols(b.OfferedCapabilities)
	l.symbols(b.DesiredCapabilities)
	l.fields(b.Properties)
	return l.finish()
}

func appendAttach(dst []byte, a *Attach) ([]byte, error) {
	l := beginList(dst, DescriptorAttach, 0)
	l.string(a.Name)
	l.uint(a.Handle)
	l.bool(bool(a.Role))
	if a.SndSettleMode == nil {
		l.null()
	} else {
		l.ubyte(uint8(*a.SndSettleMode))
	}
	if a.RcvSettleMode == nil {
		l.null()
	} else {
		l.ubyte(uint8(*a.RcvSettleMode))
	}
	if a.Source == nil {
		l.null()
	} else if l.err == nil {
		l.b, l.err = appendSource(l.b, a.Source, 1)
		l.mark()
	}
	if a.Target == nil {
		l.null()
	} else if l.err == nil {
		l.b, l.err = appendTarget(l.b, a.Target, 1)
		l.mark()
	}
	if a.Unsettled == nil {
		l.null()
	} else if l.err == nil {
		l.b, l.err = appendMapAny(l.b, a.Unsettled, 1)
		l.mark()
	}
	l.boolOpt(a.IncompleteUnsettled)
	l.uint(a.InitialDeliveryCount)
	l.ulongOpt(a.MaxMessageSize)
	l.symbols(a.OfferedCapabilities)
	l.symbols(a.DesiredCapabilities)
	l.fields(a.Properties)
	return l.finish()
}

func appendSource(dst []byte, s *Source, depth int) ([]byte, error) {
	l := beginList(dst, DescriptorSource, depth)
	l.stringOpt(s.Address)
	l.uintOpt(s.Durable, 0)
	l.symbolOpt(s.ExpiryPolicy)
	l.uintOpt(s.Timeout, 0)
	l.boolOpt(s.Dynamic)
	l.fields(s.DynamicNodeProperties)
	l.symbolOpt(s.DistributionMode)
	if s.Filter == nil {
		l.null()
	} else if l.err == nil {
		l.b, l.err = appendFields(l.b, s.Filter, depth+1)
		l.mark()
	}
	if ds, ok := s.DefaultOutcome.(DeliveryState); ok {
		l.state(ds)
	} else {
		l.value(s.DefaultOutcome)
	}
	l.symbols(s.Outcomes)
	l.symbols(s.Capabilities)
	return l.finish()
}

func appendTarget(dst []byte, t *Target, depth int) ([]byte, error) {
	l := beginList(dst, DescriptorTarget, depth)
	l.stringOpt(t.Address)
	l.uintOpt(t.Durable, 0)
	l.symbolOpt(t.ExpiryPolicy)
	l.uintOpt(t.Timeout, 0)
	l.boolOpt(t.Dynamic)
	l.fields(t.DynamicNodeProperties)
	l.symbols(t.Capabilities)
	return l.finish()
}

func appendFlow(dst []byte, f *Flow) ([]byte, error) {
	l := beginList(dst, DescriptorFlow, 0)
	l.uintPtr(f.NextIncomingID)
	l.uint(f.IncomingWindow)
	l.uint(f.NextOutgoingID)
	l.uint(f.OutgoingWindow)
	l.uintPtr(f.Handle)
	l.uintPtr(f.DeliveryCount)
	l.uintPtr(f.LinkCredit)
	l.uintPtr(f.Available)
	l.boolOpt(f.Drain)
	l.boolOpt(f.Echo)
	l.fields(f.Properties)
	return l.finish()
}

func appendTransfer(dst []byte, t *Transfer) ([]byte, error) {
	l := beginList(dst, DescriptorTransfer, 0)
	l.uint(t.Handle)
	l.uintPtr(t.DeliveryID)
	l.binary(t.DeliveryTag)
	l.uintPtr(t.MessageFormat)
	if t.Settled == nil {
		l.null()
	} else {
		l.bool(*t.Settled)
	}
	l.boolOpt(t.More)
	if t.RcvSettleMode == nil {
		l.null()
	} else {
		l.ubyte(uint8(*t.RcvSettleMode))
	}
	l.state(t.State)
	l.boolOpt(t.Resume)
	l.boolOpt(t.Aborted)
	l.boolOpt(t.Batchable)
	return l.finish()
}

func appendDisposition(dst []byte, d *Disposition) ([]byte, error) {
	l := beginList(dst, DescriptorDisposition, 0)
	l.bool(bool(d.Role))
	l.uint(d.First)
	l.uintPtr(d.Last)
	l.boolOpt(d.Settled)
	l.state(d.State)
	l.boolOpt(d.Batchable)
	return l.finish()
}

func appendDetach(dst []byte, d *Detach) ([]byte, error) {
	l := beginList(dst, DescriptorDetach, 0)
	l.uint(d.Handle)
	l.boolOpt(d.Closed)
	l.error(d.Error)
	return l.finish()
}

func appendEnd(dst []byte, e *End) ([]byte, error) {
	l := beginList(dst, DescriptorEnd, 0)
	l.error(e.Error)
	return l.finish()
}

func appendClose(dst []byte, c *Close) ([]byte, error) {
	l := beginList(dst, DescriptorClose, 0)
	l.error(c.Error)
	return l.finish()
}

func appendError(dst []byte, e *Error, depth int) ([]byte, error) {
	l := beginList(dst, DescriptorError, depth)
	l.symbol(e.Condition)
	l.stringOpt(e.Description)
	l.fields(e.Info)
	return l.finish()
}

func appendState(dst []byte, s DeliveryState, depth int) ([]byte, error) {
	switch s := s.(type) {
	case *Accepted:
		return append(dst, codeDescribed, codeSmallUlong, byte(DescriptorAccepted), codeList0), nil
	case *Released:
		return append(dst, codeDescribed, codeSmallUlong, byte(DescriptorReleased), codeList0), nil
	case *Rejected:
		l := beginList(dst, DescriptorRejected, depth)
		l.error(s.Error)
		return l.finish()
	case *Modified:
		l := beginList(dst, DescriptorModified, depth)
		l.boolOpt(s.DeliveryFailed)
		l.boolOpt(s.UndeliverableHere)
		l.fields(s.MessageAnnotations)
		return l.finish()
	case *Received:
		l := beginList(dst, DescriptorReceived, depth)
		l.uint(s.SectionNumber)
		l.b = appendUlong(l.b, s.SectionOffset)
		l.mark()
		return l.finish()
	}
	return dst, fmt.Errorf("%w: unsupported delivery state %T", errEncode, s)
}

func appendSASLMechanisms(dst []byte, m *SASLMechanisms) ([]byte, error) {
	l := beginList(dst, DescriptorSASLMechanisms, 0)
	if m.Mechanisms == nil {
		// Mandatory field: an empty array rather than null.
		l.symbols([]Symbol{})
	} else {
		l.symbols(m.Mechanisms)
	}
	return l.finish()
}

func appendSASLInit(dst []byte, i *SASLInit) ([]byte, error) {
	l := beginList(dst, DescriptorSASLInit, 0)
	l.symbol(i.Mechanism)
	l.binary(i.InitialResponse)
	l.stringOpt(i.Hostname)
	return l.finish()
}

func appendSASLChallenge(dst []byte, c *SASLChallenge) ([]byte, error) {
	l := beginList(dst, DescriptorSASLChallenge, 0)
	if c.Challenge == nil {
		l.binary([]byte{})
	} else {
		l.binary(c.Challenge)
	}
	return l.finish()
}

func appendSASLResponse(dst []byte, r *SASLResponse) ([]byte, error) {
	l := beginList(dst, DescriptorSASLResponse, 0)
	if r.Response == nil {
		l.binary([]byte{})
	} else {
		l.binary(r.Response)
	}
	return l.finish()
}

func appendSASLOutcome(dst []byte, o *SASLOutcome) ([]byte, error) {
	l := beginList(dst, DescriptorSASLOutcome, 0)
	l.ubyte(o.Code)
	l.binary(o.AdditionalData)
	return l.finish()
}
