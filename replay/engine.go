package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
)

// Auditor records what the engine did. *audit.Log implements it.
type Auditor interface {
	Append(ctx context.Context, r audit.Record) (audit.Entry, error)
	// Builder makes the entries the store appends in the transaction of
	// the change they record (Store.SetStatusAudited): a job's status
	// and its audit entry are written together or not at all.
	Builder(ctx context.Context) (func(audit.Record) (audit.Build, error), error)
}

// Config configures an Engine. Store, Audit and Broker or Brokers are
// required.
type Config struct {
	Store Store
	// Broker is the one namespace's broker when Brokers is nil.
	Broker Broker
	// Brokers returns the broker of a configured namespace, by name (with
	// several namespaces): a job receives from its messages' namespace
	// and sends to its own, or to the one its request named. An error
	// means no such namespace is configured (a request naming it is a
	// 400 naming destination_namespace). Nil means Broker for every
	// namespace.
	Brokers func(namespace string) (Broker, error)
	Audit   Auditor
	Logger  *slog.Logger
	// OnChange is called (from the engine's goroutines; it must not block)
	// whenever a job's status or counters change, for the live dashboard.
	OnChange func(Job)
	// OnRemoved is called when the engine has removed n messages from an
	// entity's subqueue, so the catalog's reader can expect them gone
	// (dlq.Ingester.Removed). Nil ignores it.
	OnRemoved func(entity string, q dlq.SubQueue, n int)
	// OnRemovedFrom is OnRemoved with the namespace of the entity (the
	// ingester of that namespace is the one to tell); when set, it is
	// called instead of OnRemoved.
	OnRemovedFrom func(namespace, entity string, q dlq.SubQueue, n int)
	// PoisonCap: a lineage replayed this many times is not replayed again
	// without AllowPoison. 0 means DefaultPoisonCap.
	PoisonCap int
	// Batch is how many messages one receive asks for; 0 means
	// DefaultBatch.
	Batch int
	// GiveUpAfter is how long a failing broker is retried (with
	// exponential backoff and jitter) before the job is paused with the
	// reason; 0 means DefaultGiveUpAfter.
	GiveUpAfter time.Duration
	// MaxJobs is how many jobs run at once; 0 means 4.
	MaxJobs int
	// Claims, when several replicas share the store, decides which of
	// them works each job (claims.go); nil works every unfinished job
	// here. HeartbeatEvery is how often the claims are renewed (0:
	// DefaultHeartbeat); it must be well under the time after which
	// another replica adopts a silent one's jobs.
	Claims         Claims
	HeartbeatEvery time.Duration
}

// Defaults.
const (
	DefaultPoisonCap   = 3
	DefaultBatch       = 250
	DefaultGiveUpAfter = 2 * time.Minute
)

// Engine runs replay and discard jobs. Create jobs with Submit; Run does
// the work and adopts the jobs an earlier process left unfinished.
type Engine struct {
	cfg  Config
	log  *slog.Logger
	now  func() time.Time
	wake chan struct{}
	mu   sync.Mutex
	runs map[int64]*run // jobs running in this process
	// claims is the engine's side of Config.Claims.
	claims claimState
}

// New checks cfg and returns an engine; call Run to start it.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || (cfg.Broker == nil && cfg.Brokers == nil) || cfg.Audit == nil {
		return nil, errors.New("replay: Store, Broker (or Brokers) and Audit are required")
	}
	if cfg.PoisonCap <= 0 {
		cfg.PoisonCap = DefaultPoisonCap
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.GiveUpAfter <= 0 {
		cfg.GiveUpAfter = DefaultGiveUpAfter
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = 4
	}
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = DefaultHeartbeat
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{cfg: cfg, log: log, now: time.Now, wake: make(chan struct{}, 1),
		runs: map[int64]*run{}}, nil
}

// PoisonCap is the configured poison cap.
func (e *Engine) PoisonCap() int { return e.cfg.PoisonCap }

