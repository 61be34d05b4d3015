package dlq

import (
	"context"
	"fmt"
	"time"
)

func (in *Ingester) readSettings(ctx context.Context) error {
	var st []Settings
	err := in.brokerRead(ctx, "read entity settings", func(ctx context.Context) (err error) {
		st, err = in.cfg.Broker.Settings(ctx)
		return err
	})
	if err != nil {
		return err
	}
	in.mu.Lock()
	clear(in.settings)
	for _, s := range st {
		in.settings[s.Path] = s
	}
	in.mu.Unlock()
	// Settings of entities the catalog has not listed yet are saved at the
	// next settings read; SaveSettings ignores unknown paths.
	if err := in.cfg.Catalog.SaveSettings(ctx, st); err != nil {
		return fmt.Errorf("catalog: save settings: %w", err)
	}
	return nil
}

// poll reads every entity's counts, records them, and hands entities whose
// subqueues need a pass to the workers.
func (in *Ingester) poll(ctx context.Context) error {
	var ents []Entity
	err := in.brokerRead(ctx, "list entities", func(ctx context.Context) (err error) {
		ents, err = in.cfg.Broker.Entities(ctx)
		return err
	})
	if err != nil {
		return err
	}
	now := in.cfg.Now()
	sync, err := in.cfg.Catalog.SyncEntities(ctx, ents, now)
	if err != nil {
		return fmt.Errorf("catalog: record entities: %w", err)
	}
	in.succeed(now)
	if len(sync.Added) > 0 || len(sync.Deleted) > 0 {
		in.cfg.Publish(Change{Kind: ChangeEntities, At: now})
	}
	if len(sync.Gone) > 0 {
		in.cfg.Publish(Change{Kind: ChangeGone, IDs: sync.Gone, At: now})
	}

	in.mu.Lock()
	in.forgetCursorsLocked(sync)
	changed, due := in.recordCountsLocked(ents, now)
	in.mu.Unlock()

	for _, e := range changed {
		c := e.Counts
		in.cfg.Publish(Change{Kind: ChangeCounts, Entity: e.Path, Counts: &c, At: now})
	}
	for _, e := range ents {
		in.sampleDepth(ctx, e, now)
	}

	// Each due entity gets its own goroutine, which waits for a worker
	// slot: the poll loop never waits for a slow entity, and busy keeps
	// one reader per entity.
	for _, p := range due {
		in.mu.Lock()
		in.busy[p] = true
		in.mu.Unlock()
		in.wg.Go(func() { in.runEntity(ctx, p) })
	}
	return nil
}

// forgetCursorsLocked drops what the ingester knows of entities the
// listing found deleted, and the cursors of entities created again (they
// number from 1 again).
func (in *Ingester) forgetCursorsLocked(sync EntitySync) {
	for _, p := range sync.Deleted {
		in.log.Info("catalog: entity deleted; its messages are kept as gone", "entity", p)
		delete(in.entities, p)
		for _, q := range []SubQueue{SubQueueMain, SubQueueDeadLetter, SubQueueTransferDeadLetter} {
			delete(in.cursors, cursorKey{p, q})
		}
	}
	for _, p := range sync.Added {
		for _, q := range []SubQueue{SubQueueMain, SubQueueDeadLetter, SubQueueTransferDeadLetter} {
			if c := in.cursors[cursorKey{p, q}]; c != nil && c.LastPassAt != nil {
				delete(in.cursors, cursorKey{p, q})
			}
		}
	}
}

// recordCountsLocked keeps the listed entities' counts, and returns those
// whose counts changed and the paths of those due for a pass (not topics,
// not being read, not backing off after errors).
func (in *Ingester) recordCountsLocked(ents []Entity, now time.Time) (changed []Entity, due []string) {
	for _, e := range ents {
		old, ok := in.entities[e.Path]
		in.entities[e.Path] = e
		if !ok || old.Counts != e.Counts {
			changed = append(changed, e)
		}
		if e.Kind != KindTopic && !in.busy[e.Path] && now.After(in.retryAt[e.Path]) && in.needsPassLocked(e, now) {
			due = append(due, e.Path)
		}
	}
	return changed, due
}

func (in *Ingester) sampleDepth(ctx context.Context, e Entity, now time.Time) {
	in.mu.Lock()
	last, seen := in.depthAt[e.Path]
	prev := in.depthOf[e.Path]
	take := !seen || now.Sub(last) >= in.cfg.DepthEvery || (prev != e.Counts && now.Sub(last) >= in.cfg.DepthMinGap)
	if take {
		in.depthAt[e.Path], in.depthOf[e.Path] = now, e.Counts
	}
	in.mu.Unlock()
	if !take {
		return
	}
	if err := in.cfg.Catalog.RecordDepth(ctx, e.Path, e.Counts, now); err != nil && ctx.Err() == nil {
		in.log.Warn("catalog: cannot record a depth sample", "entity", e.Path, "error", err.Error())
	}
}
