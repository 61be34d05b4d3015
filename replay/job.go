package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// Action is what a job does to each message.
type Action string

// The actions, as the API names them.
const (
	// ActionReplay sends a copy to the destination, then removes the original.
	ActionReplay Action = "replay"
	// ActionDiscard removes the original without sending anything.
	ActionDiscard Action = "discard"
)

// Status is a job's state.
type Status string

// The job statuses, as the API names them.
const (
	StatusQueued  Status = "queued"
	StatusRunning Status = "running"
	// StatusRetrying: running, but a broker call keeps failing with a
	// transient error and is being retried (Job.LastError says what
	// failed, RetryAttempts how often, NextAttemptAt when it is tried
	// again). The job goes back to running on its own when the call
	// succeeds, and is paused when it has failed for Config.GiveUpAfter.
	StatusRetrying   Status = "retrying"
	StatusPaused     Status = "paused"
	StatusCancelling Status = "cancelling"
	StatusCancelled  Status = "cancelled"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
)

// Finished reports whether s is final.
func (s Status) Finished() bool {
	return s == StatusCancelled || s == StatusCompleted || s == StatusFailed
}

// The statuses a person's Pause, Resume and Cancel apply to: the engine
// changes a job's status only from these (in the store's transaction), and
// the pages offer a control only where it would be accepted.
var (
	pauseFrom  = []Status{StatusQueued, StatusRunning, StatusRetrying}
	resumeFrom = []Status{StatusPaused}
	cancelFrom = []Status{StatusQueued, StatusRunning, StatusRetrying, StatusPaused}
	// active: the statuses of a job the engine is working on.
	active = []Status{StatusRunning, StatusRetrying}
)

// CanPause reports whether Pause accepts a job in status s.
func (s Status) CanPause() bool { return slices.Contains(pauseFrom, s) }

// CanResume reports whether Resume accepts a job in status s.
func (s Status) CanResume() bool { return slices.Contains(resumeFrom, s) }

// CanCancel reports whether Cancel accepts a job in status s.
func (s Status) CanCancel() bool { return slices.Contains(cancelFrom, s) }

// ItemState is one message's state within a job. The engine writes each
// state before the broker call that follows it:
//
//	pending → locked → sent → completed   (replay)
//	pending → locked → completed          (discard)
//	any unfinished state → failed | skipped
//	pending → cancelled                   (the job was cancelled first)
//
// locked means "received under a lock, and about to be sent": after a crash
// a locked message may have been sent, so it is sent again under the same
// MessageId. sent means the copy is confirmed: only the original's removal
// is left, and it is never sent again.
type ItemState string

// The item states, as the API names them.
const (
	ItemPending   ItemState = "pending"
	ItemLocked    ItemState = "locked"
	ItemSent      ItemState = "sent"
	ItemCompleted ItemState = "completed"
	ItemFailed    ItemState = "failed"
	ItemSkipped   ItemState = "skipped"
	// ItemCancelled: the job was cancelled before this message's copy was
	// sent (or it was discarded): it is still in its queue.
	ItemCancelled ItemState = "cancelled"
)

// Finished reports whether s is final.
func (s ItemState) Finished() bool {
	return s == ItemCompleted || s == ItemFailed || s == ItemSkipped || s == ItemCancelled
}

// Counts are a job's messages by state: Pending includes locked ones.
type Counts struct {
	Pending, Sent, Completed, Failed, Skipped, Cancelled int
	// Redeadlettered counts the job's copies the catalog has seen
	// dead-lettered again (it is not an item state: a copy is a new
	// message, counted as the ingester catalogs it).
	Redeadlettered int
}

// Progress is how many of the job's messages have been acted on: copies
// sent (replay) or originals removed (discard). Failed, skipped and
// cancelled messages are not progress, so a cancelled job never shows all
// of its messages done.
func (c Counts) Progress() int { return c.Sent + c.Completed }

// Job is a replay or discard job.
type Job struct {
	ID        int64
	Action    Action
	Status    Status
	CreatedAt time.Time
	CreatedBy string
	// Namespace is the namespace of the job's messages (as configured).
	Namespace string
	// DestinationNamespace is the namespace copies go to when it is not
	// the messages' own (named explicitly by the request); empty otherwise.
	DestinationNamespace string
	// Destination is the queue or topic copies go to; empty means each
	// message's own entity (a subscription's topic).
	Destination        string
	RatePerSecond      float64 // 0: as fast as the broker takes them
	ScheduledEnqueueAt *time.Time
	Reason             string
	AllowPoison        bool
	AcknowledgeFanOut  bool
	// Filter is the frozen filter's JSON (nil for a job of ids); the
	// selection is the messages it matched at CreatedAt.
	Filter       json.RawMessage
	Total        int
	Counts       Counts
	Flagged      int // messages possibly sent twice (see ItemState)
	PausedReason string
	// LastError is the last transient broker failure the job met, in words
	// (what failed, how many attempts, when the next one is); kept after
	// the job recovers, until the next one.
	LastError string
	// RetryAttempts and NextAttemptAt describe the retrying call while
	// the status is retrying (0 and nil otherwise).
	RetryAttempts int
	NextAttemptAt *time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
	// RedeadletteredReasons are the reasons of the copies dead-lettered
	// again, the most frequent first.
	RedeadletteredReasons []ReasonCount
	// Canary is the job's canary and ramp options and their state.
	Canary Canary
}

// Item is one message of a job.
type Item struct {
	JobID     int64
	MessageID int64 // the catalog id
	Entity    string
	SubQueue  dlq.SubQueue
	// BrokerState is the message's state in the broker when selected
	// (deferred messages are received by sequence number).
	BrokerState       dlq.State
	SequenceNumber    int64
	OriginalMessageID string
	State             ItemState
	CopyMessageID     string
	Error             string
	// Flagged: possibly sent twice (a resend after a crash or a failed
	// send, to a target without duplicate detection).
	Flagged   bool
	Edit      *Edit
	UpdatedAt time.Time
}

// Update is a change of one item's state.
type Update struct {
	MessageID     int64
	State         ItemState
	CopyMessageID string // kept when empty
	Error         string
	Flag          bool // sets Flagged (never clears it)
}

// ErrNotFound: no such job.
var ErrNotFound = errors.New("no such job")

// ConflictError: messages of a new job are already in an active job.
type ConflictError struct {
	MessageIDs []int64 // some of them
	Jobs       []int64
	Count      int
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%d of the selected messages are already in an active job (job %v); wait for it to finish or cancel it", e.Count, e.Jobs)
}

// InvalidError is a request the engine refuses, naming the parameter.
type InvalidError struct {
	Param, Msg string
}

func (e *InvalidError) Error() string { return "invalid " + e.Param + ": " + e.Msg }

// InvalidParameter names the parameter (for the API's invalid_argument).
func (e *InvalidError) InvalidParameter() string { return e.Param }

// PreconditionError is a request that is well-formed but refused by a
// guard (fan-out, poison, a missing destination): 422.
type PreconditionError struct{ Msg string }

func (e *PreconditionError) Error() string { return e.Msg }

// StatusError: a job was not in a status a change applies to (a pause of a
// finished job, or a race between a person and the engine).
type StatusError struct {
	ID     int64
	Status Status
	To     Status
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("job %d is %s: it cannot become %s", e.ID, e.Status, e.To)
}

// SendsTo is the namespace the job's copies go to: DestinationNamespace, or
// the messages' own.
func (j Job) SendsTo() string {
	if j.DestinationNamespace != "" {
		return j.DestinationNamespace
	}
	return j.Namespace
}
