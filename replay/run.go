package replay

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
)

// ActorEngine is the audit actor of what the engine decides on its own
// (pausing a job whose target keeps failing, finishing a job).
const ActorEngine = "dlqdash"

type stopReason int32

const (
	stopNone stopReason = iota
	stopPause
	stopCancel
	stopShutdown
)

type sourceKey struct {
	entity string
	q      dlq.SubQueue
}

// run is one job being worked on by this process.
type run struct {
	e    *Engine
	job  Job
	stop chan struct{}
	once sync.Once
	why  atomic.Int32

	limiter *rate.Limiter
	infos   map[string]EntityInfo
	senders map[string]Sender
	// cancelling: only finish what was sent; send nothing new.
	cancelling bool
	// rampFrom is when the job's ramp started (canary.go, pace.go).
	rampFrom time.Time
	// adopted: the job was running in a process that ended (this run
	// continues it after a restart).
	adopted bool
	// claim is the job's claim when replicas share the store
	// (Config.Claims; claims.go), nil otherwise; fenced is the store
	// whose writes carry it (ClaimStore), nil for Config.Store.
	claim  *Claim
	fenced Store
	// claimedCancelling: the job was cancelling when it was claimed (set
	// before the run starts; cancelling is the run's own).
	claimedCancelling bool
	// acting is held while a chunk is being acted on (see act).
	acting sync.Mutex
	// removalsFailing: completes failed and the job says it is retrying
	// (complete.go) until the next broker call that succeeds.
	removalsFailing bool
	// done are completions whose state is written with the run's next
	// write (deferDone), doneAudit their audit entries, doneBatch the
	// source's batch they came from (the first of them).
	done      []Update
	doneAudit []audit.Record
	doneBatch int
}

func (r *run) requestStop(why stopReason) {
	r.why.CompareAndSwap(int32(stopNone), int32(why))
	r.once.Do(func() { close(r.stop) })
}

func (r *run) stopping() stopReason { return stopReason(r.why.Load()) }

// stopped reports whether the run must not start another batch: a pause or
// shutdown always; a cancel, except for the pass that removes the originals
// of copies already sent.
func (r *run) stopped() bool {
	switch r.stopping() {
	case stopPause, stopShutdown:
		return true
	case stopCancel:
		return !r.cancelling
	}
	return false
}

// sleep waits d or until the run is stopped; false when stopped.
func (r *run) sleep(d time.Duration) bool {
	if d <= 0 {
		return !r.stopped()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !r.stopped()
	case <-r.stop:
		return !r.stopped()
	}
}

// halt is a reason to stop working on a job: it is paused (by the engine)
// with Reason.
type halt struct{ reason string }

func (h *halt) Error() string { return h.reason }

