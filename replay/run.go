package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
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

	e := r.e
	j := r.job
	if j.Status == StatusCancelling {
		r.cancelling = true
	} else {
		// Only a job that is still queued or running starts: a person
		// may have paused or cancelled it since the engine listed it.
		var err error
		if j, err = e.cfg.Store.SetStatus(ctx, j.ID, StatusRunning, "", StatusQueued, StatusRunning); err != nil {
			var se *StatusError
			if !errors.As(err, &se) {
				e.log.Error("replay: cannot start job", "job", j.ID, "err", err)
			}
			return
		}
		r.job = j
		e.changed(j)
	}
	if j.RatePerSecond > 0 {
		burst := max(1, min(int(math.Ceil(j.RatePerSecond)), e.cfg.Batch))
		r.limiter = rate.NewLimiter(rate.Limit(j.RatePerSecond), burst)
	}
	r.infos, r.senders = map[string]EntityInfo{}, map[string]Sender{}

	items, err := e.cfg.Store.UnfinishedItems(ctx, j.ID)
	if err != nil {
		e.log.Error("replay: cannot read job", "job", j.ID, "err", err)
		return
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
	keys := slices.SortedFunc(maps.Keys(bySource), func(a, b sourceKey) int {
		return cmp.Or(cmp.Compare(a.entity, b.entity), cmp.Compare(a.q, b.q))
	})
	var stop *halt
	for _, k := range keys {
		if r.stopped() {
			break
		}
		mu := e.sourceLock(k)
		mu.Lock()
		err := r.work(ctx, k, bySource[k])
		mu.Unlock()
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

// finish records how the run ended.
func (r *run) finish(ctx context.Context, stop *halt) {
	e := r.e
	id := r.job.ID
	why := r.stopping()
	switch {
	case why == stopShutdown:
		return // adopted by the next start
	case why == stopPause:
		return // paused by a person: the status is written
	case why == stopCancel && !r.cancelling:
		// Cancelled while running: the status says cancelling, and the
		// engine adopts the job again as a cancelling run, which removes
		// the originals of copies already sent and sends nothing.
		return
	case stop != nil && why != stopCancel && !r.cancelling:
		j, err := e.cfg.Store.SetStatus(ctx, id, StatusPaused, stop.reason, StatusRunning)
		if err != nil {
			e.log.Error("replay: cannot pause job", "job", id, "err", err)
			return
		}
		e.log.Warn("replay: job paused", "job", id, "reason", stop.reason)
		e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionJobPaused, Params: jobParams(j, stop.reason),
			Outcome: audit.OutcomeFailed})
		e.changed(j)
		return
	}
	if r.cancelling {
		left, err := e.cfg.Store.UnfinishedItems(ctx, id)
		if err == nil {
			var ups []Update
			for _, it := range left {
				if it.State == ItemSent {
					ups = append(ups, Update{MessageID: it.MessageID, State: ItemFailed, Error: "the copy was sent, but the job was cancelled " +
						"before the original could be removed: it is still in " + it.SubQueue.Path(it.Entity) + "; discard it"})
				}
			}
			if len(ups) > 0 {
				_, err = e.cfg.Store.UpdateItems(ctx, id, ups)
			}
		}
		if err != nil {
			e.log.Error("replay: cancelling job", "job", id, "err", err)
		}
		j, err := e.cfg.Store.SetStatus(ctx, id, StatusCancelled, r.job.PausedReason, StatusCancelling)
		if err != nil {
			e.log.Error("replay: cannot cancel job", "job", id, "err", err)
			return
		}
		e.changed(j)
		return
	}
	// Completed only if nobody paused or cancelled it meanwhile (then the
	// next run finds nothing left to do, or cancels).
	j, err := e.cfg.Store.SetStatus(ctx, id, StatusCompleted, "", StatusRunning)
	var se *StatusError
	if errors.As(err, &se) {
		return
	}
	if err != nil {
		e.log.Error("replay: cannot complete job", "job", id, "err", err)
		return
	}
	outcome := audit.OutcomeSucceeded
	if j.Counts.Failed > 0 {
		outcome = audit.OutcomeFailed
	}
	e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionJobCompleted, Params: jobParams(j, ""), Outcome: outcome})
	e.log.Info("replay: job completed", "job", id, "completed", j.Counts.Completed, "failed", j.Counts.Failed, "skipped", j.Counts.Skipped)
	e.changed(j)
}

