package broker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// Annotation keys the broker owns or checks.
const (
	annSequenceNumber        = "x-opt-sequence-number"
	annEnqueuedTime          = "x-opt-enqueued-time"
	annLockedUntil           = "x-opt-locked-until"
	annMessageState          = "x-opt-message-state"
	annScheduledEnqueueTime  = "x-opt-scheduled-enqueue-time"
	annEnqueueSequenceNumber = "x-opt-enqueue-sequence-number"
	annPartitionKey          = "x-opt-partition-key"
	annDeadLetterSource      = "x-opt-deadletter-source"
	annLockToken             = "x-opt-lock-token"

	propDeadLetterReason      = "DeadLetterReason"
	propDeadLetterDescription = "DeadLetterErrorDescription"
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidMessage)
}

// normalizeAnnotations rewrites Symbol keys as strings (go-amqp decodes
// symbols as strings; a Go sender may use goamqp.Symbol), so later lookups
// need only string keys.
func normalizeAnnotations(a goamqp.Annotations) {
	for k, v := range a {
		if sym, ok := k.(goamqp.Symbol); ok {
			delete(a, k)
			a[string(sym)] = v
		}
	}
}

func isInteger(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

// prepare validates and normalises an inbound message (docs/servicebus-protocol.md §7.3) and
// returns its scheduled enqueue time (zero if none).
func prepare(m *goamqp.Message) (time.Time, error) {
	if m == nil {
		return time.Time{}, invalid("nil message")
	}
	var sched time.Time
	if m.Annotations != nil {
		normalizeAnnotations(m.Annotations)
		delete(m.Annotations, annSequenceNumber)
		delete(m.Annotations, annEnqueuedTime)
		delete(m.Annotations, annLockedUntil)
		if v, ok := m.Annotations[annScheduledEnqueueTime]; ok {
			t, ok := v.(time.Time)
			if !ok {
				return time.Time{}, invalid("%s must be a timestamp, got %T", annScheduledEnqueueTime, v)
			}
			sched = t
		}
		if v, ok := m.Annotations[annMessageState]; ok && !isInteger(v) {
			return time.Time{}, invalid("%s must be an integer, got %T", annMessageState, v)
		}
		if v, ok := m.Annotations[annEnqueueSequenceNumber]; ok && !isInteger(v) {
			return time.Time{}, invalid("%s must be an integer, got %T", annEnqueueSequenceNumber, v)
		}
		for _, k := range []string{annPartitionKey, annDeadLetterSource} {
			if v, ok := m.Annotations[k]; ok && v == nil {
				delete(m.Annotations, k)
			}
		}
	}
	if m.DeliveryAnnotations != nil {
		normalizeAnnotations(m.DeliveryAnnotations)
		delete(m.DeliveryAnnotations, annLockToken)
	}
	for _, k := range []string{propDeadLetterReason, propDeadLetterDescription} {
		if v, ok := m.ApplicationProperties[k]; ok {
			if _, ok := v.(string); !ok {
				return time.Time{}, invalid("application property %s must be a string, got %T", k, v)
			}
		}
	}
	if m.Properties == nil {
		m.Properties = &goamqp.MessageProperties{}
	}
	if m.Properties.MessageID == nil {
		m.Properties.MessageID = newMessageID()
	}
	m.DeliveryTag = nil
	return sched, nil
}

// newMessageID is the message-id the broker gives a message sent without
// one, as the service does: a random GUID in 32 hex digits.
func newMessageID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return hex.EncodeToString(b)
}

// sessionID returns the message's group-id, or nil.
func sessionID(m *goamqp.Message) *string {
	if m.Properties == nil {
		return nil
	}
	return m.Properties.GroupID
}

// messageIDKey returns the duplicate-detection key of m ("" = none).
func messageIDKey(m *goamqp.Message) string {
	if m.Properties == nil || m.Properties.MessageID == nil {
		return ""
	}
	switch id := m.Properties.MessageID.(type) {
	case string:
		return "s:" + id
	case []byte:
		return "b:" + string(id)
	default:
		return fmt.Sprintf("%T:%v", id, id)
	}
}

// estimateSize approximates the encoded size of m for SizeInBytes without
// encoding it (emulator choice: exact sizes would cost a marshal per send).
func estimateSize(m *goamqp.Message) int32 {
	n := 16
	for _, d := range m.Data {
		n += len(d) + 5
	}
	if m.Value != nil {
		n += valueSize(m.Value)
	}
	for _, s := range m.Sequence {
		for _, v := range s {
			n += valueSize(v)
		}
	}
	if p := m.Properties; p != nil {
		n += 8
		for _, s := range []*string{p.To, p.Subject, p.ReplyTo, p.ContentType, p.ContentEncoding, p.GroupID, p.ReplyToGroupID} {
			if s != nil {
				n += len(*s) + 2
			}
		}
		n += valueSize(p.MessageID) + valueSize(p.CorrelationID) + len(p.UserID)
	}
	if m.Header != nil {
		n += 12
	}
	for k, v := range m.ApplicationProperties {
		n += len(k) + 2 + valueSize(v)
	}
	for k, v := range m.Annotations {
		n += valueSize(k) + valueSize(v)
	}
	if n > 1<<31-1 {
		n = 1<<31 - 1
	}
	return int32(n)
}

