package dlq

import (
	"context"
	"time"
)

func (in *Ingester) pruneLoop(ctx context.Context) {
	t := time.NewTicker(in.cfg.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutoff := in.cfg.Now().Add(-in.cfg.Retention)
		total := 0
		for ctx.Err() == nil {
			n, err := in.cfg.Catalog.PruneGone(ctx, cutoff, in.cfg.PruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					in.log.Warn("catalog: retention prune failed; will retry", "error", err.Error())
				}
				break
			}
			total += n
			if n < in.cfg.PruneBatch {
				break
			}
		}
		if total > 0 {
			in.log.Info("catalog: pruned messages gone longer than the retention", "messages", total,
				"retention", in.cfg.Retention.String())
		}
		in.mergeSearchIndex(ctx)
	}
}

// mergeSearchIndex merges the search index in small steps while no entity
// is being read: bulk passes leave many small segments (the index merges
// lazily so that writes stay fast), and searches slow down with their
// number. A step that another write arrives during just waits its turn.
func (in *Ingester) mergeSearchIndex(ctx context.Context) {
	for range 50 { // at most ~50 × 200 pages a minute
		in.mu.Lock()
		busy := len(in.busy) > 0
		in.mu.Unlock()
		if busy || ctx.Err() != nil {
			return
		}
		more, err := in.cfg.Catalog.MergeSearchIndex(ctx, 200)
		if err != nil {
			if ctx.Err() == nil {
				in.log.Warn("catalog: merging the search index failed; will retry", "error", err.Error())
			}
			return
		}
		if !more {
			return
		}
	}
}