// callTimeout bounds one broker call: the SDK can wait a long time on a
// link whose connection died.
const callTimeout = 30 * time.Second

// transient reports whether err is worth retrying: the broker's own
// transient errors, and a call that ran out of time (but not the run's
// context ending).
func transient(err error) bool {
	return errors.Is(err, dlq.ErrUnreachable) || errors.Is(err, dlq.ErrThrottled) || errors.Is(err, context.DeadlineExceeded)
}

// retry runs op with exponential backoff and jitter while it fails with a
// transient error, honouring a throttled broker's Retry-After, for at most
// GiveUpAfter. It returns how many attempts it made.
func retry[T any](ctx context.Context, r *run, what string, op func() (T, error)) (T, int, error) {
	attempts := 0
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 15 * time.Second
	v, err := backoff.Retry(ctx, func() (T, error) {
		attempts++
		v, err := op()
		if err == nil {
			return v, nil
		}
		if !transient(err) {
			return v, backoff.Permanent(err)
		}
		var te *dlq.ThrottledError
		if errors.As(err, &te) && te.RetryAfter > 0 {
			return v, backoff.RetryAfter(int(math.Ceil(te.RetryAfter.Seconds())))
		}
		return v, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(r.e.cfg.GiveUpAfter), backoff.WithNotify(func(err error, d time.Duration) {
		r.e.log.Warn("replay: retrying", "job", r.job.ID, "what", what, "in", d, "err", err)
	}))
	return v, attempts, err
}

// entity returns (and caches) what the broker says about path.
func (r *run) entity(ctx context.Context, path string) (EntityInfo, error) {
	if info, ok := r.infos[path]; ok {
		return info, nil
	}
	info, _, err := retry(ctx, r, "read "+path, func() (EntityInfo, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return r.e.cfg.Broker.Entity(cctx, path)
	})
	if err != nil {
		return info, err
	}
	r.infos[path] = info
	return info, nil
}

// destination is where copies of the messages of entity go.
func (r *run) destination(ctx context.Context, entity string) (EntityInfo, error) {
	path := r.job.Destination
	if path == "" {
		src, err := r.entity(ctx, entity)
		if err != nil {
			return EntityInfo{}, err
		}
		path = entity
		if src.Kind == dlq.KindSubscription {
			path = src.Topic
		}
	}
	info, err := r.entity(ctx, path)
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return info, &halt{reason: fmt.Sprintf("the destination %s does not exist (any more): create it, or cancel this job and replay elsewhere", path)}
	}
	return info, err
}

func (r *run) sender(ctx context.Context, path string) (Sender, error) {
	if s := r.senders[path]; s != nil {
		return s, nil
	}
	s, _, err := retry(ctx, r, "open a sender to "+path, func() (Sender, error) { return r.e.cfg.Broker.OpenSender(ctx, path) })
	if err != nil {
		return nil, err
	}
	r.senders[path] = s
	return s, nil
}

func (r *run) closeSenders(ctx context.Context) {
	for _, s := range r.senders {
		_ = s.Close(ctx)
	}
}

// lockMargin is how much lock time a message must have left to be acted on:
// a send and a complete must fit in it, on a slow broker too.
func lockMargin(lock time.Duration) time.Duration {
	return min(max(lock/3, 100*time.Millisecond), 20*time.Second)
}

