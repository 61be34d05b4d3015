package dlq

import "time"

// Lineage event kinds.
const (
	LineageDeadLettered = "dead_lettered"
	LineageReplayed     = "replayed"
	LineageDiscarded    = "discarded"
)

// LineageEvent is one step of a message's lineage across replays: a
// message dead-lettered (the first one, or a replayed copy seen in a
// dead-letter queue again), or a job that replayed or discarded it.
type LineageEvent struct {
	Kind string
	// At is when the catalog first saw the dead letter, or when the job
	// last changed the message's state.
	At time.Time
	// Message is the dead letter (LineageDeadLettered; without its body);
	// for a job's event, the message the job acted on.
	Message Record
	// JobID, State (the message's state in the job) and CopyMessageID (the
	// copy's MessageId, "" when none was sent): a job's event.
	JobID         int64
	State         string
	CopyMessageID string
	// Depth counts the replays before this event: 0 for the first dead
	// letter and what jobs did to it, 1 for its copy, and so on.
	Depth int
}
