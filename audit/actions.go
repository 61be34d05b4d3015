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