// work does the job's part on one entity's subqueue.
func (r *run) work(ctx context.Context, k sourceKey, items []*Item) error {
	e := r.e
	src, err := r.entity(ctx, k.entity)
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return r.resolveAll(ctx, items, ItemSkipped, "the entity "+k.entity+" no longer exists")
	}
	if err != nil {
		return r.brokerHalt("read "+k.entity, err)
	}
	recv, _, err := retry(ctx, r, "open a receiver on "+k.q.Path(k.entity), func() (Receiver, error) {
		return e.cfg.Broker.OpenReceiver(ctx, k.entity, k.q)
	})
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return r.resolveAll(ctx, items, ItemSkipped, "the entity "+k.entity+" no longer exists")
	}
	if err != nil {
		return r.brokerHalt("open a receiver on "+k.q.Path(k.entity), err)
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

// brokerHalt turns a broker error that retries did not cure into a pause.
func (r *run) brokerHalt(what string, err error) error {
	var h *halt
	if errors.As(err, &h) {
		return h
	}
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, dlq.ErrUnauthorized):
		return &halt{reason: "Service Bus refused dlqdash's credentials (" + what + "): give them the Listen and Send rights and resume"}
	case transient(err):
		return &halt{reason: fmt.Sprintf("Service Bus kept failing for %s (%s): %v; resume when it is back", r.e.cfg.GiveUpAfter, what, err)}
	}
	return &halt{reason: fmt.Sprintf("%s: %v", what, err)}
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
}

