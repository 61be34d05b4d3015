package broker

import (
	"fmt"
	"maps"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/sqlfilter"
)

// Annotations read or written through rule properties only.
const annViaPartitionKey = "x-opt-via-partition-key"

// ruleMessage shows a message to the SQL filter language as it would be
// enqueued in a subscription: under sequence number seq, at `at` (unix
// ns), size bytes (-1: estimate). Actions write to m, which must then be
// a private copy (cloneForAction).
type ruleMessage struct {
	m    *goamqp.Message
	seq  int64
	at   int64
	size int32
}

var _ sqlfilter.MutableMessage = (*ruleMessage)(nil)

// cloneForAction copies m deep enough for an action to change its
// properties, header, annotations and application properties without
// touching m (the body is shared: actions cannot reach it).
func cloneForAction(m *goamqp.Message) *goamqp.Message {
	c := *m
	if m.Header != nil {
		h := *m.Header
		c.Header = &h
	}
	if m.Properties != nil {
		p := *m.Properties
		c.Properties = &p
	}
	c.Annotations = maps.Clone(m.Annotations)
	c.ApplicationProperties = maps.Clone(m.ApplicationProperties)
	return &c
}

func optString(p *string) (any, bool) {
	if p == nil {
		return nil, false
	}
	return *p, true
}

func (v *ruleMessage) annotation(key string) (any, bool) {
	a, ok := v.m.Annotations[key]
	if !ok || a == nil {
		return nil, false
	}
	return a, true
}

func (v *ruleMessage) enqueuedAt() time.Time {
	return time.UnixMilli(v.at / int64(time.Millisecond)).UTC()
}

// System implements sqlfilter.Message: name is canonical.
func (v *ruleMessage) System(name string) (any, bool) {
	p := v.m.Properties
	if p == nil {
		p = &goamqp.MessageProperties{}
	}
	var ttl time.Duration
	if v.m.Header != nil {
		ttl = v.m.Header.TTL
	}
	switch name {
	case sqlfilter.SysMessageID:
		if p.MessageID == nil {
			return nil, false
		}
		return idString(p.MessageID), true
	case sqlfilter.SysCorrelationID:
		if p.CorrelationID == nil {
			return nil, false
		}
		return idString(p.CorrelationID), true
	case sqlfilter.SysTo:
		return optString(p.To)
	case sqlfilter.SysReplyTo:
		return optString(p.ReplyTo)
	case sqlfilter.SysLabel:
		return optString(p.Subject)
	case sqlfilter.SysSessionID:
		return optString(p.GroupID)
	case sqlfilter.SysReplyToSessionID:
		return optString(p.ReplyToGroupID)
	case sqlfilter.SysContentType:
		return optString(p.ContentType)
	case sqlfilter.SysDeliveryCount:
		if v.m.Header != nil {
			return int64(v.m.Header.DeliveryCount), true
		}
		return int64(0), true
	case sqlfilter.SysSequenceNumber:
		return v.seq, true
	case sqlfilter.SysEnqueuedSequenceNumber:
		return v.annotation(annEnqueueSequenceNumber)
	case sqlfilter.SysEnqueuedTimeUtc:
		return v.enqueuedAt(), true
	case sqlfilter.SysScheduledEnqueueTimeUtc:
		return v.annotation(annScheduledEnqueueTime)
	case sqlfilter.SysExpiresAtUtc:
		if ttl <= 0 {
			return nil, false
		}
		return v.enqueuedAt().Add(ttl), true
	case sqlfilter.SysTimeToLive:
		if ttl <= 0 {
			return nil, false
		}
		return ttl, true
	case sqlfilter.SysPartitionKey:
		return v.annotation(annPartitionKey)
	case sqlfilter.SysViaPartitionKey:
		return v.annotation(annViaPartitionKey)
	case sqlfilter.SysDeadLetterSource:
		return v.annotation(annDeadLetterSource)
	case sqlfilter.SysState:
		return int64(0), true // active: rules run as the message arrives
	case sqlfilter.SysSize:
		if v.size < 0 {
			return int64(estimateSize(v.m)), true
		}
		return int64(v.size), true
	}
	return nil, false // LockToken, LockedUntilUtc: not locked yet
}