// Run starts unfinished jobs (those of an earlier process first) and every
// job submitted later, until ctx is done; then it lets each running job
// finish the batch it is in (so no state is left half-written by choice)
// and returns. With Config.Claims, it starts the jobs this replica claims
// instead, heartbeats them, and follows their status as other replicas
// change it.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var beat <-chan time.Time
	if e.cfg.Claims != nil {
		t := time.NewTicker(e.cfg.HeartbeatEvery)
		defer t.Stop()
		beat = t.C
	}
	for {
		if e.cfg.Claims != nil {
			e.followStatus(ctx)
			e.claimJobs(ctx, &wg)
			select {
			case <-ctx.Done():
				e.stopAll()
				return nil
			case <-e.wake:
			case <-tick.C:
			case <-beat:
				e.heartbeat(ctx)
			}
			continue
		}
		jobs, err := e.cfg.Store.UnfinishedJobs(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("replay: cannot list unfinished jobs", "error", err)
		}
		for _, j := range jobs {
			e.mu.Lock()
			_, running := e.runs[j.ID]
			full := len(e.runs) >= e.cfg.MaxJobs
			if running || full {
				e.mu.Unlock()
				continue
			}
			r := &run{e: e, job: j, stop: make(chan struct{})}
			e.runs[j.ID] = r
			e.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.execute(ctx)
				e.mu.Lock()
				delete(e.runs, j.ID)
				e.mu.Unlock()
				e.poke()
			}()
		}
		select {
		case <-ctx.Done():
			e.stopAll()
			return nil
		case <-e.wake:
		case <-tick.C:
		}
	}
}

// stopAll asks every run to stop for a shutdown.
func (e *Engine) stopAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.runs {
		r.requestStop(stopShutdown)
	}
}

// Wake makes Run look for work at once: another replica changed a job (a
// LISTEN/NOTIFY wake-up). It never blocks.
func (e *Engine) Wake() { e.poke() }

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) changed(j Job) {
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(j)
	}
}

func (e *Engine) audit(ctx context.Context, r audit.Record) {
	// The audit trail must not lose an entry because the job's context
	// ended: the work it records happened.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := e.cfg.Audit.Append(actx, r); err != nil {
		e.log.Error("replay: audit entry not written", "action", r.Action, "error", err)
	}
}

// setStatusAudited changes a job's status in st and appends the audit
// entry rec makes from the job it leaves, in one transaction
// (Store.SetStatusAudited): a crash never leaves a status without its
// entry, nor an entry without its status.
func (e *Engine) setStatusAudited(ctx context.Context, st Store, id int64, s Status, reason string, rec func(Job) audit.Record,
	from ...Status) (Job, error) {
	build, err := e.cfg.Audit.Builder(ctx)
	if err != nil {
		return Job{}, err
	}
	return st.SetStatusAudited(ctx, id, s, reason, func(j Job) (audit.Build, error) { return build(rec(j)) }, from...)
}

// Pause stops a job at once: once it has answered, the job starts no send
// and no complete (see the package documentation for what may still be in
// flight); Resume continues it.
func (e *Engine) Pause(ctx context.Context, id int64) (Job, error) {
	reason := "paused by " + audit.ActorFrom(ctx)
	j, err := e.setStatusAudited(ctx, e.cfg.Store, id, StatusPaused, reason, func(j Job) audit.Record {
		return audit.Record{Action: audit.ActionJobPaused, Params: jobParams(j, reason)}
	}, pauseFrom...)
	if err != nil {
		return j, precondition(err, "only a queued or running job can be paused")
	}
	e.signal(id, stopPause)
	e.changed(j)
	return j, nil
}

// Resume queues a paused job again.
func (e *Engine) Resume(ctx context.Context, id int64) (Job, error) {
	j, err := e.setStatusAudited(ctx, e.cfg.Store, id, StatusQueued, "", func(j Job) audit.Record {
		return audit.Record{Action: audit.ActionJobResumed, Params: jobParams(j, "")}
	}, resumeFrom...)
	if err != nil {
		return j, precondition(err, "only a paused job can be resumed")
	}
	e.changed(j)
	e.poke()
	return j, nil
}