// release gives back the messages the work on a source still holds locked,
// when it ends: without it they would stay invisible to everyone (the next
// job on the same queue too) for the rest of their lock duration. Service Bus
// counts an abandon as a delivery, so their delivery count goes up by one.
//
// At most maxRelease are given back (those locked longest): each is a
// broker operation, and after a long scan most of the locks lapse soon
// anyway; the rest lapse on their own.
func (r *run) release(ctx context.Context, s *source) {
	now := r.e.now()
	var held []*Received
	for _, m := range s.held {
		if m.LockedUntil.After(now) {
			held = append(held, m)
		}
	}
	if len(held) == 0 {
		return
	}
	if len(held) > maxRelease {
		slices.SortFunc(held, func(a, b *Received) int { return b.LockedUntil.Compare(a.LockedUntil) })
		held = held[:maxRelease]
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.recv.Release(ctx, held)
	r.e.log.Debug("replay: released held messages", "job", r.job.ID, "source", s.key.q.Path(s.key.entity),
		"held", len(held), "err", err)
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

// resolveDeferred receives deferred messages by sequence number.
func (r *run) resolveDeferred(ctx context.Context, s *source, items []*Item) error {
	for chunk := range slices.Chunk(items, r.e.cfg.Batch) {
		if r.stopped() {
			return nil
		}
		seqs := make([]int64, len(chunk))
		for i, it := range chunk {
			seqs[i] = it.SequenceNumber
		}
		got, _, err := retry(ctx, r, "receive deferred messages", func() ([]*Received, error) {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			return s.recv.ReceiveDeferred(cctx, seqs)
		})
		if err != nil {
			return r.brokerHalt("receive deferred messages from "+s.key.q.Path(s.key.entity), err)
		}
		bySeq := map[int64]*Received{}
		for _, m := range got {
			bySeq[m.SequenceNumber] = m
		}
		var matched []match
		var missing []*Item
		for _, it := range chunk {
			if m := bySeq[it.SequenceNumber]; m != nil {
				matched = append(matched, match{it, m})
			} else {
				missing = append(missing, it)
			}
		}
		if _, err := r.process(ctx, s, matched); err != nil {
			return err
		}
		if err := r.resolveMissing(ctx, s, missing, "is no longer deferred in"); err != nil {
			return err
		}
	}
	return nil
}

// scan finds the job's active messages in a queue that can only be read
// from its head (see the package documentation for the design and its
// cost).
func (r *run) scan(ctx context.Context, s *source) error {
	e := r.e
	start := e.now()
	type batch struct {
		msgs []*Received
		err  error
	}
	// ahead is the next batch, being received while this one is acted on
	// (one attempt: a failure is retried by the loop, not in the
	// background).
	var ahead chan batch
	defer func() {
		if ahead != nil {
			// The receiver is closed next: never with a receive in flight;
			// what it brought is held, and given back with the rest.
			for _, m := range (<-ahead).msgs {
				s.held[m.SequenceNumber] = m
			}
		}
	}()
	for len(s.pending) > 0 && !r.stopped() {
		seen := map[int64]bool{}
		processed, wrapped := 0, false
		var heldUntil time.Time
		for !wrapped && len(s.pending) > 0 {
			if r.stopped() {
				return nil
			}
			var b batch
			fetched := ahead != nil
			if fetched {
				b, ahead = <-ahead, nil
			}
			if !fetched || b.err != nil {
				b.msgs, _, b.err = retry(ctx, r, "receive", func() ([]*Received, error) {
					cctx, cancel := context.WithTimeout(ctx, callTimeout)
					defer cancel()
					return s.recv.Receive(cctx, e.cfg.Batch, time.Second)
				})
			}
			msgs, err := b.msgs, b.err
			if err != nil {
				return r.brokerHalt("receive from "+s.key.q.Path(s.key.entity), err)
			}
			if len(msgs) == 0 {
				break // nothing more is available
			}
			var matched []match
			var strangers []*Item
			for _, m := range msgs {
				if seen[m.SequenceNumber] {
					wrapped = true // a lock this pass took has expired: the head is back
				}
				seen[m.SequenceNumber] = true
				if m.LockedUntil.After(heldUntil) {
					heldUntil = m.LockedUntil
				}
				s.held[m.SequenceNumber] = m
				it := s.pending[m.SequenceNumber]
				if it == nil {
					continue // not selected: left locked, untouched, until its lock expires
				}
				if it.OriginalMessageID != "" && m.MessageID != it.OriginalMessageID {
					strangers = append(strangers, it)
					continue
				}
				matched = append(matched, match{it, m})
			}
			if len(strangers) > 0 {
				if err := r.resolve(ctx, s, strangers, ItemFailed, "its sequence number now holds a different message "+
					"(the entity was recreated?): the original is gone"); err != nil {
					return err
				}
			}
			// An unpaced job receives the next batch while it acts on this
			// one, which hides the receive's round trip: on a distant
			// namespace a pass reaches that much deeper within one lock
			// duration. A paced job does not: it may wait for its rate
			// as long as the locks allow, while the next batch's locks
			// would run down.
			if r.limiter == nil && !wrapped && len(s.pending) > len(matched) {
				ch := make(chan batch, 1)
				ahead = ch
				go func() {
					cctx, cancel := context.WithTimeout(ctx, callTimeout)
					defer cancel()
					msgs, err := s.recv.Receive(cctx, e.cfg.Batch, time.Second)
					ch <- batch{msgs, err}
				}()
			}
			n, err := r.process(ctx, s, matched)
			if err != nil {
				return err
			}
			processed += n
		}
		e.log.Debug("replay: pass ended", "job", r.job.ID, "source", s.key.q.Path(s.key.entity), "read", len(seen),
			"acted", processed, "wrapped", wrapped, "pending", len(s.pending))
		if len(s.pending) == 0 {
			return nil
		}
		if wrapped {
			if processed == 0 {
				return &halt{reason: fmt.Sprintf("%d selected messages lie deeper in %s than dlqdash can reach within one lock duration (%s; "+
					"it read %d messages before the first locks expired): raise the entity's lock duration (up to 5 minutes) and resume",
					len(s.pending), s.key.q.Path(s.key.entity), s.lock, len(seen))}
			}
			continue
		}
		// Everything available was read. A selected message not among it
		// is gone, or locked by another receiver (an earlier dlqdash
		// that crashed holds its locks for one lock duration).
		if wait := start.Add(s.lock + time.Second).Sub(e.now()); wait > 0 {
			if !r.sleep(wait) {
				return nil
			}
			continue
		}
		var missing []*Item
		for seq, it := range s.pending {
			if !seen[seq] {
				missing = append(missing, it)
			}
		}
		if err := r.resolveMissing(ctx, s, missing, "was not found in"); err != nil {
			return err
		}
		if len(s.pending) > 0 {
			// Seen but not acted on (not enough lock time left): they come
			// back when the locks this pass holds expire.
			if !r.sleep(heldUntil.Sub(e.now()) + 100*time.Millisecond) {
				return nil
			}
		}
	}
	return nil
}

// resolveMissing finishes items whose message the broker no longer has.
func (r *run) resolveMissing(ctx context.Context, s *source, items []*Item, verb string) error {
	if len(items) == 0 {
		return nil
	}
	where := s.key.q.Path(s.key.entity)
	var ups []Update
	for _, it := range items {
		u := Update{MessageID: it.MessageID}
		switch {
		case it.State == ItemSent:
			u.State, u.Error = ItemCompleted, "the copy was sent; the original had already left "+where
		case it.State == ItemLocked && r.job.Action == ActionDiscard:
			u.State, u.Error = ItemCompleted, "removed (the job was interrupted just after removing it)"
		case it.State == ItemLocked:
			u.State, u.Flag = ItemFailed, true
			u.Error = "the job was interrupted while sending this message's copy, and the original has since left " + where +
				": the copy may or may not have been sent"
		default:
			u.State, u.Error = ItemFailed, "the message "+verb+" "+where+": it was removed by someone else, or is locked by another receiver"
		}
		ups = append(ups, u)
	}
	return r.update(ctx, s, ups)
}

// resolveAll finishes every item with one state and reason.
func (r *run) resolveAll(ctx context.Context, items []*Item, st ItemState, why string) error {
	return r.resolve(ctx, nil, items, st, why)
}

func (r *run) resolve(ctx context.Context, s *source, items []*Item, st ItemState, why string) error {
	ups := make([]Update, len(items))
	for i, it := range items {
		ups[i] = Update{MessageID: it.MessageID, State: st, Error: why}
	}
	return r.update(ctx, s, ups)
}

// update writes item states, drops finished items from the source's
// pending set, records failures and skips in the audit trail, and tells
// the dashboard.
func (r *run) update(ctx context.Context, s *source, ups []Update) error {
	if len(ups) == 0 {
		return nil
	}
	e := r.e
	j, err := e.cfg.Store.UpdateItems(ctx, r.job.ID, ups)
	if err != nil {
		return fmt.Errorf("record message states: %w", err)
	}
	r.job = j
	byState := map[ItemState][]string{}
	flagged := []string{}
	for _, u := range ups {
		if s != nil && u.State.Finished() {
			s.finished(u.MessageID)
		}
		if u.State == ItemFailed || u.State == ItemSkipped {
			byState[u.State] = append(byState[u.State], strconv.FormatInt(u.MessageID, 10))
		}
		if u.Flag {
			flagged = append(flagged, strconv.FormatInt(u.MessageID, 10))
		}
	}
	for st, ids := range byState {
		action := audit.ActionMessageFailed
		if st == ItemSkipped {
			action = audit.ActionMessageSkipped
		}
		e.audit(ctx, audit.Record{Actor: ActorEngine, Action: action, MessageIDs: ids, Outcome: audit.OutcomeFailed,
			Params: map[string]any{"job_id": strconv.FormatInt(j.ID, 10), "reason": firstError(ups, st)}})
	}
	if len(flagged) > 0 {
		e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionMessageFlagged, MessageIDs: flagged, Outcome: audit.OutcomeFailed,
			Params: map[string]any{"job_id": strconv.FormatInt(j.ID, 10),
				"reason": "possibly sent twice: resent after an interrupted or failed send, to a target without duplicate detection"}})
	}
	e.changed(j)
	return nil
}

