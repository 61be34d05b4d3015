package replay

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// Broker is what the engine needs from Service Bus. Package servicebus
// implements it over the Azure SDK; tests may fake it. Errors are the dlq
// package's (dlq.ErrUnreachable, dlq.ErrThrottled, dlq.ErrEntityNotFound,
// dlq.ErrUnauthorized) plus dlq.ErrLockLost, and for a send
// dlq.ErrEntityDisabled (the destination's status refuses sends: the job
// pauses) and dlq.ErrQuotaExceeded (it is full: retried with back-off,
// then the job pauses), wrapped with details.
type Broker interface {
	// Entity describes a queue, topic or subscription: what the engine
	// checks before it sends (does the target exist, does it detect
	// duplicates, does it fan out) and how long a receive lock lasts.
	Entity(ctx context.Context, path string) (EntityInfo, error)
	// OpenReceiver opens one peek-lock receiver on entity's subqueue for
	// the life of a job's work on it.
	OpenReceiver(ctx context.Context, entity string, q dlq.SubQueue) (Receiver, error)
	// OpenSender opens a sender to a queue or topic.
	OpenSender(ctx context.Context, path string) (Sender, error)
}

// EntityInfo is what the engine needs to know about an entity.
type EntityInfo struct {
	Path string
	Kind dlq.Kind
	// Topic is a subscription's topic; empty otherwise.
	Topic string
	// LockDuration of a queue or subscription (0 for a topic).
	LockDuration time.Duration
	// DuplicateDetection is on for a queue or topic that drops a message
	// whose MessageId it saw within DuplicateDetectionWindow.
	DuplicateDetection       bool
	DuplicateDetectionWindow time.Duration
	// DefaultTimeToLive of messages sent without one (0 when unknown).
	DefaultTimeToLive time.Duration
	// RequiresSession: a main entity whose messages need a session
	// receiver.
	RequiresSession bool
	// Status as the admin API reports it ("Active", "Disabled", "SendDisabled", ...).
	Status string
}

// Receiver is a peek-lock receiver on one entity's subqueue.
//
// Receive must not hold messages between calls: a message that arrives
// after a call returns is released to the broker (the SDK does this), so a
// receiver that is not asking holds no lock.
type Receiver interface {
	// Receive waits for at least one message (until ctx is done or wait
	// passes, then it returns none) and returns up to max, each locked
	// until its LockedUntil.
	Receive(ctx context.Context, max int, wait time.Duration) ([]*Received, error)
	// ReceiveDeferred receives deferred messages by sequence number;
	// numbers not found (not deferred, or gone) are left out.
	ReceiveDeferred(ctx context.Context, seqs []int64) ([]*Received, error)
	// Complete removes a received message. dlq.ErrLockLost when its lock
	// expired first.
	Complete(ctx context.Context, m *Received) error
	// Release closes the receiver and then unlocks the held messages at
	// once (the broker adds one to their delivery counts). Close after it
	// does nothing.
	Release(ctx context.Context, held []*Received) error
	// Close closes the receiver; messages it holds stay locked until their
	// locks expire.
	Close(ctx context.Context) error
}

// Sender sends copies to one queue or topic.
type Sender interface {
	// Send sends every copy, in as few round trips as the broker allows.
	// When it fails, none, some or all of them may have been sent: the
	// engine resends under the same MessageIds. An error with a method
	// Refused() bool that returns true (see Refusal) says that none was
	// sent, because the broker (or the Sender, before sending) refused
	// them for what they are or where they go.
	Send(ctx context.Context, copies []Copy) error
	Close(ctx context.Context) error
}

// Refusal is what a Sender's error implements to say that the broker took
// none of the copies of the failed Send and would refuse them again as
// they are: too large, an invalid property, a destination that does not
// accept messages. The engine then sends them again one by one to find the
// refused ones without flagging the others as possibly sent twice, or,
// when the error also matches dlq.ErrEntityDisabled, pauses the job and
// gives the messages back as pending, to be sent as first copies on
// resume. An error without it (or whose Refused is false) may have sent
// some.
type Refusal interface {
	error
	Refused() bool
}

// refused reports whether err says for certain that a Send sent nothing.
func refused(err error) bool {
	var r Refusal
	return errors.As(err, &r) && r.Refused()
}

// Received is a locked message. The engine reads the fields; Raw belongs to
// the Broker that returned it (it is what Complete settles and what a Copy
// is built from).
type Received struct {
	SequenceNumber int64
	MessageID      string
	LockedUntil    time.Time
	// ReplayCount is the message's dlqdash.replay_count property: how many
	// times its lineage was replayed (0 for an original).
	ReplayCount int
	// DeadLetterReason as the broker reports it; empty when none.
	DeadLetterReason string
	// TimeToLive of the message itself; 0 when unset.
	TimeToLive time.Duration
	Raw        any
}

// Copy is a message to send: Of's body, content type, correlation id,
// subject, session id, partition key, reply-to, to, time-to-live and
// application properties exactly, with these changes.
type Copy struct {
	Of *Received
	// MessageID replaces the original's.
	MessageID string
	// Properties are set on top of the original's application properties
	// (the dlqdash.* properties of docs/api.md). The broker's own
	// DeadLetterReason and DeadLetterErrorDescription properties are not
	// copied.
	Properties map[string]any
	// ScheduledEnqueueAt delays the copy; nil sends it at once (a scheduled
	// time the original had is cleared).
	ScheduledEnqueueAt *time.Time
	// Edit, when not nil, replaces the body and/or application properties.
	Edit *Edit
}

// Edit is a user's change to a message before it is replayed.
type Edit struct {
	// Body replaces the body when not nil.
	Body []byte `json:"body,omitempty"`
	// ApplicationProperties, when not nil, replace the original's (a JSON
	// object in the stable interface's form: strings, numbers, booleans,
	// {"base64": ...} for binary).
	ApplicationProperties json.RawMessage `json:"application_properties,omitempty"`
}
