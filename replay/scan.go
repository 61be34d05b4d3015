package replay

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// resolveDeferred receives deferred messages by sequence number.
func (r *run) resolveDeferred(ctx context.Context, s *source, items []*Item) error {
	for chunk := range slices.Chunk(items, r.e.cfg.Batch) {
		if r.stopped() {
			return nil
		}
		matched, missing, retried, err := r.receiveDeferred(ctx, s, chunk)
		if err != nil {
			return err
		}
		if _, err := r.process(ctx, s, matched); err != nil {
			return err
		}
		// A missing message may be locked rather than gone: by a receive
		// of this run that failed after the broker locked it, or by an
		// earlier run of the job (a process that died, or a run whose
		// locks could not be given back) that had received it; ask again
		// once those locks lapsed.
		earlier := r.adopted || slices.ContainsFunc(missing, func(it *Item) bool { return it.State != ItemPending })
		if len(missing) > 0 && (retried || earlier) {
			why := "that a receive which failed may have left locked"
			if !retried {
				why = "that an earlier run of the job may have left locked"
			}
			r.note(ctx, fmt.Sprintf("waiting up to %d s for %d deferred messages in %s %s",
				int((s.lock+2*time.Second-1)/time.Second), len(missing), s.key.q.Path(s.key.entity), why))
			ok := r.sleep(s.lock + time.Second)
			r.note(ctx, "")
			if !ok {
				return nil
			}
			if matched, missing, _, err = r.receiveDeferred(ctx, s, missing); err != nil {
				return err
			}
			if _, err := r.process(ctx, s, matched); err != nil {
				return err
			}
		}
		if err := r.resolveMissing(ctx, s, missing, "is no longer deferred in"); err != nil {
			return err
		}
	}
	return nil
}

// receiveDeferred receives the items' deferred messages (with retries):
// those the broker returned, those it did not, and whether an attempt
// failed first.
func (r *run) receiveDeferred(ctx context.Context, s *source, items []*Item) (matched []match, missing []*Item, retried bool, err error) {
	seqs := make([]int64, len(items))
	for i, it := range items {
		seqs[i] = it.SequenceNumber
	}
	got, attempts, err := retry(ctx, r, "receive deferred messages from "+s.key.q.Path(s.key.entity), func() ([]*Received, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return s.recv.ReceiveDeferred(cctx, seqs)
	})
	if err != nil {
		return nil, nil, false, r.sourceHalt(s.key.entity, "receive deferred messages from "+s.key.q.Path(s.key.entity), err)
	}
	bySeq := map[int64]*Received{}
	for _, m := range got {
		bySeq[m.SequenceNumber] = m
		// Held until acted on (a complete takes it out): whatever is left
		// when the work on the source ends (a copy the destination
		// refused, a pause, a stop) is given back at once, still deferred,
		// instead of staying locked out of the next run's reach.
		s.held[m.SequenceNumber] = m
	}
	for _, it := range items {
		if m := bySeq[it.SequenceNumber]; m != nil {
			matched = append(matched, match{it, m})
		} else {
			missing = append(missing, it)
		}
	}
	return matched, missing, attempts > 1, nil
}

// scan finds the job's active messages in a queue that can only be read
// from its head (see the package documentation for the design and its
// cost): pass after pass from the head, until no item is pending.
func (r *run) scan(ctx context.Context, s *source) error {
	start := r.e.now()
	s.lockedSince = start
	ahead := &prefetch{}
	defer ahead.drain(s)
	for len(s.pending) > 0 && !r.stopped() {
		p := &pass{seen: map[int64]bool{}}
		stopped, err := r.readPass(ctx, s, p, ahead)
		// Nothing is written for a while now (the pass may wait for
		// locks): the completions held back are written first.
		if ferr := r.flush(ctx); ferr != nil && err == nil {
			err = ferr
		}
		if err != nil || stopped {
			return err
		}
		again, err := r.endPass(ctx, s, p, start)
		if err != nil || !again {
			return err
		}
	}
	return nil
}

// pass is what one pass from the head has read.
type pass struct {
	seen      map[int64]bool // sequence numbers received
	processed int            // items finished
	// wrapped: a message came again, so a lock this pass took has
	// expired and the head is back.
	wrapped   bool
	heldUntil time.Time // when the last lock this pass took expires
}

