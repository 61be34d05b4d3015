package replay

import (
	"context"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
)

// Store keeps jobs and their per-message state machines. Package store
// implements it over SQLite: every method is one transaction, so a state
// written is a state that survives a crash.
type Store interface {
	// SummariseSelection describes what sel matches now, for a dry run
	// and for the guards, without changing anything.
	SummariseSelection(ctx context.Context, sel Selection, poisonCap int, sample int) (SelectionSummary, error)
	// CreateJob stores j and freezes sel into its items in one
	// transaction: the items are exactly the messages sel matches at that
	// moment. Messages that cannot be acted on are stored as skipped with
	// the reason (gone from the broker, scheduled, poison without
	// j.AllowPoison). A *ConflictError when any of them is in an active job.
	CreateJob(ctx context.Context, j Job, sel Selection, poisonCap int) (Job, error)
	// CreateJobAudited is CreateJob that also appends the job's creation
	// entry, in the same transaction: entry makes it (an Auditor's
	// Builder) from the job as created (its id and total). A job whose
	// entry cannot be made or appended is not created: no job exists
	// without the entry that says who created it.
	CreateJobAudited(ctx context.Context, j Job, sel Selection, poisonCap int, entry func(Job) (audit.Build, error)) (Job, error)
	// Job returns one job (ErrNotFound).
	Job(ctx context.Context, id int64) (Job, error)
	// ListJobs returns jobs newest first, keyset-paginated.
	ListJobs(ctx context.Context, limit int, cursor string) ([]Job, string, error)
	// ListJobsIn is ListJobs of the jobs of one namespace (their source
	// messages'); every job when namespace is empty.
	ListJobsIn(ctx context.Context, namespace string, limit int, cursor string) ([]Job, string, error)
	// ListItems returns a job's items in catalog id order, keyset-paginated;
	// state "" for all.
	ListItems(ctx context.Context, jobID int64, state ItemState, limit int, cursor string) ([]Item, string, error)
	// UnfinishedItems returns every item of the job that is not finished.
	UnfinishedItems(ctx context.Context, jobID int64) ([]Item, error)
	// UpdateItems applies the updates (one transaction), keeps the job's
	// counters, and returns the job as it is afterwards. A finished item
	// leaves the active set at once.
	UpdateItems(ctx context.Context, jobID int64, ups []Update) (Job, error)
	// SetStatus changes the job's status (and paused reason) if its
	// status is one of from, in one transaction; otherwise it changes
	// nothing and returns the job with a *StatusError. A final status
	// finishes the job (finished_at, and its unfinished items leave the
	// active set, so they can be selected again).
	SetStatus(ctx context.Context, jobID int64, s Status, reason string, from ...Status) (Job, error)
	// SetStatusAudited is SetStatus that also appends the change's audit
	// entry, in the same transaction: entry makes it (an Auditor's
	// Builder) from the job as the change leaves it. A change whose entry
	// cannot be made or appended is not made: a job's status never says
	// what its audit trail does not.
	SetStatusAudited(ctx context.Context, jobID int64, s Status, reason string, entry func(Job) (audit.Build, error), from ...Status) (Job, error)
	// CancelUnsent finishes the job's pending messages (not locked, not
	// sent) as cancelled, in one transaction, and returns the job.
	CancelUnsent(ctx context.Context, jobID int64) (Job, error)
	// SetRetrying records that a broker call of the job keeps failing
	// (rs not nil: a running job becomes retrying, with rs's error,
	// attempts and next attempt) or that it succeeded again (rs nil: a
	// retrying job becomes running; the attempts and next attempt are
	// cleared, the last error kept). A cancelling job keeps its status.
	// A job in any other status is left alone, with a *StatusError.
	SetRetrying(ctx context.Context, jobID int64, rs *Retrying) (Job, error)
	// UnfinishedJobs returns the jobs the engine must run: queued,
	// running, retrying or cancelling, oldest first.
	UnfinishedJobs(ctx context.Context) ([]Job, error)
	// MessageHistory returns every job item of a catalog message, newest
	// job first.
	MessageHistory(ctx context.Context, messageID int64) ([]Item, error)
	// GoneMessages returns which of the catalog ids the catalog has seen
	// leave the broker.
	GoneMessages(ctx context.Context, ids []int64) (map[int64]bool, error)
	// CopiesOf finds the catalog's copies of messages by MessageId (a
	// replayed copy that was dead-lettered again).
	CopiesOf(ctx context.Context, messageIDs []string) ([]dlq.Record, error)
	// SetCanary records a job's canary verdict ("", CanaryPassed or
	// CanaryFailed) and where its pause_on_redeadletter share starts
	// counting (Canary.SentBase, Canary.RedeadletteredBase), and returns
	// the job, whose Counts.Redeadlettered is the catalog's count.
	SetCanary(ctx context.Context, jobID int64, verdict string, sentBase, redeadletteredBase int) (Job, error)
	// HoldSource makes h's job the one job reading its source (an
	// entity's subqueue in a namespace), in one transaction, unless
	// another job holds it and is alive: a job of this store's process
	// that is unfinished (queued, running, retrying, cancelling), or, on a
	// store shared by replicas, one whose claim is heart-beating. It
	// returns the holder: h.JobID when h's job now holds the source (a
	// hold of the same job's earlier run is taken over), else the job
	// that reads it. A hold under an earlier term than the one the same
	// job's hold has is refused with an error: that run's claim is lost.
	HoldSource(ctx context.Context, h SourceHold) (holder int64, err error)
	// ReleaseSource lets go of h's hold, if it is still h's (the same job
	// under the same claim term).
	ReleaseSource(ctx context.Context, h SourceHold) error
}

