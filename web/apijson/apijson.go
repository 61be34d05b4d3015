// Package apijson is the JSON (and CSV) shape of the stable interface
// (docs/api.md): the message object that the HTTP API returns and `dlqdash
// export` writes, entities, groups, status and errors. It is the one place
// that shape is written, so the API and the export cannot drift apart.
//
// It converts domain values (package dlq) and knows nothing of HTTP or SQL.
// Message data is attacker-controlled: it is only ever encoded (encoding/json
// escapes <, > and & too), never interpreted.
package apijson

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// Time is a time as the API writes it: RFC 3339, UTC, milliseconds.
type Time time.Time

// MarshalJSON writes t as "2026-11-22T10:42:07.123Z".
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(dlq.TimeFormat) + `"`), nil
}

func (t Time) String() string { return time.Time(t).UTC().Format(dlq.TimeFormat) }

// TimeOrNull is t as a *Time: nil (JSON null) for nil.
func TimeOrNull(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// Message is the message object of the stable interface.
type Message struct {
	ID                         string          `json:"id"`
	Entity                     string          `json:"entity"`
	SubQueue                   string          `json:"subqueue"`
	State                      string          `json:"state"`
	SequenceNumber             int64           `json:"sequence_number"`
	MessageID                  *string         `json:"message_id"`
	CorrelationID              *string         `json:"correlation_id"`
	SessionID                  *string         `json:"session_id"`
	PartitionKey               *string         `json:"partition_key"`
	Subject                    *string         `json:"subject"`
	ContentType                *string         `json:"content_type"`
	ReplyTo                    *string         `json:"reply_to"`
	ReplyToSessionID           *string         `json:"reply_to_session_id"`
	To                         *string         `json:"to"`
	DeadLetterReason           *string         `json:"dead_letter_reason"`
	DeadLetterErrorDescription *string         `json:"dead_letter_error_description"`
	DeadLetterSource           *string         `json:"dead_letter_source"`
	DeliveryCount              uint32          `json:"delivery_count"`
	EnqueuedAt                 *Time           `json:"enqueued_at"`
	ScheduledEnqueueAt         *Time           `json:"scheduled_enqueue_at"`
	ExpiresAt                  *Time           `json:"expires_at"`
	TimeToLive                 *string         `json:"time_to_live"`
	ApplicationProperties      json.RawMessage `json:"application_properties"`
	BodySize                   int64           `json:"body_size"`
	// BodyPreview is the start of a text body for lists ("" for binary).
	BodyPreview string `json:"body_preview"`
	// BodyBase64 is the exact body; lists leave it out.
	BodyBase64  *string `json:"body_base64,omitempty"`
	GroupID     *string `json:"group_id"`
	FirstSeenAt Time    `json:"first_seen_at"`
	LastSeenAt  Time    `json:"last_seen_at"`
	GoneAt      *Time   `json:"gone_at"`
	ReplayCount int     `json:"replay_count"`
	// Namespace is the Service Bus namespace of the message's entity (last,
	// so that export's CSV columns before it keep their places).
	Namespace string `json:"namespace"`
}

// NewMessage is r as the API's message object; withBody adds body_base64.
func NewMessage(r dlq.Record, withBody bool) Message {
	m := Message{
		ID:                         strconv.FormatInt(r.ID, 10),
		Namespace:                  r.Namespace,
		Entity:                     r.Entity,
		SubQueue:                   string(r.SubQueue),
		State:                      string(r.State),
		SequenceNumber:             r.SequenceNumber,
		MessageID:                  nonEmpty(r.MessageID),
		CorrelationID:              r.CorrelationID,
		SessionID:                  r.SessionID,
		PartitionKey:               r.PartitionKey,
		Subject:                    r.Subject,
		ContentType:                r.ContentType,
		ReplyTo:                    r.ReplyTo,
		ReplyToSessionID:           r.ReplyToSessionID,
		To:                         r.To,
		DeadLetterReason:           r.DeadLetterReason,
		DeadLetterErrorDescription: r.DeadLetterErrorDescription,
		DeadLetterSource:           r.DeadLetterSource,
		DeliveryCount:              r.DeliveryCount,
		EnqueuedAt:                 TimeOrNull(r.EnqueuedAt),
		ScheduledEnqueueAt:         TimeOrNull(r.ScheduledEnqueueAt),
		ExpiresAt:                  TimeOrNull(r.ExpiresAt),
		ApplicationProperties:      r.ApplicationProperties,
		BodySize:                   r.BodySize,
		BodyPreview:                r.BodyPreview,
		GroupID:                    nonEmpty(r.GroupID),
		FirstSeenAt:                Time(r.FirstSeenAt),
		LastSeenAt:                 Time(r.LastSeenAt),
		GoneAt:                     TimeOrNull(r.GoneAt),
		ReplayCount:                r.ReplayCount,
	}
	if r.TimeToLive != nil {
		s := r.TimeToLive.String()
		m.TimeToLive = &s
	}
	// The catalog stores the properties already in the API's form; embed
	// them as they are, unless a damaged row would break the whole answer.
	if len(m.ApplicationProperties) == 0 || !json.Valid(m.ApplicationProperties) {
		m.ApplicationProperties = json.RawMessage(`{}`)
	}
	if withBody {
		s := base64.StdEncoding.EncodeToString(r.Body)
		m.BodyBase64 = &s
	}
	return m
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CSVHeader is the export's CSV columns: the message object's keys in order,
// without body_base64 and application_properties.
func CSVHeader() []string {
	return []string{"id", "entity", "subqueue", "state", "sequence_number", "message_id", "correlation_id",
		"session_id", "partition_key", "subject", "content_type", "reply_to", "reply_to_session_id", "to",
		"dead_letter_reason", "dead_letter_error_description", "dead_letter_source", "delivery_count",
		"enqueued_at", "scheduled_enqueue_at", "expires_at", "time_to_live", "body_size", "body_preview",
		"group_id", "first_seen_at", "last_seen_at", "gone_at", "replay_count", "namespace"}
}

// CSVRecord is m as a CSV row in CSVHeader's order. Null is the empty field.
func (m Message) CSVRecord() []string {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	t := func(p *Time) string {
		if p == nil {
			return ""
		}
		return p.String()
	}
	return []string{m.ID, m.Entity, m.SubQueue, m.State, strconv.FormatInt(m.SequenceNumber, 10), s(m.MessageID),
		s(m.CorrelationID), s(m.SessionID), s(m.PartitionKey), s(m.Subject), s(m.ContentType), s(m.ReplyTo),
		s(m.ReplyToSessionID), s(m.To), s(m.DeadLetterReason), s(m.DeadLetterErrorDescription), s(m.DeadLetterSource),
		strconv.FormatUint(uint64(m.DeliveryCount), 10), t(m.EnqueuedAt), t(m.ScheduledEnqueueAt), t(m.ExpiresAt),
		s(m.TimeToLive), strconv.FormatInt(m.BodySize, 10), m.BodyPreview, s(m.GroupID), m.FirstSeenAt.String(),
		m.LastSeenAt.String(), t(m.GoneAt), strconv.Itoa(m.ReplayCount), m.Namespace}
}

// Entity is an entity in GET /api/v1/entities.
type Entity struct {
	Namespace               string  `json:"namespace"`
	Path                    string  `json:"path"`
	Kind                    string  `json:"kind"`
	Topic                   *string `json:"topic"`
	ActiveCount             int64   `json:"active_count"`
	DeadLetterCount         int64   `json:"dead_letter_count"`
	TransferDeadLetterCount int64   `json:"transfer_dead_letter_count"`
	ScheduledCount          int64   `json:"scheduled_count"`
	DeferredCount           int64   `json:"deferred_count"`
	Status                  string  `json:"status"`
	CountsAt                *Time   `json:"counts_at"`
	DeletedAt               *Time   `json:"deleted_at"`
}

// NewEntity is e as the API's entity object.
func NewEntity(e dlq.EntitySummary) Entity {
	return Entity{
		Namespace:               e.Namespace,
		Path:                    e.Path,
		Kind:                    string(e.Kind),
		Topic:                   nonEmpty(e.Topic),
		ActiveCount:             e.Counts.Active,
		DeadLetterCount:         e.Counts.DeadLetter,
		TransferDeadLetterCount: e.Counts.TransferDeadLetter,
		ScheduledCount:          e.Counts.Scheduled,
		DeferredCount:           e.Deferred,
		Status:                  e.Status,
		CountsAt:                TimeOrNull(e.CountsAt),
		DeletedAt:               TimeOrNull(e.DeletedAt),
	}
}

// Group is a failure group in GET /api/v1/groups.
type Group struct {
	ID                 string   `json:"id"`
	Reason             string   `json:"reason"`
	DescriptionPattern string   `json:"description_pattern"`
	Entities           []string `json:"entities"`
	// Count is how many of the group's messages are present; Total counts
	// gone ones too.
	Count       int64 `json:"count"`
	Total       int64 `json:"total"`
	FirstSeenAt Time  `json:"first_seen_at"`
	LastSeenAt  Time  `json:"last_seen_at"`
	// Namespaces are the group's counts per namespace (the same failure in
	// two namespaces is one group).
	Namespaces []NamespaceCount `json:"namespaces"`
	// Triage: the group's name (the one given, else generated from its
	// reason and description pattern), status (new, investigating, known,
	// resolved), owner and notes, and when the status last changed (null:
	// never).
	Name            string `json:"name"`
	Status          string `json:"status"`
	Owner           string `json:"owner"`
	Notes           string `json:"notes"`
	StatusChangedAt *Time  `json:"status_changed_at"`
}

// NamespaceCount is a group's count in one namespace.
type NamespaceCount struct {
	Name    string `json:"name"`
	Present int64  `json:"present"`
	Total   int64  `json:"total"`
}

// NewGroup is g as the API's group object.
func NewGroup(g dlq.GroupSummary) Group {
	es := g.Entities
	if es == nil {
		es = []string{}
	}
	ns := make([]NamespaceCount, 0, len(g.Namespaces))
	for _, n := range g.Namespaces {
		ns = append(ns, NamespaceCount{Name: n.Name, Present: n.Present, Total: n.Total})
	}
	return Group{ID: g.ID, Reason: g.Reason, DescriptionPattern: g.DescriptionPattern, Entities: es,
		Count: g.Present, Total: g.Total, FirstSeenAt: Time(g.FirstSeenAt), LastSeenAt: Time(g.LastSeenAt),
		Namespaces: ns, Name: g.DisplayName(), Status: string(g.Triage.State()), Owner: g.Triage.Owner, Notes: g.Triage.Notes,
		StatusChangedAt: TimeOrNull(g.Triage.StatusChangedAt)}
}

// Status is GET /api/v1/status: the catalog's freshness.
type Status struct {
	Namespace     string  `json:"namespace"`
	LastSuccessAt *Time   `json:"last_success_at"`
	Healthy       bool    `json:"healthy"`
	Error         *string `json:"error"`
	// ErrorSince is when the current failure began (null when healthy).
	ErrorSince *Time `json:"error_since"`
	// Namespaces are each namespace's own freshness; the fields above are
	// their summary.
	Namespaces []NamespaceStatus `json:"namespaces"`
	// Replica is the replica that answered.
	Replica Replica `json:"replica"`
}

// Replica names a replica of dlqdash (--replica-id).
type Replica struct {
	ID string `json:"id"`
}

// NamespaceStatus is one namespace's freshness in GET /api/v1/status.
type NamespaceStatus struct {
	Name          string  `json:"name"`
	Healthy       bool    `json:"healthy"`
	LastSuccessAt *Time   `json:"last_success_at"`
	Error         *string `json:"error"`
	// IngesterReplica is the replica that ingests the namespace (holds its
	// ingest lease); null when none does.
	IngesterReplica *string `json:"ingester_replica"`
}

// NewStatus is s as the API's status object, with each namespace's status
// (their summary is s), as replica answers it.
func NewStatus(replica string, s dlq.Status, namespaces []dlq.Status) Status {
	out := Status{Namespace: s.Namespace, LastSuccessAt: TimeOrNull(s.LastSuccessAt), Healthy: s.Healthy,
		Error: nonEmpty(s.Error), ErrorSince: TimeOrNull(s.ErrorSince), Namespaces: []NamespaceStatus{},
		Replica: Replica{ID: replica}}
	for _, n := range namespaces {
		out.Namespaces = append(out.Namespaces, NamespaceStatus{Name: n.Namespace, Healthy: n.Healthy,
			LastSuccessAt: TimeOrNull(n.LastSuccessAt), Error: nonEmpty(n.Error), IngesterReplica: nonEmpty(n.Replica)})
	}
	return out
}

// Error is the body of every API error: {"error": {...}}.
type Error struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong in words a person can act on.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Parameter names the bad query parameter of an invalid_argument.
	Parameter string `json:"parameter,omitempty"`
	// RequestID is in internal errors, to find the log line.
	RequestID string `json:"request_id,omitempty"`
}
