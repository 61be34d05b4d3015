package sqlfilter

import "strings"

// Scope is where a property lives: the message's system properties
// (sys.Name) or its application properties (user.Name, or a bare Name).
type Scope int

const (
	User Scope = iota
	System
)

func (s Scope) String() string {
	if s == System {
		return "sys"
	}
	return "user"
}

// System property names, as Azure spells them (the properties of the .NET
// message classes). Lookups are case-insensitive; Subject is an alias of
// Label and TransactionPartitionKey of ViaPartitionKey.
const (
	SysMessageID               = "MessageId"
	SysCorrelationID           = "CorrelationId"
	SysTo                      = "To"
	SysReplyTo                 = "ReplyTo"
	SysLabel                   = "Label"
	SysSessionID               = "SessionId"
	SysReplyToSessionID        = "ReplyToSessionId"
	SysContentType             = "ContentType"
	SysDeliveryCount           = "DeliveryCount"
	SysSequenceNumber          = "SequenceNumber"
	SysEnqueuedSequenceNumber  = "EnqueuedSequenceNumber"
	SysEnqueuedTimeUtc         = "EnqueuedTimeUtc"
	SysScheduledEnqueueTimeUtc = "ScheduledEnqueueTimeUtc"
	SysExpiresAtUtc            = "ExpiresAtUtc"
	SysTimeToLive              = "TimeToLive"
	SysLockedUntilUtc          = "LockedUntilUtc"
	SysLockToken               = "LockToken"
	SysPartitionKey            = "PartitionKey"
	SysViaPartitionKey         = "ViaPartitionKey"
	SysDeadLetterSource        = "DeadLetterSource"
	SysState                   = "State"
	SysSize                    = "Size"
)

// systemProps maps a lower-cased name to its canonical spelling and
// whether a rule action may SET or REMOVE it (the broker owns the others).
var systemProps = map[string]struct {
	name     string
	settable bool
}{}

func init() {
	for _, p := range []struct {
		name     string
		settable bool
	}{
		{SysMessageID, true}, {SysCorrelationID, true}, {SysTo, true}, {SysReplyTo, true},
		{SysLabel, true}, {SysSessionID, true}, {SysReplyToSessionID, true}, {SysContentType, true},
		{SysTimeToLive, true}, {SysScheduledEnqueueTimeUtc, true}, {SysPartitionKey, true}, {SysViaPartitionKey, true},
		{SysDeliveryCount, false}, {SysSequenceNumber, false}, {SysEnqueuedSequenceNumber, false},
		{SysEnqueuedTimeUtc, false}, {SysExpiresAtUtc, false}, {SysLockedUntilUtc, false},
		{SysLockToken, false}, {SysDeadLetterSource, false}, {SysState, false}, {SysSize, false},
	} {
		systemProps[strings.ToLower(p.name)] = p
	}
	systemProps["subject"] = systemProps["label"]
	systemProps["transactionpartitionkey"] = systemProps["viapartitionkey"]
}

// SystemProperty returns the canonical name of a system property and
// whether an action may change it; ok is false for an unknown name.
func SystemProperty(name string) (canonical string, settable, ok bool) {
	p, ok := systemProps[strings.ToLower(name)]
	return p.name, p.settable, ok
}

// Message is what expressions read: a message's properties. A system
// property is asked for by its canonical name (see the Sys constants) and
// ok is false when the message does not carry it (it is then NULL). User
// property names are matched as the implementation likes (Azure: without
// regard to case); ok is false when the message has no such property.
// Values are Go values: string, bool, any integer or float type, time.Time,
// time.Duration, UUID or []byte; anything else compares only for equality.
type Message interface {
	System(name string) (v any, ok bool)
	User(name string) (v any, ok bool)
}

// MutableMessage is a Message a rule action can change. SetSystem is given
// a settable system property and the value to store (nil to remove it) and
// may refuse a value it cannot convert; SetUser stores a value (nil is a
// NULL value), RemoveUser deletes the property.
type MutableMessage interface {
	Message
	SetSystem(name string, v any) error
	SetUser(name string, v any)
	RemoveUser(name string)
}

// UUID is the value of newid() (a System.Guid in Azure), in RFC 4122 byte
// order.
type UUID [16]byte