// SourceHold is one job's hold on the entity's subqueue it reads: while a
// job scans a queue, the messages it did not select stay locked, out of
// any other receiver's sight, so jobs on one source run one at a time,
// across every replica of a shared store.
type SourceHold struct {
	Namespace string
	Entity    string
	SubQueue  dlq.SubQueue
	JobID     int64
	// Term is the claim term of the job's run (Claim.Term; 0 without
	// claims): a run whose claim another replica adopted cannot let go
	// of its successor's hold.
	Term int64
}

// Retrying is a broker call of a job that keeps failing.
type Retrying struct {
	LastError     string
	Attempts      int
	NextAttemptAt time.Time
}

// Selection is what a job acts on: catalog ids, a filter frozen when the
// job is created, or sequence numbers of one entity's subqueue (how a
// deferred message is known to the application that deferred it). Edit
// applies to a selection of one id.
type Selection struct {
	IDs    []int64
	Filter *dlq.Filter
	// Entity, SubQueue (main when empty) and SequenceNumbers name present
	// messages by sequence number; Namespace says whose entity it is (it
	// may be left out when only one namespace has the path).
	Namespace       string
	Entity          string
	SubQueue        dlq.SubQueue
	SequenceNumbers []int64
	Edit            *Edit
	// Edits are each message's own edit, by catalog id (a bulk edit: the
	// selection is IDs, every one of which has its edit, at most
	// MaxTransformMessages); Transform is the fix they were worked out
	// from, which the audit trail records.
	Edits     map[int64]*Edit
	Transform *Transform
}

// kinds counts how many ways s selects (exactly one is valid).
func (s Selection) kinds() int {
	n := 0
	if len(s.IDs) > 0 {
		n++
	}
	if s.Filter != nil {
		n++
	}
	if s.Entity != "" || len(s.SequenceNumbers) > 0 {
		n++
	}
	return n
}

// SelectionSummary is what a selection matches now.
type SelectionSummary struct {
	Total int
	// Actionable: present in the broker, not scheduled (and, for the
	// counts below, how many are of each kind).
	Gone      int // left the broker already
	Scheduled int // scheduled messages: not dead letters, left alone
	Deferred  int // received by sequence number
	Poison    int // replayed poisonCap times or more
	InJobs    int // already in an active job
	// Sources are the entity paths with their subqueue and count.
	Sources []SourceCount
	// MinTimeToLive is the shortest time-to-live among the messages that
	// have one (0 when none has).
	MinTimeToLive int64 // milliseconds
	Sample        []dlq.Record
}

// SourceCount is how many selected messages one entity's subqueue holds.
type SourceCount struct {
	Namespace string
	Entity    string
	SubQueue  dlq.SubQueue
	Count     int
}