func firstError(ups []Update, st ItemState) string {
	for _, u := range ups {
		if u.State == st {
			return u.Error
		}
	}
	return ""
}

// process acts on messages the source received for the job: it returns
// how many it finished. Messages it cannot act on within their locks stay
// pending for a later pass.
func (r *run) process(ctx context.Context, s *source, matched []match) (int, error) {
	if len(matched) == 0 {
		return 0, nil
	}
	e := r.e
	j := r.job
	now := e.now()
	var poison []*Item
	var work []match
	for _, mt := range matched {
		if r.cancelling && mt.it.State != ItemSent {
			continue
		}
		if j.Action == ActionReplay && !j.AllowPoison && mt.it.State != ItemSent && mt.m.ReplayCount >= e.cfg.PoisonCap {
			poison = append(poison, mt.it)
			continue
		}
		if mt.m.LockedUntil.Sub(now) < s.margin {
			continue
		}
		work = append(work, mt)
	}
	if len(poison) > 0 {
		if err := r.resolve(ctx, s, poison, ItemSkipped, fmt.Sprintf("poison: its lineage was already replayed %d times or more "+
			"(allow_poison replays it anyway)", e.cfg.PoisonCap)); err != nil {
			return 0, err
		}
	}
	if len(work) == 0 {
		return len(poison), nil
	}

	// Paced jobs go a bucketful at a time, so progress (and a pause or
	// cancel) shows between them rather than after the whole batch.
	size := len(work)
	if r.limiter != nil {
		size = r.limiter.Burst()
	}
	done := len(poison)
	for chunk := range slices.Chunk(work, size) {
		if done > len(poison) && r.stopped() {
			break // the rest stay pending, untouched
		}
		if j.Action == ActionReplay {
			var err error
			if chunk, err = r.sendCopies(ctx, s, chunk); err != nil {
				return done, err
			}
		} else {
			ups := make([]Update, len(chunk))
			for i, mt := range chunk {
				ups[i] = Update{MessageID: mt.it.MessageID, State: ItemLocked}
				mt.it.State = ItemLocked
			}
			if err := r.update(ctx, s, ups); err != nil {
				return done, err
			}
		}
		n, err := r.complete(ctx, s, chunk)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// sendCopies sends the copies of the messages that are not sent yet (as
// the rate allows within their locks) and returns the messages whose copy
// is now sent, ready to have their originals removed.
func (r *run) sendCopies(ctx context.Context, s *source, work []match) ([]match, error) {
	e := r.e
	j := r.job
	var ready, toSend []match
	for _, mt := range work {
		if mt.it.State == ItemSent {
			ready = append(ready, mt)
		} else {
			toSend = append(toSend, mt)
		}
	}
	if len(toSend) == 0 {
		return ready, nil
	}
	// The rate: take as many as can be sent before their locks run short.
	if r.limiter != nil {
		now := e.now()
		var wait time.Duration
		n := 0
		for _, mt := range toSend {
			res := r.limiter.ReserveN(now, 1)
			if !res.OK() || now.Add(res.DelayFrom(now)).After(mt.m.LockedUntil.Add(-s.margin)) {
				res.CancelAt(now)
				break
			}
			wait = res.DelayFrom(now)
			n++
		}
		toSend = toSend[:n]
		if n == 0 {
			return ready, nil
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ready, ctx.Err()
			}
		}
	}
	// By destination (a job without one sends each source's messages to
	// its own entity, so this is one group).
	dest, err := r.destination(ctx, s.key.entity)
	if err != nil {
		return ready, r.brokerHalt("read the destination", err)
	}
	if dest.Kind == dlq.KindSubscription {
		return ready, &halt{reason: "the destination " + dest.Path + " is a subscription: send to its topic or a queue"}
	}
	sender, err := r.sender(ctx, dest.Path)
	if err != nil {
		if errors.Is(err, dlq.ErrEntityNotFound) {
			return ready, &halt{reason: fmt.Sprintf("the destination %s does not exist (any more): create it, or cancel this job", dest.Path)}
		}
		return ready, r.brokerHalt("open a sender to "+dest.Path, err)
	}

	locked := make([]Update, len(toSend))
	copies := make([]Copy, len(toSend))
	resent := false
	for i, mt := range toSend {
		// Derived from the received message itself: a resend of the same
		// message after a crash derives the same id.
		id := DerivedMessageID(mt.m.MessageID, mt.it.SequenceNumber, j.ID)
		mt.it.CopyMessageID = id
		locked[i] = Update{MessageID: mt.it.MessageID, State: ItemLocked, CopyMessageID: id}
		copies[i] = Copy{Of: mt.m, MessageID: id, Properties: copyProperties(mt.m, mt.it, j.ID),
			ScheduledEnqueueAt: j.ScheduledEnqueueAt, Edit: mt.it.Edit}
		if mt.it.State == ItemLocked {
			// Locked already: by this run's earlier, failed send, or by a
			// process that crashed after writing it. Either may have sent.
			resent = true
		}
		mt.it.State = ItemLocked
	}
	// The state before the call: after a crash these are sent again under
	// the same MessageIds.
	if err := r.update(ctx, s, locked); err != nil {
		return ready, err
	}
	_, attempts, err := retry(ctx, r, "send to "+dest.Path, func() (struct{}, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return struct{}{}, sender.Send(cctx, copies)
	})
	flag := (resent || attempts > 1) && !dest.DuplicateDetection
	if err != nil {
		if errors.Is(err, dlq.ErrEntityNotFound) {
			return ready, &halt{reason: fmt.Sprintf("the destination %s does not exist (any more): create it, or cancel this job", dest.Path)}
		}
		if transient(err) || errors.Is(err, dlq.ErrUnauthorized) || errors.Is(err, context.Canceled) {
			return ready, r.brokerHalt("send to "+dest.Path, err)
		}
		// Refused for what the messages are (too large, say): one by one,
		// to find which.
		return r.sendOneByOne(ctx, s, sender, toSend, copies, ready, flag)
	}
	sent := make([]Update, len(toSend))
	for i, mt := range toSend {
		sent[i] = Update{MessageID: mt.it.MessageID, State: ItemSent, Flag: flag}
		mt.it.State = ItemSent
	}
	if err := r.update(ctx, s, sent); err != nil {
		return ready, err
	}
	return append(ready, toSend...), nil
}

func (r *run) sendOneByOne(ctx context.Context, s *source, sender Sender, toSend []match, copies []Copy, ready []match, flag bool) ([]match, error) {
	var ups []Update
	for i, mt := range toSend {
		if err := sender.Send(ctx, copies[i:i+1]); err != nil {
			ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemFailed, Flag: flag,
				Error: "the destination refused the copy: " + err.Error()})
			continue
		}
		ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemSent, Flag: flag})
		mt.it.State = ItemSent
		ready = append(ready, mt)
	}
	return ready, r.update(ctx, s, ups)
}

