package audit

import (
	"encoding/json"
	"time"
)

// ActionRow is one action of the trail, as the audit page lists it: one
// entry, or the entries of one job that record the same per-message action
// with the same outcome and actor (GroupedAction), which the engine writes
// a batch of messages at a time. Grouping is a read-side view: the entries
// and their chain are as they were appended.
type ActionRow struct {
	// ID is the Seq of the action's first entry.
	ID int64
	// LastSeq is the Seq of its newest entry (ID for one entry).
	LastSeq         int64
	FirstAt, LastAt time.Time
	Actor           string
	Action          string
	Outcome         string
	// JobID is the job its params name ("" for none); Namespace and
	// DestinationNamespace are their namespace and destination_namespace.
	JobID, Namespace, DestinationNamespace string
	// Entries counts its entries; Messages the message ids they hold.
	Entries, Messages int64
	// Params and Hash are those of its first entry.
	Params json.RawMessage
	Hash   string
}

// GroupedAction reports whether the entries of one job with action a are
// read as one action: the engine's per-message actions, which it records a
// batch of messages at a time.
func GroupedAction(a string) bool {
	switch a {
	case ActionReplay, ActionDiscard, ActionDeferredResolved, ActionMessageFailed, ActionMessageSkipped, ActionMessageFlagged:
		return true
	}
	return false
}

// Part is what an entry tells of its action: the job its params name
// (job_id), their namespace and destination_namespace ("" for none, or for
// a value that is not a string), and the key its action is grouped by: ""
// for an action of its own, otherwise the same for every entry of one
// job's GroupedAction with the same outcome and actor.
type Part struct {
	JobID, Namespace, DestinationNamespace string
	GroupKey                               string
}

// Describe is e's Part. Params that are not a JSON object name nothing.
func Describe(e Entry) Part {
	var p struct {
		JobID                json.RawMessage `json:"job_id"`
		Namespace            json.RawMessage `json:"namespace"`
		DestinationNamespace json.RawMessage `json:"destination_namespace"`
	}
	if json.Unmarshal(e.Params, &p) != nil {
		return Part{}
	}
	text := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	out := Part{JobID: text(p.JobID), Namespace: text(p.Namespace), DestinationNamespace: text(p.DestinationNamespace)}
	if out.JobID != "" && GroupedAction(e.Action) {
		out.GroupKey = "job:" + out.JobID + ":" + e.Action + ":" + e.Outcome + ":" + e.Actor
	}
	return out
}
