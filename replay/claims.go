package replay

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Claims shares the unfinished jobs among the replicas of one store: each
// job is worked by the one replica that claims it, and a job whose replica
// died (its heartbeats stopped) is adopted by another, which continues it as
// a restarted process would (the crash guarantees of the package doc hold:
// the states written before each broker call say what is left). Nil
// (Config.Claims): this process works every unfinished job, as one replica
// alone does.
type Claims interface {
	// Claim takes one more unfinished job for this replica: the oldest one
	// nobody holds, or whose holder stopped heart-beating (AdoptedFrom
	// names it). ok is false when there is none.
	Claim(ctx context.Context) (c Claim, ok bool, err error)
	// Heartbeat keeps this replica's claims alive and returns the jobs it
	// still holds. A job it runs that is missing was adopted by another
	// replica (this one was silent for too long): its run stops at once.
	Heartbeat(ctx context.Context) ([]int64, error)
	// Release lets a job go when its run ends (finished, paused, stopped
	// for a shutdown), so that another replica may claim it at once.
	Release(ctx context.Context, c Claim) error
}

// Claim is one job held by this replica.
type Claim struct {
	JobID int64
	// Term increments with each claim of the job: the fencing token of the
	// run's writes (ClaimStore).
	Term int64
	// AdoptedFrom is the replica that held the job and went silent, "" for
	// a job nobody held.
	AdoptedFrom string
}

// ClaimStore is a Store that can fence the writes of one job's run with the
// job's claim: every write transaction of Claimed's Store first checks that
// the claim is still this replica's under c.Term, and refuses the write
// otherwise, so a replica that was adopted from while it was frozen writes
// nothing once it wakes. The PostgreSQL store implements it; a store
// without it is used as it is.
type ClaimStore interface {
	Claimed(c Claim) Store
}

// DefaultHeartbeat is how often the engine heartbeats its claims
// (Config.HeartbeatEvery).
const DefaultHeartbeat = 5 * time.Second

// store is the store a run writes through: fenced with its claim when
// there is one and the store can.
func (r *run) store() Store {
	if r.fenced != nil {
		return r.fenced
	}
	return r.e.cfg.Store
}

// claimState is the engine's side of Claims.
type claimState struct {
	mu sync.Mutex
	// next are claims taken for jobs whose earlier run (under a claim this
	// replica lost and then took again) has not ended yet: they start when
	// it has.
	next map[int64]Claim
}

// claimJobs claims jobs while the engine has room and starts them.
func (e *Engine) claimJobs(ctx context.Context, wg *sync.WaitGroup) {
	e.claims.mu.Lock()
	waiting := e.claims.next
	e.claims.next = nil
	e.claims.mu.Unlock()
	for _, c := range waiting {
		if !e.startClaimed(ctx, wg, c) {
			e.keepForLater(c)
		}
	}
	// A job claimed twice in one round was released meanwhile (its run
	// could not start): it waits for the next round, not a tight loop.
	seen := map[int64]bool{}
	for ctx.Err() == nil {
		e.mu.Lock()
		full := len(e.runs) >= e.cfg.MaxJobs
		e.mu.Unlock()
		if full {
			return
		}
		c, ok, err := e.cfg.Claims.Claim(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("replay: cannot claim a job", "error", err)
			}
			return
		}
		if !ok {
			return
		}
		if seen[c.JobID] {
			e.release(ctx, c)
			return
		}
		seen[c.JobID] = true
		if c.AdoptedFrom != "" {
			e.log.Info("replay: adopting a job whose replica went silent", "job_id", c.JobID, "from_replica", c.AdoptedFrom)
		}
		if !e.startClaimed(ctx, wg, c) {
			e.keepForLater(c)
		}
	}
}

func (e *Engine) keepForLater(c Claim) {
	e.claims.mu.Lock()
	defer e.claims.mu.Unlock()
	if e.claims.next == nil {
		e.claims.next = map[int64]Claim{}
	}
	e.claims.next[c.JobID] = c
}

// startClaimed starts the run of a claimed job; false when a run of the
// job (under the claim this replica lost) is still ending, which is told
// to stop.
func (e *Engine) startClaimed(ctx context.Context, wg *sync.WaitGroup, c Claim) bool {
	e.mu.Lock()
	if old := e.runs[c.JobID]; old != nil {
		e.mu.Unlock()
		old.requestStop(stopShutdown)
		return false
	}
	e.mu.Unlock()
	j, err := e.cfg.Store.Job(ctx, c.JobID)
	if err != nil {
		e.log.Warn("replay: cannot read a claimed job", "job_id", c.JobID, "error", err)
		e.release(ctx, c)
		return true
	}
	r := &run{e: e, job: j, stop: make(chan struct{}), claim: &c, claimedCancelling: j.Status == StatusCancelling}
	if cs, ok := e.cfg.Store.(ClaimStore); ok {
		r.fenced = cs.Claimed(c)
	}
	e.mu.Lock()
	e.runs[j.ID] = r
	e.mu.Unlock()
	wg.Go(func() {
		r.execute(ctx)
		e.mu.Lock()
		delete(e.runs, j.ID)
		e.mu.Unlock()
		e.release(ctx, c)
		e.poke()
	})
	return true
}

func (e *Engine) release(ctx context.Context, c Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.cfg.Claims.Release(rctx, c); err != nil {
		e.log.Warn("replay: cannot release a job; another replica adopts it once its heartbeat is stale", "job_id", c.JobID, "error", err)
	}
}

// heartbeat renews this replica's claims and stops the runs of the jobs it
// no longer holds.
func (e *Engine) heartbeat(ctx context.Context) {
	held, err := e.cfg.Claims.Heartbeat(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("replay: cannot heartbeat the jobs this replica runs", "error", err)
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, r := range e.runs {
		if r.claim != nil && !slices.Contains(held, id) {
			e.log.Warn("replay: another replica adopted a job this one runs; stopping it", "job_id", id)
			r.requestStop(stopShutdown)
		}
	}
}

// followStatus stops the runs of jobs paused or cancelled on another
// replica: Pause and Cancel signal the run at once only when it is in the
// process that answered them. The store has the status; this reads it.
func (e *Engine) followStatus(ctx context.Context) {
	e.mu.Lock()
	runs := make(map[int64]*run, len(e.runs)) // by job id: r.job is its run's own
	for id, r := range e.runs {
		runs[id] = r
	}
	e.mu.Unlock()
	for id, r := range runs {
		if r.stopping() != stopNone {
			continue
		}
		j, err := e.cfg.Store.Job(ctx, id)
		if err != nil {
			continue
		}
		switch j.Status {
		case StatusPaused:
			r.requestStop(stopPause)
		case StatusCancelling:
			if !r.claimedCancelling {
				r.requestStop(stopCancel)
			}
		}
	}
}
