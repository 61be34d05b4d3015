package dlq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

func (in *Ingester) runEntity(ctx context.Context, p string) {
	select {
	case in.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	err := in.readEntity(ctx, p)
	<-in.slots
	in.mu.Lock()
	delete(in.busy, p)
	if err != nil && ctx.Err() == nil {
		in.failures[p]++
		in.retryAt[p] = in.cfg.Now().Add(in.backoff(in.failures[p], err))
	} else {
		delete(in.failures, p)
		delete(in.retryAt, p)
	}
	in.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		if errors.Is(err, ErrEntityNotFound) {
			in.log.Info("catalog: entity vanished while being read; the next listing marks it deleted", "entity", p)
		} else {
			in.log.Warn("catalog: cannot read entity; will retry", "entity", p, "error", err.Error())
		}
	}
}

// readEntity runs the passes one entity needs: the main entity first (its
// lowest sequence number is the DLQ floor), then the DLQ and transfer DLQ.
func (in *Ingester) readEntity(ctx context.Context, path string) error {
	now := in.cfg.Now()
	in.mu.Lock()
	e := in.entities[path]
	mainOK := in.mainReadable(path)
	mainCur := in.cursorLocked(path, SubQueueMain)
	doMain := mainOK && in.mainDue(mainCur, brokerCount(e, SubQueueMain), now)
	in.mu.Unlock()

	var errs []error
	if doMain {
		if err := in.passMain(ctx, e, mainCur); err != nil {
			if errors.Is(err, ErrEntityNotFound) {
				return err
			}
			errs = append(errs, err)
		}
	}
	for _, q := range []SubQueue{SubQueueDeadLetter, SubQueueTransferDeadLetter} {
		in.mu.Lock()
		c := in.cursorLocked(path, q)
		plan := in.dlqPlan(c, brokerCount(e, q), in.cfg.Now())
		in.mu.Unlock()
		if plan == passNone {
			continue
		}
		if err := in.passDLQ(ctx, e, c, plan, mainOK); err != nil {
			if errors.Is(err, ErrEntityNotFound) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// passMain reads the whole main entity, cataloging its deferred and
// scheduled messages and noting its lowest active or deferred number.
func (in *Ingester) passMain(ctx context.Context, e Entity, c *cursorState) error {
	start := in.cfg.Now()
	low := int64(math.MaxInt64)
	err := in.pass(ctx, e.Path, SubQueueMain, 0, c, func(m *Message) bool {
		if m.State != StateScheduled {
			low = min(low, m.SequenceNumber)
		}
		return m.State == StateDeferred || m.State == StateScheduled
	})
	if err != nil {
		return in.saveFailed(ctx, c, err)
	}
	in.mu.Lock()
	if low == math.MaxInt64 {
		low = 0 // empty: nothing below bounds the DLQ, but "unknown" is the safe reading
	}
	c.MainLow = low
	in.mu.Unlock()
	return in.passDone(ctx, c, brokerCount(e, SubQueueMain), true, start)
}

// floorNow measures, before a DLQ pass, the floor that pass will have
// established when it ends: min(lowest active or deferred number in the main
// entity, highest DLQ number seen so far + 1). See the package doc.
func (in *Ingester) floorNow(ctx context.Context, e Entity, c *cursorState, mainOK bool) (int64, error) {
	in.mu.Lock()
	maxSeen := c.MaxSeen
	in.mu.Unlock()
	if !mainOK {
		return 0, nil
	}
	next := maxSeen + 1
	from := int64(0)
	for {
		// A short look at the head of the main entity: the first messages
		// are usually active; scheduled ones are skipped (they get a new
		// number when they activate).
		page, err := in.cfg.Broker.Peek(ctx, e.Path, SubQueueMain, from, 32)
		if err != nil {
			return 0, fmt.Errorf("peek the head of %s: %w", e.Path, err)
		}
		if len(page) == 0 {
			return next, nil
		}
		for _, m := range page {
			if m.State != StateScheduled {
				return min(m.SequenceNumber, next), nil
			}
		}
		from = page[len(page)-1].SequenceNumber + 1
	}
}

func (in *Ingester) passDLQ(ctx context.Context, e Entity, c *cursorState, plan passKind, mainOK bool) error {
	count := brokerCount(e, c.SubQueue)
	start := in.cfg.Now()
	keep := func(*Message) bool { return true }

	if plan == passTail {
		in.mu.Lock()
		from := max(c.MaxSeen+1, c.Floor)
		in.mu.Unlock()
		if err := in.pass(ctx, e.Path, c.SubQueue, from, c, keep); err != nil {
			return in.saveFailed(ctx, c, err)
		}
		// More than the count is fine: arrivals after the count was read.
		in.mu.Lock()
		reconciled := c.expected() >= count
		in.mu.Unlock()
		if reconciled {
			return in.passDone(ctx, c, count, false, start)
		}
	}

	// From the floor (or from 0 for a full pass).
	floor, err := in.floorNow(ctx, e, c, mainOK)
	if err != nil {
		return in.saveFailed(ctx, c, err)
	}
	in.mu.Lock()
	from := c.Floor
	in.mu.Unlock()
	full := plan == passFull
	if full {
		from = 0
	}
	if err := in.pass(ctx, e.Path, c.SubQueue, from, c, keep); err != nil {
		return in.saveFailed(ctx, c, err)
	}
	in.mu.Lock()
	c.Floor = max(c.Floor, floor)
	if !full && c.expected() < count {
		// Still missing something after reading from the floor: only a
		// full pass can settle it (a partitioned entity, whose peek is not
		// strictly ordered, is one way to get here).
		c.pendingFull = true
	}
	in.mu.Unlock()
	return in.passDone(ctx, c, count, full, start)
}

func (in *Ingester) passDone(ctx context.Context, c *cursorState, count int64, full bool, start time.Time) error {
	end := in.cfg.Now()
	in.mu.Lock()
	c.BrokerCount = count
	c.LastPassAt = &end
	if full {
		c.LastFullAt = &end
		c.FullDuration = end.Sub(start)
		c.pendingFull = false
		c.removed = 0 // the pass marked them gone
	}
	c.LastError = ""
	cur := c.Cursor
	in.mu.Unlock()
	return in.cfg.Catalog.SaveCursor(ctx, cur)
}

func (in *Ingester) saveFailed(ctx context.Context, c *cursorState, err error) error {
	if ctx.Err() != nil {
		// Shutting down mid-pass is not a read error: the cursor as last
		// saved stays, and the pass runs again after the restart.
		return err
	}
	in.mu.Lock()
	c.LastError = err.Error()
	cur := c.Cursor
	in.mu.Unlock()
	if serr := in.cfg.Catalog.SaveCursor(context.WithoutCancel(ctx), cur); serr != nil && ctx.Err() == nil {
		in.log.Warn("catalog: cannot save read state", "entity", c.Entity, "error", serr.Error())
	}
	return err
}