// Cancel stops a job: nothing more is sent; messages whose copies were
// already sent still have their originals removed; every unsent message
// stays in its queue.
func (e *Engine) Cancel(ctx context.Context, id int64) (Job, error) {
	reason := "cancelled by " + audit.ActorFrom(ctx)
	j, err := e.setStatusAudited(ctx, e.cfg.Store, id, StatusCancelling, reason, func(j Job) audit.Record {
		return audit.Record{Action: audit.ActionJobCancelled, Params: jobParams(j, reason)}
	}, cancelFrom...)
	if err != nil {
		return j, precondition(err, "only a queued, running or paused job can be cancelled")
	}
	e.signal(id, stopCancel)
	e.changed(j)
	e.poke()
	return j, nil
}

// precondition turns a job in the wrong status for a change (the store
// checks it in the transaction that makes the change) into the API's 422.
func precondition(err error, rule string) error {
	var se *StatusError
	if errors.As(err, &se) {
		return &PreconditionError{Msg: fmt.Sprintf("job %d is %s: %s", se.ID, se.Status, rule)}
	}
	return err
}

func (e *Engine) signal(id int64, why stopReason) {
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r != nil {
		r.requestStop(why)
	}
}

// jobParams are a job event's audit parameters.
func jobParams(j Job, reason string) map[string]any {
	p := map[string]any{"job_id": fmt.Sprint(j.ID), "status": string(j.Status), "total": j.Total,
		"pending": j.Counts.Pending, "sent": j.Counts.Sent, "completed": j.Counts.Completed,
		"failed": j.Counts.Failed, "skipped": j.Counts.Skipped, "cancelled": j.Counts.Cancelled, "flagged": j.Flagged}
	if reason != "" {
		p["reason"] = reason
	}
	return withNamespace(p, j)
}

// withNamespace adds the namespace of a job's action to its audit params:
// namespace (the messages') and destination_namespace when the copies go
// to another. The audit entry hashes its params, so the namespace is as
// tamper-evident as the rest. Jobs of the unnamed namespace (a catalog
// from before namespaces, in tests) add nothing.
func withNamespace(p map[string]any, j Job) map[string]any {
	if j.Namespace != "" {
		p["namespace"] = j.Namespace
	}
	if j.DestinationNamespace != "" {
		p["destination_namespace"] = j.DestinationNamespace
	}
	return p
}

// Job returns one job (ErrNotFound).
func (e *Engine) Job(ctx context.Context, id int64) (Job, error) { return e.cfg.Store.Job(ctx, id) }

// ListJobs returns jobs newest first, keyset-paginated.
func (e *Engine) ListJobs(ctx context.Context, limit int, cursor string) ([]Job, string, error) {
	return e.cfg.Store.ListJobs(ctx, limit, cursor)
}

// ListJobsIn is ListJobs of one namespace's jobs (every job for "").
func (e *Engine) ListJobsIn(ctx context.Context, namespace string, limit int, cursor string) ([]Job, string, error) {
	return e.cfg.Store.ListJobsIn(ctx, namespace, limit, cursor)
}

// broker returns the broker of namespace.
func (e *Engine) broker(namespace string) (Broker, error) {
	if e.cfg.Brokers == nil {
		return e.cfg.Broker, nil
	}
	b, err := e.cfg.Brokers(namespace)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("no namespace %q is configured", namespace)
	}
	return b, nil
}

// ListItems returns a job's messages, keyset-paginated.
func (e *Engine) ListItems(ctx context.Context, jobID int64, state ItemState, limit int, cursor string) ([]Item, string, error) {
	if _, err := e.cfg.Store.Job(ctx, jobID); err != nil {
		return nil, "", err
	}
	return e.cfg.Store.ListItems(ctx, jobID, state, limit, cursor)
}

// History is what the jobs did to one message, newest first, with the
// catalog's copies of what they sent (a copy dead-lettered again shows
// up there).
func (e *Engine) History(ctx context.Context, messageID int64) ([]Item, []dlq.Record, error) {
	items, err := e.cfg.Store.MessageHistory(ctx, messageID)
	if err != nil || len(items) == 0 {
		return items, nil, err
	}
	var ids []string
	for _, it := range items {
		if it.CopyMessageID != "" {
			ids = append(ids, it.CopyMessageID)
		}
	}
	copies, err := e.cfg.Store.CopiesOf(ctx, ids)
	return items, copies, err
}
