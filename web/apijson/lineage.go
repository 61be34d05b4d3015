package apijson

import (
	"strconv"

	"github.com/dlqdash/dlqdash/dlq"
)

// LineageEvent is one step of GET /api/v1/messages/{id}'s lineage
// (docs/api.md).
type LineageEvent struct {
	Event string `json:"event"`
	At    Time   `json:"at"`
	// The message the event is about: the dead letter, or the one the job
	// acted on.
	ID       string  `json:"id"`
	Entity   string  `json:"entity"`
	SubQueue string  `json:"subqueue"`
	Reason   *string `json:"dead_letter_reason"`
	// A job's event; null otherwise.
	JobID         *string `json:"job_id"`
	State         *string `json:"state"`
	CopyMessageID *string `json:"copy_message_id"`
	Depth         int     `json:"depth"`
	// Current marks the message asked about.
	Current bool `json:"current"`
}

// NewLineage is a lineage as the API writes it; current is the id asked
// about.
func NewLineage(evs []dlq.LineageEvent, current int64) []LineageEvent {
	out := make([]LineageEvent, 0, len(evs))
	for _, e := range evs {
		le := LineageEvent{Event: e.Kind, At: Time(e.At), ID: strconv.FormatInt(e.Message.ID, 10), Entity: e.Message.Entity,
			SubQueue: string(e.Message.SubQueue), Reason: e.Message.DeadLetterReason, Depth: e.Depth}
		if e.Kind == dlq.LineageDeadLettered {
			le.Current = e.Message.ID == current
		} else {
			job, state := strconv.FormatInt(e.JobID, 10), e.State
			le.JobID, le.State, le.CopyMessageID = &job, &state, nonEmpty(e.CopyMessageID)
		}
		out = append(out, le)
	}
	return out
}
