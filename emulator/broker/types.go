package broker

import (
	"errors"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/sqlfilter"
)

// Sentinel errors. Operations wrap them with context; test with errors.Is.
var (
	ErrNotFound        = errors.New("broker: not found")
	ErrAlreadyExists   = errors.New("broker: already exists")
	ErrNotAllowed      = errors.New("broker: operation not allowed")
	ErrLockLost        = errors.New("broker: message lock lost")
	ErrSessionLockLost = errors.New("broker: session lock lost")
	ErrSessionLocked   = errors.New("broker: session is locked by another receiver")
	ErrNoSession       = errors.New("broker: no session available")
	ErrServerBusy      = errors.New("broker: server busy")
	ErrInvalidMessage  = errors.New("broker: invalid message")
	ErrEntityDeleted   = errors.New("broker: entity deleted")
	ErrEntityDisabled  = errors.New("broker: entity disabled")
	// ErrSessionRequired: a receiver without a session on the main queue of
	// an entity that requires sessions. Such errors are also ErrNotAllowed.
	ErrSessionRequired = errors.New("broker: the entity requires a session receiver")

	// ErrInvalidProperties is returned by Create*/Update* for property
	// values Service Bus would reject (for example LockDuration above 5m).
	// Addition to the contract.
	ErrInvalidProperties = errors.New("broker: invalid entity properties")
)

// Kind is the kind of an addressed entity.
type Kind int

const (
	KindQueue Kind = iota + 1
	KindTopic
	KindSubscription
)

func (k Kind) String() string {
	switch k {
	case KindQueue:
		return "queue"
	case KindTopic:
		return "topic"
	case KindSubscription:
		return "subscription"
	}
	return "unknown"
}

// SubQueue selects the main queue or one of the dead-letter sub-queues.
type SubQueue int

const (
	SubQueueMain SubQueue = iota
	SubQueueDeadLetter
	SubQueueTransferDeadLetter
)

// Address is a resolved entity path.
type Address struct {
	Kind         Kind
	Entity       string // canonical name: queue, topic, or "topic/Subscriptions/sub"
	Topic        string
	Subscription string
	SubQueue     SubQueue
}

// EntityStatus is the admin status of an entity.
type EntityStatus string

const (
	StatusActive          EntityStatus = "Active"
	StatusDisabled        EntityStatus = "Disabled"
	StatusSendDisabled    EntityStatus = "SendDisabled"
	StatusReceiveDisabled EntityStatus = "ReceiveDisabled"
)

// QueueProperties are the admin settings of a queue.
type QueueProperties struct {
	LockDuration                        time.Duration // default 1m, at most 5m
	MaxDeliveryCount                    int32         // default 10
	DefaultMessageTimeToLive            time.Duration // 0 = never expires
	DeadLetteringOnMessageExpiration    bool
	RequiresDuplicateDetection          bool
	DuplicateDetectionHistoryTimeWindow time.Duration // default 10m
	RequiresSession                     bool
	MaxSizeInMegabytes                  int32 // default 1024
	MaxMessageSizeInKilobytes           int64 // default 256
	EnableBatchedOperations             bool  // default true
	EnablePartitioning                  bool
	AutoDeleteOnIdle                    time.Duration // 0 = never, else at least 5m (idle.go)
	ForwardTo                           string
	ForwardDeadLetteredMessagesTo       string
	Status                              EntityStatus // default Active
	UserMetadata                        string
	AuthorizationRules                  []AuthorizationRule // stored and returned; not used to authorize (doc.go)
}

// AuthorizationRule is an entity's shared access authorization rule, as the
// admin API carries it. The broker stores it and hands it back; tokens are
// checked against the namespace key only.
type AuthorizationRule struct {
	KeyName      string
	Rights       []string // Manage, Send, Listen
	PrimaryKey   string
	SecondaryKey string
	// CreatedTime and ModifiedTime are kept as the client sent them (the
	// service returns none unless given).
	CreatedTime, ModifiedTime string
}

// TopicProperties are the admin settings of a topic.
type TopicProperties struct {
	DefaultMessageTimeToLive            time.Duration
	RequiresDuplicateDetection          bool
	DuplicateDetectionHistoryTimeWindow time.Duration
	MaxSizeInMegabytes                  int32
	MaxMessageSizeInKilobytes           int64
	EnableBatchedOperations             bool
	EnablePartitioning                  bool
	SupportOrdering                     bool
	AutoDeleteOnIdle                    time.Duration
	Status                              EntityStatus
	UserMetadata                        string
	AuthorizationRules                  []AuthorizationRule // stored and returned; not used to authorize
}

// SubscriptionProperties are the admin settings of a subscription.
type SubscriptionProperties struct {
	LockDuration                              time.Duration
	MaxDeliveryCount                          int32
	DefaultMessageTimeToLive                  time.Duration
	DeadLetteringOnMessageExpiration          bool
	DeadLetteringOnFilterEvaluationExceptions bool
	RequiresSession                           bool
	EnableBatchedOperations                   bool
	AutoDeleteOnIdle                          time.Duration
	ForwardTo                                 string
	ForwardDeadLetteredMessagesTo             string
	Status                                    EntityStatus
	UserMetadata                              string
}