// sort records a received batch in the pass and among the source's held
// messages, and sorts out the job's messages in it: those to act on, and
// items whose sequence number now holds a different message. The rest (not
// selected) are left locked, untouched, until their locks expire.
func (p *pass) sort(s *source, msgs []*Received) (matched []match, strangers []*Item) {
	for _, m := range msgs {
		if p.seen[m.SequenceNumber] {
			p.wrapped = true
		}
		p.seen[m.SequenceNumber] = true
		if m.LockedUntil.After(p.heldUntil) {
			p.heldUntil = m.LockedUntil
		}
		s.held[m.SequenceNumber] = m
		it := s.pending[m.SequenceNumber]
		if it == nil {
			continue
		}
		if it.OriginalMessageID != "" && m.MessageID != it.OriginalMessageID {
			strangers = append(strangers, it)
			continue
		}
		matched = append(matched, match{it, m})
	}
	return matched, strangers
}

// readPass reads from the head, acting on the job's messages batch by
// batch, until the pass wraps, nothing more is available or no item is
// pending. stopped reports that the run was stopped meanwhile.
func (r *run) readPass(ctx context.Context, s *source, p *pass, ahead *prefetch) (stopped bool, err error) {
	for !p.wrapped && len(s.pending) > 0 {
		if r.stopped() {
			return true, nil
		}
		// The completions held back (deferDone) wait for the next write
		// only while the next batch is at hand, never while the run
		// waits for a receive.
		if ahead.ch == nil || !ahead.ready() {
			if err := r.flush(ctx); err != nil {
				return false, err
			}
		}
		msgs, err := r.receive(ctx, s, ahead)
		if err != nil {
			return false, r.sourceHalt(s.key.entity, "receive from "+s.key.q.Path(s.key.entity), err)
		}
		if len(msgs) == 0 {
			return false, nil // nothing more is available
		}
		matched, strangers := p.sort(s, msgs)
		if len(strangers) > 0 {
			if err := r.resolve(ctx, s, strangers, ItemFailed, "its sequence number now holds a different message "+
				"(the entity was recreated?): the original is gone"); err != nil {
				return false, err
			}
		}
		// An unpaced job receives the next batch while it acts on this
		// one, which hides the receive's round trip: on a distant
		// namespace a pass reaches that much deeper within one lock
		// duration. A paced job does not: it may wait for its rate
		// as long as the locks allow, while the next batch's locks
		// would run down.
		s.batches++
		if r.limiter == nil && !p.wrapped && len(s.pending) > len(matched) {
			ahead.start(ctx, s, r.e.cfg.Batch)
			s.nextUnderWay = true
		}
		n, err := r.process(ctx, s, matched)
		s.nextUnderWay = false
		if err != nil {
			return false, err
		}
		p.processed += n
		if len(r.done) > 0 && r.doneBatch < s.batches {
			// Held back since an earlier batch (this one wrote nothing):
			// the counts must not lag by more than a batch.
			if err := r.flush(ctx); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// endPass decides what follows a pass: another pass (again), or the end
// of the work on this source (every item finished, the run stopped, or a
// halt). Items the pass did not see are finished as missing once every
// lock another receiver may hold has expired.
func (r *run) endPass(ctx context.Context, s *source, p *pass, start time.Time) (again bool, err error) {
	e := r.e
	e.log.Debug("replay: pass ended", "job_id", r.job.ID, "entity", s.key.entity, "subqueue", string(s.key.q), "read", len(p.seen),
		"acted", p.processed, "wrapped", p.wrapped, "pending", len(s.pending))
	if len(s.pending) == 0 {
		return false, nil
	}
	if p.wrapped {
		if p.processed == 0 {
			return false, &halt{reason: fmt.Sprintf("%d selected messages lie deeper in %s than dlqdash can reach within one lock duration (%s; "+
				"it read %d messages before the first locks expired): raise the entity's lock duration (up to 5 minutes) and resume",
				len(s.pending), s.key.q.Path(s.key.entity), s.lock, len(p.seen))}
		}
		return true, nil
	}
	// Everything available was read. A selected message not among it
	// is gone, or locked by another receiver: an earlier dlqdash that
	// crashed holds its locks for one lock duration, and so does a
	// receive of this run that failed after the broker had delivered
	// to it (s.lockedSince).
	if wait := s.lockedSince.Add(s.lock + time.Second).Sub(e.now()); wait > 0 {
		return r.waitForLocks(ctx, s, p, wait, s.lockedSince.After(start)), nil
	}
	var missing []*Item
	for seq, it := range s.pending {
		if !p.seen[seq] {
			missing = append(missing, it)
		}
	}
	if err := r.resolveMissing(ctx, s, missing, "was not found in"); err != nil {
		return false, err
	}
	if len(s.pending) > 0 {
		// Seen but not acted on (not enough lock time left): they come
		// back when the locks this pass holds expire.
		wait := p.heldUntil.Sub(e.now()) + 100*time.Millisecond
		if wait > time.Second {
			r.note(ctx, fmt.Sprintf("waiting up to %d s for the locks this pass took to lapse: %d selected messages in %s "+
				"came with too little lock time left to act on", int((wait+time.Second-1)/time.Second), len(s.pending),
				s.key.q.Path(s.key.entity)))
			defer r.note(ctx, "")
		}
		return r.sleep(wait), nil
	}
	return true, nil
}

// batch is what one receive brought.
type batch struct {
	msgs []*Received
	err  error
}

// prefetch is the next batch, being received while this one is acted on
// (one attempt: a failure is retried by the loop, not in the background).
type prefetch struct {
	ch  chan batch
	got *batch // arrived, seen by ready
}

func (a *prefetch) start(ctx context.Context, s *source, n int) {
	ch := make(chan batch, 1)
	a.ch = ch
	go func() {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		msgs, err := s.recv.Receive(cctx, n, time.Second)
		ch <- batch{msgs, err}
	}()
}

// ready reports whether the batch being received has arrived (or none is
// being received).
func (a *prefetch) ready() bool {
	if a.ch == nil || a.got != nil {
		return true
	}
	select {
	case b := <-a.ch:
		a.got = &b
		return true
	default:
		return false
	}
}

// take waits for the batch being received, if one is.
func (a *prefetch) take() (batch, bool) {
	if a.ch == nil {
		return batch{}, false
	}
	b := a.got
	if b == nil {
		got := <-a.ch
		b = &got
	}
	a.ch, a.got = nil, nil
	return *b, true
}

// drain is for when the work on the source ends: the receiver is closed
// next, never with a receive in flight; what it brought is held, and given
// back with the rest.
func (a *prefetch) drain(s *source) {
	if b, ok := a.take(); ok {
		for _, m := range b.msgs {
			s.held[m.SequenceNumber] = m
		}
	}
}

// receive takes the batch received ahead, or receives one (with retries).
//
// A receive that fails may have failed after the broker delivered messages
// to its link, which stay locked for one lock duration where this run
// cannot see them: s.lockedSince says when the last one failed.
func (r *run) receive(ctx context.Context, s *source, ahead *prefetch) ([]*Received, error) {
	if b, ok := ahead.take(); ok {
		if b.err == nil {
			return b.msgs, nil
		}
		s.lockedSince, s.receiveFailed = r.e.now(), true
	}
	msgs, _, err := retry(ctx, r, "receive from "+s.key.q.Path(s.key.entity), func() ([]*Received, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		msgs, err := s.recv.Receive(cctx, r.e.cfg.Batch, time.Second)
		if err != nil {
			s.lockedSince, s.receiveFailed = r.e.now(), true
		}
		return msgs, err
	})
	return msgs, err
}

// waitForLocks waits until locks another receiver may hold on the
// selected messages the pass did not see have lapsed, saying so on the job
// meanwhile (in its paused_reason, the status staying running): after a
// restart, they are most likely the locks the previous run held. It
// reports false when the run was stopped meanwhile.
func (r *run) waitForLocks(ctx context.Context, s *source, p *pass, wait time.Duration, failed bool) bool {
	unseen := 0
	for seq := range s.pending {
		if !p.seen[seq] {
			unseen++
		}
	}
	secs := int((wait + time.Second - 1) / time.Second)
	note := fmt.Sprintf("waiting up to %d s for %d selected messages in %s that another receiver holds locked (or that are gone)",
		secs, unseen, s.key.q.Path(s.key.entity))
	switch {
	case failed && s.removalFailed:
		// The originals whose complete failed were seen: every message
		// left waits for these locks.
		why := "whose removal failed: the broker may hold their locks until then"
		if s.receiveFailed {
			why = "that receives or removals which failed may have left locked"
		}
		note = fmt.Sprintf("waiting up to %d s for %d selected messages in %s %s", secs, len(s.pending), s.key.q.Path(s.key.entity), why)
	case failed:
		note = fmt.Sprintf("waiting up to %d s for %d selected messages in %s that receives which failed may have left locked",
			secs, unseen, s.key.q.Path(s.key.entity))
	case r.adopted:
		note = fmt.Sprintf("waiting up to %d s for message locks held before the restart (%d selected messages in %s not received yet)",
			secs, unseen, s.key.q.Path(s.key.entity))
	}
	s.receiveFailed, s.removalFailed = false, false
	r.e.log.Info("replay: waiting for locks", "job_id", r.job.ID, "entity", s.key.entity, "wait", wait, "unseen", unseen,
		"pending", len(s.pending))
	r.note(ctx, note)
	defer r.note(ctx, "")
	return r.sleep(wait)
}