func valueSize(v any) int {
	switch v := v.(type) {
	case nil:
		return 1
	case string:
		return len(v) + 2
	case []byte:
		return len(v) + 2
	case goamqp.Symbol:
		return len(v) + 2
	case bool, int8, uint8:
		return 2
	case int16, uint16:
		return 3
	case int32, uint32, float32:
		return 5
	case goamqp.UUID:
		return 17
	default:
		return 9
	}
}

// expiresAt returns the expiry (unix ns, 0 = never) of a message enqueued at
// enqueued: the smaller of the header TTL and the entity default.
func expiresAt(m *goamqp.Message, entityTTL time.Duration, enqueued int64) int64 {
	ttl := entityTTL
	if m.Header != nil && m.Header.TTL > 0 {
		ttl = minTTL(m.Header.TTL, entityTTL)
	}
	if ttl <= 0 {
		return 0
	}
	e := enqueued + int64(ttl)
	if e < enqueued { // overflow: effectively never
		return 0
	}
	return e
}

// withProps returns a shallow copy of m whose application properties are the
// old ones merged with each map in order; nil and empty maps are skipped.
// The stored message is never mutated (copy on write).
func withProps(m *goamqp.Message, props ...map[string]any) *goamqp.Message {
	n := 0
	for _, p := range props {
		n += len(p)
	}
	if n == 0 {
		return m
	}
	c := *m
	ap := make(map[string]any, len(m.ApplicationProperties)+n)
	maps.Copy(ap, m.ApplicationProperties)
	for _, p := range props {
		maps.Copy(ap, p)
	}
	c.ApplicationProperties = ap
	return &c
}

// stamp builds the fresh outbound copy of r's message (docs/servicebus-protocol.md §7.4).
// Caller holds r.st.mu.
func stamp(r *record, withLock bool) *goamqp.Message {
	src := r.msg
	// One allocation for the message and its fixed-size sections.
	buf := &struct {
		m    goamqp.Message
		h    goamqp.MessageHeader
		p    goamqp.MessageProperties
		data [1][]byte
	}{}
	m := &buf.m
	m.Format = src.Format
	m.Value = src.Value
	m.Sequence = src.Sequence
	switch len(src.Data) {
	case 0:
	case 1:
		buf.data[0] = src.Data[0]
		m.Data = buf.data[:]
	default:
		m.Data = append([][]byte(nil), src.Data...)
	}
	buf.h.Priority = 4
	if src.Header != nil {
		buf.h = *src.Header
	}
	buf.h.DeliveryCount = r.dc
	m.Header = &buf.h
	if src.Properties != nil {
		buf.p = *src.Properties
	}
	m.Properties = &buf.p
	ann := make(goamqp.Annotations, len(src.Annotations)+4)
	maps.Copy(ann, src.Annotations)
	ann[annSequenceNumber] = r.seq
	ann[annEnqueuedTime] = time.UnixMilli(r.enqueued).UTC()
	// The service sends the state only when it is not Active (0): deferred
	// and scheduled messages carry it, an active one does not (its
	// absence reads as Active).
	if r.state != stateActive {
		ann[annMessageState] = int64(r.state)
	}
	if withLock {
		ann[annLockedUntil] = time.Unix(0, r.lockedUntil).UTC()
	}
	m.Annotations = ann
	if withLock || len(src.DeliveryAnnotations) > 0 {
		da := make(goamqp.Annotations, len(src.DeliveryAnnotations)+1)
		maps.Copy(da, src.DeliveryAnnotations)
		if withLock {
			da[annLockToken] = r.token
		}
		m.DeliveryAnnotations = da
	}
	if src.ApplicationProperties != nil {
		m.ApplicationProperties = maps.Clone(src.ApplicationProperties)
	}
	if src.Footer != nil {
		m.Footer = maps.Clone(src.Footer)
	}
	return m
}

// delivery builds a Delivery for r. Caller holds r.st.mu.
func delivery(r *record, withLock bool) Delivery {
	d := Delivery{Message: stamp(r, withLock), SequenceNumber: r.seq}
	if withLock {
		d.LockToken = r.token
		d.LockedUntil = time.Unix(0, r.lockedUntil).UTC()
	}
	return d
}