// userKey finds the application property key for name: the exact key, or
// else one equal without regard to case (Azure: names are
// case-insensitive).
func (v *ruleMessage) userKey(name string) (string, bool) {
	if _, ok := v.m.ApplicationProperties[name]; ok {
		return name, true
	}
	for k := range v.m.ApplicationProperties {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// User implements sqlfilter.Message.
func (v *ruleMessage) User(name string) (any, bool) {
	k, ok := v.userKey(name)
	if !ok {
		return nil, false
	}
	x := v.m.ApplicationProperties[k]
	if u, ok := x.(goamqp.UUID); ok {
		return sqlfilter.UUID(u), true
	}
	return x, true
}

// amqpValue turns an evaluator value into one go-amqp can encode.
func amqpValue(x any) any {
	switch x := x.(type) {
	case sqlfilter.UUID:
		return goamqp.UUID(x)
	case time.Duration:
		return x.String() // AMQP has no time span; emulator choice
	}
	return x
}

// keepType converts a numeric result to the type of the value it
// replaces when it fits (SET converts implicitly as Azure does), so that
// "SET quantity = quantity / 2" leaves an int32 an int32.
func keepType(old, x any) any {
	switch n := x.(type) {
	case int64:
		switch old.(type) {
		case int32:
			if int64(int32(n)) == n {
				return int32(n)
			}
		case int16:
			if int64(int16(n)) == n {
				return int16(n)
			}
		case int8:
			if int64(int8(n)) == n {
				return int8(n)
			}
		case int:
			return int(n)
		case float64:
			return float64(n)
		case float32:
			return float32(n)
		}
	case float64:
		if _, ok := old.(float32); ok {
			return float32(n)
		}
	}
	return x
}

// SetUser implements sqlfilter.MutableMessage.
func (v *ruleMessage) SetUser(name string, x any) {
	if v.m.ApplicationProperties == nil {
		v.m.ApplicationProperties = map[string]any{}
	}
	k, ok := v.userKey(name)
	if !ok {
		k = name
	}
	v.m.ApplicationProperties[k] = keepType(v.m.ApplicationProperties[k], amqpValue(x))
}

// RemoveUser implements sqlfilter.MutableMessage.
func (v *ruleMessage) RemoveUser(name string) {
	if k, ok := v.userKey(name); ok {
		delete(v.m.ApplicationProperties, k)
	}
}

// SetSystem implements sqlfilter.MutableMessage for the settable system
// properties. String properties take a string (other values are written
// as text, emulator choice); nil removes. ScheduledEnqueueTimeUtc is
// accepted and ignored, as Azure ignores it in a subscription.
func (v *ruleMessage) SetSystem(name string, x any) error {
	if v.m.Properties == nil {
		v.m.Properties = &goamqp.MessageProperties{}
	}
	p := v.m.Properties
	str := func() *string {
		if x == nil {
			return nil
		}
		s, ok := x.(string)
		if !ok {
			s = fmt.Sprint(x)
			if u, isUUID := x.(sqlfilter.UUID); isUUID {
				s = u.String()
			}
		}
		return &s
	}
	id := func() any {
		switch u := x.(type) {
		case nil:
			return nil
		case sqlfilter.UUID:
			return goamqp.UUID(u)
		}
		return *str()
	}
	switch name {
	case sqlfilter.SysMessageID:
		p.MessageID = id()
	case sqlfilter.SysCorrelationID:
		p.CorrelationID = id()
	case sqlfilter.SysTo:
		p.To = str()
	case sqlfilter.SysReplyTo:
		p.ReplyTo = str()
	case sqlfilter.SysLabel:
		p.Subject = str()
	case sqlfilter.SysSessionID:
		p.GroupID = str()
	case sqlfilter.SysReplyToSessionID:
		p.ReplyToGroupID = str()
	case sqlfilter.SysContentType:
		p.ContentType = str()
	case sqlfilter.SysTimeToLive:
		d, ok := x.(time.Duration)
		if x != nil && !ok {
			return fmt.Errorf("sys.TimeToLive needs a time span, got %T", x)
		}
		if v.m.Header == nil {
			v.m.Header = &goamqp.MessageHeader{}
		}
		v.m.Header.TTL = d
	case sqlfilter.SysPartitionKey, sqlfilter.SysViaPartitionKey:
		key := annPartitionKey
		if name == sqlfilter.SysViaPartitionKey {
			key = annViaPartitionKey
		}
		if v.m.Annotations == nil {
			v.m.Annotations = goamqp.Annotations{}
		}
		if s := str(); s != nil {
			v.m.Annotations[key] = *s
		} else {
			delete(v.m.Annotations, key)
		}
	case sqlfilter.SysScheduledEnqueueTimeUtc:
	default:
		return fmt.Errorf("sys.%s cannot be set", name)
	}
	return nil
}