func (r *run) execute(parent context.Context) {
	// Broker and store calls outlive the engine's context by a little, so
	// a shutdown lets the batch in flight finish and record its states.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	go func() {
		select {
		case <-parent.Done():
			r.requestStop(stopShutdown)
			t := time.NewTimer(15 * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
	defer r.closeSenders(ctx)

	if !r.start(ctx) {
		return
	}
	ended, watched := make(chan struct{}), make(chan struct{})
	go func(id int64) {
		defer close(watched)
		select {
		case <-r.stop:
			r.cancelUnsent(ctx, id)
		case <-ended:
		}
	}(r.job.ID)
	defer func() { close(ended); <-watched }()
	r.limiter = newLimiter(r.job.RatePerSecond, r.e.cfg.Batch)
	r.infos, r.senders = map[string]EntityInfo{}, map[string]Sender{}
	bySource, err := r.itemsBySource(ctx)
	if err != nil {
		r.e.log.Error("replay: cannot read job", "job_id", r.job.ID, "error", err)
		return
	}
	keys := slices.SortedFunc(maps.Keys(bySource), func(a, b sourceKey) int {
		return cmp.Or(cmp.Compare(a.entity, b.entity), cmp.Compare(a.q, b.q))
	})
	var stop *halt
	for _, k := range keys {
		if r.stopped() {
			break
		}
		held, err := r.holdSource(ctx, k)
		if err == nil && held {
			err = r.workWatched(ctx, k, bySource[k])
			r.releaseSource(ctx, k)
		}
		if err == nil && !held {
			break // stopped while it waited
		}
		if errors.Is(err, errStopped) {
			break
		}
		if errors.As(err, &stop) {
			break
		}
		if err != nil {
			stop = &halt{reason: err.Error()}
			break
		}
	}
	r.finish(ctx, stop)
}

// start marks the job running, unless it is being cancelled (then the run
// only removes the originals of copies already sent). It reports whether
// to go on: only a job that is still queued or running starts, since a
// person may have paused or cancelled it since the engine listed it.
func (r *run) start(ctx context.Context) bool {
	r.adopted = r.job.Status != StatusQueued
	if r.job.Status == StatusCancelling {
		r.cancelling = true
		return true
	}
	j, err := r.store().SetStatus(ctx, r.job.ID, StatusRunning, "", StatusQueued, StatusRunning, StatusRetrying)
	if err != nil {
		var se *StatusError
		if !errors.As(err, &se) {
			r.e.log.Error("replay: cannot start job", "job_id", r.job.ID, "error", err)
		}
		return false
	}
	r.job = j
	r.e.changed(j)
	return true
}

// note says what a running job waits for, in its paused_reason ("" when
// it no longer waits); a job a person paused or cancelled meanwhile keeps
// its status and reason.
func (r *run) note(ctx context.Context, what string) {
	if r.cancelling {
		return // the reason says who cancelled it
	}
	j, err := r.store().SetStatus(ctx, r.job.ID, StatusRunning, what, active...)
	r.noted(j, err)
}

// itemsBySource reads the job's unfinished items (a cancelling run: only
// those whose copy was sent) by the subqueue they are in.
func (r *run) itemsBySource(ctx context.Context) (map[sourceKey][]*Item, error) {
	items, err := r.store().UnfinishedItems(ctx, r.job.ID)
	if err != nil {
		return nil, err
	}
	bySource := map[sourceKey][]*Item{}
	for i := range items {
		it := &items[i]
		if r.cancelling && it.State != ItemSent {
			continue
		}
		k := sourceKey{it.Entity, it.SubQueue}
		bySource[k] = append(bySource[k], it)
	}
	return bySource, nil
}

// lockMargin is how much lock time a message must have left to be acted on:
// a send and a complete must fit in it, on a slow broker too.
func lockMargin(lock time.Duration) time.Duration {
	return min(max(lock/3, 100*time.Millisecond), 20*time.Second)
}

// work does the job's part on one entity's subqueue.
func (r *run) work(ctx context.Context, k sourceKey, items []*Item) (err error) {
	// Whatever ends the work, the completions held back are written
	// before anything reads the job's items again.
	defer func() {
		if ferr := r.flush(ctx); ferr != nil {
			if err == nil || errors.Is(err, errCanaryWatch) {
				err = ferr
			} else {
				r.e.log.Error("replay: cannot record completed messages", "job_id", r.job.ID, "error", ferr)
			}
		}
	}()
	src, err := r.entity(ctx, k.entity)
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return r.resolveAll(ctx, items, ItemSkipped, "the entity "+k.entity+" no longer exists")
	}
	if err != nil {
		return r.brokerHalt("read "+k.entity, err)
	}
	broker, err := r.brokerOf(r.job.Namespace)
	if err != nil {
		return err
	}
	recv, _, err := retry(ctx, r, "open a receiver on "+k.q.Path(k.entity), func() (Receiver, error) {
		return broker.OpenReceiver(ctx, k.entity, k.q)
	})
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return r.resolveAll(ctx, items, ItemSkipped, "the entity "+k.entity+" no longer exists")
	}
	if err != nil {
		return r.sourceHalt(k.entity, "open a receiver on "+k.q.Path(k.entity), err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = recv.Close(cctx)
	}()

	lock := src.LockDuration
	if lock <= 0 {
		lock = time.Minute
	}
	s := &source{key: k, recv: recv, lock: lock, margin: lockMargin(lock), pending: map[int64]*Item{},
		seqOf: map[int64]int64{}, held: map[int64]*Received{}}
	defer r.release(ctx, s)
	var deferred []*Item
	for _, it := range items {
		if it.BrokerState == dlq.StateDeferred {
			deferred = append(deferred, it)
		} else {
			s.pending[it.SequenceNumber] = it
			s.seqOf[it.MessageID] = it.SequenceNumber
		}
	}
	if err := r.resolveDeferred(ctx, s, deferred); err != nil {
		return err
	}
	return r.scan(ctx, s)
}

// source is the state of the work on one entity's subqueue.
type source struct {
	key          sourceKey
	recv         Receiver
	lock, margin time.Duration
	// pending are the job's unfinished active messages, by sequence number;
	// seqOf maps their catalog ids to their sequence numbers.
	pending map[int64]*Item
	seqOf   map[int64]int64
	// held are messages the scan received and did not act on (not
	// selected, or left for a later pass), by sequence number.
	held map[int64]*Received
	// batches counts the batches received; nextUnderWay is set while a
	// batch is acted on and the next one is being received meanwhile.
	batches      int
	nextUnderWay bool
	// lockedSince: messages locked before it (by an earlier process, or
	// delivered to a receive of this run that failed, or whose complete
	// failed) may still be locked out of the scan's sight; their locks
	// lapse one lock duration later. receiveFailed and removalFailed say
	// which calls of this run set it, for the job's note while it waits.
	lockedSince                  time.Time
	receiveFailed, removalFailed bool
}

// finished drops a finished item from the pending set.
func (s *source) finished(messageID int64) {
	seq, ok := s.seqOf[messageID]
	if !ok {
		return
	}
	delete(s.seqOf, messageID)
	if it := s.pending[seq]; it != nil && it.MessageID == messageID {
		delete(s.pending, seq)
	}
}

type match struct {
	it *Item
	m  *Received
}

// cancelUnsent counts the messages a cancel leaves unsent as cancelled as
// soon as the chunk being sent (if any) is sent, without waiting for the
// removal of its originals or for the messages the run holds to be given
// back: the job's counts stop moving at once. It runs beside the run's
// goroutine, so it leaves r.job alone (id is the job's).
func (r *run) cancelUnsent(ctx context.Context, id int64) {
	if r.cancelling || r.stopping() != stopCancel {
		return
	}
	r.acting.Lock()
	defer r.acting.Unlock()
	j, err := r.store().CancelUnsent(ctx, id)
	if err != nil {
		r.e.log.Error("replay: cancelling job", "job_id", id, "error", err)
		return
	}
	r.e.changed(j)
}
