package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/internal/isodur"
)

// Defaults for properties absent from Config.json (Microsoft's emulator defaults).
const (
	DefaultNamespace                                 = "sbemulatorns"
	DefaultLockDuration                              = time.Minute
	DefaultMaxDeliveryCount                    int32 = 3
	DefaultMessageTimeToLive                         = time.Hour
	DefaultDuplicateDetectionHistoryTimeWindow       = 20 * time.Second
)

// Limits enforced by Validate (Service Bus limits, not Microsoft's emulator caps).
const (
	MinLockDuration                        = 5 * time.Second
	MaxLockDuration                        = 5 * time.Minute
	MinDuplicateDetectionHistoryTimeWindow = 5 * time.Second
	MaxDuplicateDetectionHistoryTimeWindow = 7 * 24 * time.Hour
	MaxEntityNameLength                    = 260 // queues and topics
	MaxSubscriptionNameLength              = 50  // subscriptions and rules
)

// DefaultsHelp describes, for the CLI's help text, which defaults apply.
func DefaultsHelp() string {
	return fmt.Sprintf(`Entities from a Config.json file (or the built-in sample) take Microsoft's emulator
defaults for absent properties: LockDuration %s, MaxDeliveryCount %d, DefaultMessageTimeToLive %s,
DuplicateDetectionHistoryTimeWindow %s, all booleans false. Entities created later through the
admin API take Azure's defaults (MaxDeliveryCount 10, unlimited TTL). Unlike Microsoft's emulator,
no 50-entity, 1-hour-TTL or MaxDeliveryCount-10 cap applies; LockDuration must be within %s..%s.`,
		isodur.Format(DefaultLockDuration), DefaultMaxDeliveryCount, isodur.Format(DefaultMessageTimeToLive),
		isodur.Format(DefaultDuplicateDetectionHistoryTimeWindow), isodur.Format(MinLockDuration), isodur.Format(MaxLockDuration))
}

// Config is a parsed Config.json. Parse fills every property with its
// effective value (defaults applied). In a Config built by hand, zero
// durations and a zero MaxDeliveryCount mean "the default".
type Config struct {
	UserConfig UserConfig `json:"UserConfig"`
}

// UserConfig is the file's top-level object.
type UserConfig struct {
	Namespaces []Namespace `json:"Namespaces"`
	Logging    Logging     `json:"Logging"`
}

// Logging is accepted for compatibility and otherwise ignored.
type Logging struct {
	Type string `json:"Type,omitempty"` // "File", "Console", "File,Console" or "Console,File"
}

// Namespace holds the entities of the one namespace.
type Namespace struct {
	Name   string  `json:"Name"`
	Queues []Queue `json:"Queues"`
	Topics []Topic `json:"Topics"`
}

// Queue is a queue and its properties.
type Queue struct {
	Name       string          `json:"Name"`
	Properties QueueProperties `json:"Properties"`
}

// QueueProperties are the queue properties Config.json can set.
type QueueProperties struct {
	DeadLetteringOnMessageExpiration    bool     `json:"DeadLetteringOnMessageExpiration"`
	DefaultMessageTimeToLive            Duration `json:"DefaultMessageTimeToLive"`
	DuplicateDetectionHistoryTimeWindow Duration `json:"DuplicateDetectionHistoryTimeWindow"`
	ForwardDeadLetteredMessagesTo       string   `json:"ForwardDeadLetteredMessagesTo"`
	ForwardTo                           string   `json:"ForwardTo"`
	LockDuration                        Duration `json:"LockDuration"`
	MaxDeliveryCount                    int32    `json:"MaxDeliveryCount"`
	RequiresDuplicateDetection          bool     `json:"RequiresDuplicateDetection"`
	RequiresSession                     bool     `json:"RequiresSession"`
}

// Topic is a topic, its properties and subscriptions.
type Topic struct {
	Name          string          `json:"Name"`
	Properties    TopicProperties `json:"Properties"`
	Subscriptions []Subscription  `json:"Subscriptions"`
}

// TopicProperties are the topic properties Config.json can set.
type TopicProperties struct {
	DefaultMessageTimeToLive            Duration `json:"DefaultMessageTimeToLive"`
	DuplicateDetectionHistoryTimeWindow Duration `json:"DuplicateDetectionHistoryTimeWindow"`
	RequiresDuplicateDetection          bool     `json:"RequiresDuplicateDetection"`
}

// Subscription is a subscription, its properties and rules. With no rules the
// broker gives it the "$Default" rule that matches every message.
type Subscription struct {
	Name       string                 `json:"Name"`
	Properties SubscriptionProperties `json:"Properties"`
	Rules      []Rule                 `json:"Rules,omitempty"`
}

// SubscriptionProperties are the subscription properties Config.json can set.
type SubscriptionProperties struct {
	DeadLetteringOnMessageExpiration bool     `json:"DeadLetteringOnMessageExpiration"`
	DefaultMessageTimeToLive         Duration `json:"DefaultMessageTimeToLive"`
	LockDuration                     Duration `json:"LockDuration"`
	MaxDeliveryCount                 int32    `json:"MaxDeliveryCount"`
	ForwardDeadLetteredMessagesTo    string   `json:"ForwardDeadLetteredMessagesTo"`
	ForwardTo                        string   `json:"ForwardTo"`
	RequiresSession                  bool     `json:"RequiresSession"`
}