// maxRelease bounds the messages given back when the work on a queue ends.
const maxRelease = 1000

// completeParallel is how many completes are in flight at once.
const completeParallel = 32

// complete removes the originals and returns how many it removed.
// Originals whose locks were lost stay as they are (sent, or locked for a
// discard) and are removed on a later pass; nothing is sent again for them.
func (r *run) complete(ctx context.Context, s *source, work []match) (int, error) {
	errs := make([]error, len(work))
	sem := make(chan struct{}, completeParallel)
	var wg sync.WaitGroup
	for i, mt := range work {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// A settlement is worth nothing after the lock: never wait
			// longer (the SDK can hang on a link whose connection died).
			deadline := mt.m.LockedUntil.Add(time.Second)
			if mt.m.LockedUntil.IsZero() {
				deadline = time.Now().Add(callTimeout)
			}
			cctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			errs[i] = s.recv.Complete(cctx, mt.m)
		}()
	}
	wg.Wait()
	var ups []Update
	var ids []string
	var fatal error
	for i, mt := range work {
		if err := errs[i]; err != nil {
			if !errors.Is(err, dlq.ErrLockLost) && !transient(err) && fatal == nil {
				fatal = err
			}
			r.e.log.Debug("replay: original not removed yet", "job", r.job.ID, "message", mt.it.MessageID, "err", err)
			continue
		}
		ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemCompleted})
		ids = append(ids, strconv.FormatInt(mt.it.MessageID, 10))
		delete(s.held, mt.m.SequenceNumber)
	}
	if err := r.update(ctx, s, ups); err != nil {
		return 0, err
	}
	if len(ups) > 0 && r.e.cfg.OnRemoved != nil {
		r.e.cfg.OnRemoved(s.key.entity, s.key.q, len(ups))
	}
	if len(ids) > 0 {
		action, params := audit.ActionReplay, map[string]any{"job_id": strconv.FormatInt(r.job.ID, 10), "source": s.key.q.Path(s.key.entity)}
		if r.job.Action == ActionDiscard {
			action = audit.ActionDiscard
			params["reason"] = r.job.Reason
		} else if dest, err := r.destination(ctx, s.key.entity); err == nil {
			params["destination"] = dest.Path
		}
		if s.key.q == dlq.SubQueueMain {
			// Messages of the main entity in a job are deferred ones
			// (scheduled ones are skipped when the job is created).
			params["action"] = string(r.job.Action)
			action = audit.ActionDeferredResolved
		}
		r.e.audit(ctx, audit.Record{Actor: r.job.CreatedBy, Action: action, MessageIDs: ids, Params: params})
	}
	if fatal != nil && len(ups) == 0 {
		return 0, r.brokerHalt("remove originals from "+s.key.q.Path(s.key.entity), fatal)
	}
	return len(ups), nil
}
