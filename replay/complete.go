package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
)

// completeParallel is how many completes are in flight at once.
const completeParallel = 32

// complete removes the originals and returns how many it removed.
// Originals whose locks were lost stay as they are (sent, or locked for a
// discard) and are removed on a later pass; nothing is sent again for them.
func (r *run) complete(ctx context.Context, s *source, work []match) (int, error) {
	errs := make([]error, len(work))
	sem := make(chan struct{}, completeParallel)
	var wg sync.WaitGroup
	// The first complete that fails with a transient error is on the job
	// as soon as this loop sees it, not after the batch: on a broker that
	// stopped answering every round of completes takes a call's deadline.
	var (
		mu       sync.Mutex
		failure  error
		reported bool
	)
	report := func() {
		mu.Lock()
		err := failure
		mu.Unlock()
		if err != nil && !reported {
			reported = true
			r.removalFailing(ctx, s, err)
		}
	}
	for i, mt := range work {
		sem <- struct{}{}
		report()
		// A pause starts no complete: the originals stay (their copies
		// sent) and are removed when the job is resumed. A cancel or a
		// shutdown lets the batch's completes run, so that no copy is
		// left with its original.
		if r.stopping() == stopPause {
			<-sem
			errs[i] = errStopped
			continue
		}
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
			err := s.recv.Complete(cctx, mt.m)
			errs[i] = err
			if err != nil && transient(err) && !errors.Is(err, dlq.ErrLockLost) {
				mu.Lock()
				if failure == nil {
					failure = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	report()
	var ups []Update
	var ids []string
	var fatal error
	for i, mt := range work {
		if err := errs[i]; err != nil {
			if !errors.Is(err, dlq.ErrLockLost) && !transient(err) && !errors.Is(err, errStopped) && fatal == nil {
				fatal = err
			}
			r.e.log.Debug("replay: original not removed yet", "job_id", r.job.ID, "message_id", mt.it.MessageID, "error", err)
			if !errors.Is(err, errStopped) && !errors.Is(err, dlq.ErrLockLost) {
				// The original may keep its lock (a complete that timed
				// out, a dropped connection): out of the next pass's sight
				// until the lock lapses, it must not be taken for gone
				// before then (endPass), or its item would be finished as
				// completed while the original is still there.
				s.lockedSince, s.removalFailed = r.e.now(), true
			}
			continue
		}
		ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemCompleted})
		ids = append(ids, strconv.FormatInt(mt.it.MessageID, 10))
		delete(s.held, mt.m.SequenceNumber)
	}
	var rec *audit.Record
	if len(ids) > 0 {
		action, params := audit.ActionReplay, withNamespace(map[string]any{"job_id": strconv.FormatInt(r.job.ID, 10), "source": s.key.q.Path(s.key.entity)}, r.job)
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
		rec = &audit.Record{Actor: r.job.CreatedBy, Action: action, MessageIDs: ids, Params: params}
	}
	if s.nextUnderWay {
		// The next batch is being received: its first write (the copies'
		// locks) records these too, one transaction fewer a batch.
		r.deferDone(s, ups, rec)
	} else {
		if err := r.update(ctx, s, ups); err != nil {
			return 0, err
		}
		if rec != nil {
			r.e.audit(ctx, *rec)
		}
	}
	if len(ups) > 0 && r.e.cfg.OnRemovedFrom != nil {
		r.e.cfg.OnRemovedFrom(r.job.Namespace, s.key.entity, s.key.q, len(ups))
	} else if len(ups) > 0 && r.e.cfg.OnRemoved != nil {
		r.e.cfg.OnRemoved(s.key.entity, s.key.q, len(ups))
	}
	if fatal != nil && len(ups) == 0 {
		return 0, r.sourceHalt(s.key.entity, "remove originals from "+s.key.q.Path(s.key.entity), fatal)
	}
	return len(ups), nil
}

// removalFailing records on the job that completes of originals from s
// fail with err (status retrying, as retry does): the originals not
// removed are removed on a later pass, once their locks lapse. The job is
// running again after the next broker call that succeeds (retry).
func (r *run) removalFailing(ctx context.Context, s *source, err error) {
	e := r.e
	e.log.Warn("replay: removing originals fails", "job_id", r.job.ID, "entity", s.key.entity, "error", err)
	next := e.now().Add(s.lock + time.Second)
	msg := fmt.Sprintf("remove originals from %s failed: %v; those not removed are removed on a later pass, once their locks lapse (by %s UTC)",
		s.key.q.Path(s.key.entity), err, next.UTC().Format(time.TimeOnly))
	j, serr := r.store().SetRetrying(ctx, r.job.ID, &Retrying{LastError: msg, Attempts: 1, NextAttemptAt: next})
	r.noted(j, serr)
	r.removalsFailing = true
}
