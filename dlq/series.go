package dlq

import "time"

// SeriesQuery asks for the dead letters of one failure group or entity
// over a time window: Group is a group's id (its key), Entity a path (in
// Namespace when set, else in every namespace that has it); at least one
// of the two.
type SeriesQuery struct {
	Namespace, Entity, Group string
	Since, Until             time.Time
	Buckets                  int
}

// CountSeries counts dead letters (messages of a dead-letter or transfer
// dead-letter queue, present or gone) by their enqueued time, the message
// list's time: Counts are equal slices of [Since, Until), each Width long.
// Jobs are the replay and discard jobs that acted on the group's (or
// entity's) messages and started, or were created, in the window.
type CountSeries struct {
	Since, Until time.Time
	Width        time.Duration
	Counts       []int64
	Jobs         []SeriesJob
}

// SeriesJob is a job marked on a series: when it started (its creation,
// before it started).
type SeriesJob struct {
	ID             int64
	Action, Status string
	At             time.Time
}
