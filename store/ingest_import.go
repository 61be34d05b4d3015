package store

import (
	"context"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// Import writes catalog records as they are, with their own first-seen,
// last-seen and gone times and replay counts, through the same inserts,
// failure groups and present counts as ApplyPage. It is for a catalog with a
// history (messages first seen days ago, some gone since) without a broker:
// tests, benchmarks and their generated catalogs (store/storetest). The
// ingester never calls it: it writes what it peeks with ApplyPage.
//
// Every record's entity must exist (SyncEntities). A zero FirstSeenAt means
// now, a zero LastSeenAt means FirstSeenAt; an empty BodyPreview is derived
// from a text body as ApplyPage derives it; ReplayCount counts when it is
// more than the properties say. ID, BodySize and GroupID are derived, not
// read. It is one transaction, and returns the new ids in order.
func (s *Store) Import(ctx context.Context, recs []dlq.Record) ([]int64, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	tx, ic, err := s.beginIngest(ctx)
	if err != nil {
		return nil, s.wrap("import", err)
	}
	defer ic.release() // after the Rollback below
	defer tx.Rollback()

	// Groups and counters are per entity; entities go in the order they
	// first appear, so that the same records make the same rows.
	type entityBatch struct {
		eid      int64
		groups   *groupTally
		counters counts
	}
	byPath := map[string]*entityBatch{}
	var order []*entityBatch
	now := s.nowMillis()
	rows := make([]newMessage, len(recs))
	for i := range recs {
		r := &recs[i]
		b := byPath[r.Namespace+"\x00"+r.Entity]
		if b == nil {
			eid, err := entityID(ctx, tx, r.Namespace, r.Entity)
			if err != nil {
				return nil, fmt.Errorf("import: %w", err)
			}
			b = &entityBatch{eid: eid, groups: newGroupTally(), counters: counts{}}
			byPath[r.Namespace+"\x00"+r.Entity] = b
			order = append(order, b)
		}
		sq, err := subQueueCode(r.SubQueue)
		if err != nil {
			return nil, err
		}
		st, err := stateCode(r.State)
		if err != nil {
			return nil, err
		}
		first := now
		if !r.FirstSeenAt.IsZero() {
			first = r.FirstSeenAt.UTC().UnixMilli()
		}
		last := first
		if !r.LastSeenAt.IsZero() {
			last = r.LastSeenAt.UTC().UnixMilli()
		}
		present := r.GoneAt == nil
		if present {
			b.counters.add(sq, st, 1)
		}
		rows[i] = newMessage{m: &r.Message, eid: b.eid, sq: sq, st: st, group: b.groups.add(&r.Message, r.SubQueue, first, present),
			firstSeen: first, lastSeen: last, gone: millis(r.GoneAt), replayCount: int64(r.ReplayCount), preview: r.BodyPreview}
	}
	for _, b := range order {
		if err := upsertGroups(ctx, tx, s.chunk, b.eid, b.groups.byID); err != nil {
			return nil, fmt.Errorf("import: update failure groups: %w", err)
		}
		if err := b.counters.write(ctx, tx, s.chunk, b.eid); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	ids, err := insertMessages(ctx, tx, ic, s.chunk, rows)
	if err != nil {
		return nil, fmt.Errorf("import messages: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap("import", err)
	}
	s.idx.added(len(ids))
	return ids, nil
}