// Rule is a subscription rule.
type Rule struct {
	Name       string         `json:"Name"`
	Properties RuleProperties `json:"Properties"`
}

// Filter types.
const (
	FilterCorrelation = "Correlation"
	FilterSQL         = "Sql"
)

// RuleProperties hold the filter (FilterType selects which) and the action.
type RuleProperties struct {
	FilterType        string             `json:"FilterType"`
	CorrelationFilter *CorrelationFilter `json:"CorrelationFilter,omitempty"`
	SQLFilter         *SQLFilter         `json:"SqlFilter,omitempty"`
	Action            *Action            `json:"Action,omitempty"`
}

// CorrelationFilter matches on system properties (Label is the message
// subject) and application properties; values are string, int64, float64 or bool.
type CorrelationFilter struct {
	ContentType      string         `json:"ContentType,omitempty"`
	CorrelationID    string         `json:"CorrelationId,omitempty"`
	Label            string         `json:"Label,omitempty"`
	MessageID        string         `json:"MessageId,omitempty"`
	ReplyTo          string         `json:"ReplyTo,omitempty"`
	ReplyToSessionID string         `json:"ReplyToSessionId,omitempty"`
	SessionID        string         `json:"SessionId,omitempty"`
	To               string         `json:"To,omitempty"`
	Properties       map[string]any `json:"Properties,omitempty"`
}

// SQLFilter is a SQL filter expression (package sqlfilter's language,
// checked when the configuration is validated). Microsoft's Config.json has
// no parameters, so an expression here cannot use @parameters.
type SQLFilter struct {
	SQLExpression string `json:"SqlExpression"`
}

// Action is a rule's SQL action (SET and REMOVE statements, checked when
// the configuration is validated).
type Action struct {
	SQLExpression string `json:"SqlExpression"`
}

// Duration is a time.Duration written as an ISO-8601 string in JSON ("PT1M").
type Duration time.Duration

// MarshalJSON writes d as an ISO-8601 duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(isodur.Format(time.Duration(d)))
}

// UnmarshalJSON reads an ISO-8601 duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be an ISO-8601 string such as \"PT1M\": %w", err)
	}
	v, err := isodur.Parse(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// String returns the ISO-8601 form.
func (d Duration) String() string { return isodur.Format(time.Duration(d)) }

// Default returns the built-in sample used when no --config is given: the
// namespace "sbemulatorns" with the queue "queue.1" and the topic "topic.1"
// whose subscription "subscription.1" receives every message (the "$Default"
// rule), all with the defaults above.
func Default() *Config {
	qp := QueueProperties{
		DefaultMessageTimeToLive:            Duration(DefaultMessageTimeToLive),
		DuplicateDetectionHistoryTimeWindow: Duration(DefaultDuplicateDetectionHistoryTimeWindow),
		LockDuration:                        Duration(DefaultLockDuration),
		MaxDeliveryCount:                    DefaultMaxDeliveryCount,
	}
	return &Config{UserConfig: UserConfig{
		Namespaces: []Namespace{{
			Name:   DefaultNamespace,
			Queues: []Queue{{Name: "queue.1", Properties: qp}},
			Topics: []Topic{{
				Name: "topic.1",
				Properties: TopicProperties{
					DefaultMessageTimeToLive:            Duration(DefaultMessageTimeToLive),
					DuplicateDetectionHistoryTimeWindow: Duration(DefaultDuplicateDetectionHistoryTimeWindow),
				},
				Subscriptions: []Subscription{{
					Name: "subscription.1",
					Properties: SubscriptionProperties{
						DefaultMessageTimeToLive: Duration(DefaultMessageTimeToLive),
						LockDuration:             Duration(DefaultLockDuration),
						MaxDeliveryCount:         DefaultMaxDeliveryCount,
					},
				}},
			}},
		}},
		Logging: Logging{Type: "Console"},
	}}
}

// Namespace returns the configured namespace (the first and only one), or
// false when there is none.
func (c *Config) Namespace() (*Namespace, bool) {
	if c == nil || len(c.UserConfig.Namespaces) == 0 {
		return nil, false
	}
	return &c.UserConfig.Namespaces[0], true
}

// Summary is a one-line description for logs: "sbemulatorns: 1 queue, 1 topic, 1 subscription".
func (c *Config) Summary() string {
	n, ok := c.Namespace()
	if !ok {
		return "no namespace"
	}
	subs := 0
	for _, t := range n.Topics {
		subs += len(t.Subscriptions)
	}
	plural := func(k int, word string) string {
		if k == 1 {
			return fmt.Sprintf("%d %s", k, word)
		}
		return fmt.Sprintf("%d %ss", k, word)
	}
	return n.Name + ": " + strings.Join([]string{
		plural(len(n.Queues), "queue"), plural(len(n.Topics), "topic"), plural(subs, "subscription"),
	}, ", ")
}