const (
	defaultLockDuration     = time.Minute
	maxLockDuration         = 5 * time.Minute
	defaultMaxDeliveryCount = 10
	defaultDupWindow        = 10 * time.Minute
	defaultMaxSizeMB        = 1024
	defaultMaxMessageSizeKB = 256
)

// DefaultQueueProperties returns Azure's defaults for a new queue.
func DefaultQueueProperties() QueueProperties {
	return QueueProperties{
		LockDuration:                        defaultLockDuration,
		MaxDeliveryCount:                    defaultMaxDeliveryCount,
		DuplicateDetectionHistoryTimeWindow: defaultDupWindow,
		MaxSizeInMegabytes:                  defaultMaxSizeMB,
		MaxMessageSizeInKilobytes:           defaultMaxMessageSizeKB,
		EnableBatchedOperations:             true,
		Status:                              StatusActive,
	}
}

// DefaultTopicProperties returns Azure's defaults for a new topic.
func DefaultTopicProperties() TopicProperties {
	return TopicProperties{
		DuplicateDetectionHistoryTimeWindow: defaultDupWindow,
		MaxSizeInMegabytes:                  defaultMaxSizeMB,
		MaxMessageSizeInKilobytes:           defaultMaxMessageSizeKB,
		EnableBatchedOperations:             true,
		Status:                              StatusActive,
	}
}

// DefaultSubscriptionProperties returns Azure's defaults for a new subscription.
func DefaultSubscriptionProperties() SubscriptionProperties {
	return SubscriptionProperties{
		LockDuration:            defaultLockDuration,
		MaxDeliveryCount:        defaultMaxDeliveryCount,
		EnableBatchedOperations: true,
		Status:                  StatusActive,
	}
}

// FilterKind is the kind of a subscription rule's filter.
type FilterKind int

const (
	FilterTrue FilterKind = iota
	FilterFalse
	FilterCorrelation
	FilterSQL
)

// CorrelationFilter matches when every non-empty field equals the message's
// value and every listed application property is present with an equal value.
type CorrelationFilter struct {
	ContentType, CorrelationID, Subject, MessageID, ReplyTo, ReplyToSessionID, SessionID, To string
	Properties                                                                               map[string]any
}

// Rule is a subscription rule. SQLExpression (with Parameters) is the
// filter of a FilterSQL rule; Action (with ActionParameters), when not
// empty, is a SQL rule action applied to the copy the rule selects. Both
// are parsed when the rule is created (see rules.go).
type Rule struct {
	Name             string
	Kind             FilterKind
	Correlation      *CorrelationFilter
	SQLExpression    string
	Parameters       map[string]any
	Action           string
	ActionParameters map[string]any
	CreatedAt        time.Time

	filter *sqlfilter.Filter // parsed SQLExpression (FilterSQL)
	action *sqlfilter.Action // parsed Action, nil when there is none
}

// Counts are the runtime message counters of an entity. Active includes
// deferred and locked messages. TransferDeadLetter is the size of the
// transfer dead-letter queue (failed auto-forwards); Transfer counts
// messages being forwarded out right now (normally 0, see doc.go).
type Counts struct {
	Active, DeadLetter, TransferDeadLetter, Scheduled, Transfer, Total, SizeInBytes int64
}

// QueueInfo describes a queue.
type QueueInfo struct {
	Name                             string
	Properties                       QueueProperties
	CreatedAt, UpdatedAt, AccessedAt time.Time
	Counts                           Counts
}

// TopicInfo describes a topic. Counts sums the counts of its subscriptions
// plus the scheduled messages the topic holds until they are due.
type TopicInfo struct {
	Name                             string
	Properties                       TopicProperties
	CreatedAt, UpdatedAt, AccessedAt time.Time
	SubscriptionCount                int
	Counts                           Counts
}

// SubscriptionInfo describes a subscription.
type SubscriptionInfo struct {
	Topic, Name                      string
	Properties                       SubscriptionProperties
	CreatedAt, UpdatedAt, AccessedAt time.Time
	Counts                           Counts
}

// Delivery is one message handed out by Next, Peek or ReceiveDeferred.
type Delivery struct {
	// Message is a fresh stamped copy (docs/servicebus-protocol.md §7.4). The broker never
	// touches it again; the caller may encode it on another goroutine.
	Message        *goamqp.Message
	SequenceNumber int64
	LockToken      goamqp.UUID // zero for receive-and-delete and peek; RFC byte order
	LockedUntil    time.Time
}

// ReceiveMode is peek-lock or receive-and-delete.
type ReceiveMode int

const (
	PeekLock ReceiveMode = iota
	ReceiveAndDelete
)

// ConsumerOptions configure NewConsumer.
type ConsumerOptions struct {
	Mode      ReceiveMode
	Session   bool
	SessionID string // with Session: "" means the next available session, unless ExactSession
	// ExactSession, with Session, locks the session SessionID names even
	// when it is "": a message's session id may be the empty string (a
	// group-id present and empty), which Service Bus accepts as a session.
	ExactSession bool
}
