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
		e.log.Debug("replay: pass ended", "job_id", r.job.ID, "entity", s.key.entity, "subqueue", string(s.key.q), "read", len(seen),
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
