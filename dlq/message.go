package dlq

import (
	"encoding/json"
	"time"
)

// Kind is the kind of a Service Bus entity.
type Kind string

// The entity kinds, as the API names them.
const (
	KindQueue        Kind = "queue"
	KindTopic        Kind = "topic"
	KindSubscription Kind = "subscription"
)

// SubQueue says which of an entity's stores a message was read from.
type SubQueue string

// The subqueues, as the API names them.
const (
	SubQueueMain               SubQueue = "main"
	SubQueueDeadLetter         SubQueue = "dead_letter"
	SubQueueTransferDeadLetter SubQueue = "transfer_dead_letter"
)

// Valid reports whether q is one of the known subqueues.
func (q SubQueue) Valid() bool {
	return q == SubQueueMain || q == SubQueueDeadLetter || q == SubQueueTransferDeadLetter
}

// Path is the Service Bus name of entity's subqueue q, as people know it
// from the portal and error messages (orders/$DeadLetterQueue).
func (q SubQueue) Path(entity string) string {
	switch q {
	case SubQueueDeadLetter:
		return entity + "/$DeadLetterQueue"
	case SubQueueTransferDeadLetter:
		return entity + "/$Transfer/$DeadLetterQueue"
	}
	return entity
}

// State is the broker's state of a message.
type State string

// The message states, as the API names them.
const (
	StateActive    State = "active"
	StateDeferred  State = "deferred"
	StateScheduled State = "scheduled"
)

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	return s == StateActive || s == StateDeferred || s == StateScheduled
}

// Message is one message as the broker returned it to a peek: every field of
// the stable interface that the broker knows. Pointers are nil when the
// sender or broker did not set the field.
type Message struct {
	SequenceNumber int64
	State          State

	MessageID        string
	CorrelationID    *string
	SessionID        *string
	PartitionKey     *string
	Subject          *string
	ContentType      *string
	ReplyTo          *string
	ReplyToSessionID *string
	To               *string

	DeadLetterReason           *string
	DeadLetterErrorDescription *string
	DeadLetterSource           *string

	DeliveryCount      uint32
	EnqueuedAt         *time.Time
	ScheduledEnqueueAt *time.Time
	ExpiresAt          *time.Time
	TimeToLive         *time.Duration

	// ApplicationProperties in the JSON form of the stable interface
	// (EncodeProperties): numbers keep every digit, times are RFC 3339,
	// binary is {"base64": "..."}.
	ApplicationProperties json.RawMessage

	// Body is the exact body bytes.
	Body []byte
}

// Counts are an entity's runtime counts as the broker reports them.
// Subscriptions have no scheduled count (Service Bus schedules on the topic).
type Counts struct {
	Active             int64 `json:"active_count"`
	DeadLetter         int64 `json:"dead_letter_count"`
	TransferDeadLetter int64 `json:"transfer_dead_letter_count"`
	Scheduled          int64 `json:"scheduled_count"`
}

// Entity is a queue, topic or subscription with its runtime counts.
type Entity struct {
	Path   string // orders, payments, payments/Subscriptions/audit
	Kind   Kind
	Topic  string // the topic of a subscription; empty otherwise
	Counts Counts
}

// Settings are an entity's configuration, read less often than its counts.
type Settings struct {
	Path                             string
	Kind                             Kind
	Status                           string // Active, Disabled, SendDisabled, ReceiveDisabled
	LockDuration                     time.Duration
	MaxDeliveryCount                 int32
	RequiresSession                  bool
	RequiresDuplicateDetection       bool
	DuplicateDetectionWindow         time.Duration
	DefaultTimeToLive                time.Duration
	DeadLetteringOnMessageExpiration bool
	ForwardTo                        string
	ForwardDeadLetteredMessagesTo    string
}

// SubscriptionPath is the entity path of a topic's subscription.
func SubscriptionPath(topic, subscription string) string {
	return topic + "/Subscriptions/" + subscription
}
