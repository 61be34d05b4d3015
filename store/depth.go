package store

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// DepthSeries is the namespace's dead-letter depth (dead-letter plus
// transfer dead-letter counts of every entity not deleted) over [since,
// until], in buckets equal slices of it, each the largest total seen in the
// bucket. Depth samples are written when counts change (and every few
// minutes), so an entity's depth carries forward from its last sample,
// including one from before since.
//
// The cost is bounded by the number of samples in the window (one per entity
// per 5 s at most) read through the (entity_id, at) primary key, never the
// catalog of messages.
func (s *Store) DepthSeries(ctx context.Context, since, until time.Time, buckets int) (dlq.DepthSeries, error) {
	out := dlq.DepthSeries{Since: since.UTC(), Until: until.UTC()}
	if buckets <= 0 || !until.After(since) {
		return out, fmt.Errorf("depth series: want a positive bucket count and until after since")
	}
	from, to := since.UTC().UnixMilli(), until.UTC().UnixMilli()
	width := max((to-from)/int64(buckets), 1)

	tx, err := s.reader.BeginTx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("depth series: %w", err)
	}
	defer tx.Rollback()

	// Each live entity's depth when the window opens.
	current := map[int64]int64{}
	rows, err := tx.QueryContext(ctx, `SELECT e.id, coalesce((SELECT d.dead_letter_count + d.transfer_dead_letter_count
			FROM depth_samples d WHERE d.entity_id = e.id AND d.at < ? ORDER BY d.at DESC LIMIT 1), 0)
		FROM entities e WHERE e.deleted_at IS NULL`, from)
	if err != nil {
		return out, fmt.Errorf("depth series: %w", err)
	}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return out, fmt.Errorf("depth series: %w", err)
		}
		current[id] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("depth series: %w", err)
	}

	rows, err = tx.QueryContext(ctx, `SELECT d.entity_id, d.at, d.dead_letter_count + d.transfer_dead_letter_count
		FROM depth_samples d JOIN entities e ON e.id = d.entity_id
		WHERE e.deleted_at IS NULL AND d.at >= ? AND d.at <= ? ORDER BY d.at`, from, to)
	if err != nil {
		return out, fmt.Errorf("depth series: %w", err)
	}
	defer rows.Close()
	total := int64(0)
	for _, n := range current {
		total += n
	}
	out.Points = make([]int64, buckets)
	bucket := 0
	out.Points[0] = total
	for rows.Next() {
		var id, at, n int64
		if err := rows.Scan(&id, &at, &n); err != nil {
			return out, fmt.Errorf("depth series: %w", err)
		}
		b := min(int((at-from)/width), buckets-1)
		for bucket < b {
			bucket++
			out.Points[bucket] = total
		}
		total += n - current[id]
		current[id] = n
		out.Points[bucket] = max(out.Points[bucket], total)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("depth series: %w", err)
	}
	for bucket < buckets-1 {
		bucket++
		out.Points[bucket] = total
	}
	out.Latest = total
	return out, nil
}

// RecordDepth stores one sample of an entity's broker counts.
func (s *Store) RecordDepth(ctx context.Context, entity string, c dlq.Counts, at time.Time) error {
	return s.recordDepth(ctx, "", entity, c, at)
}

func (s *Store) recordDepth(ctx context.Context, ns, entity string, c dlq.Counts, at time.Time) error {
	err := s.execWrite(ctx, `INSERT INTO depth_samples (entity_id, at, active_count, dead_letter_count,
			transfer_dead_letter_count, scheduled_count)
		SELECT id, ?, ?, ?, ?, ? FROM entities WHERE namespace = ? AND path = ?
		ON CONFLICT (entity_id, at) DO UPDATE SET active_count = excluded.active_count,
			dead_letter_count = excluded.dead_letter_count, transfer_dead_letter_count = excluded.transfer_dead_letter_count,
			scheduled_count = excluded.scheduled_count`,
		at.UTC().UnixMilli(), c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, ns, entity)
	if err != nil {
		return s.wrap("record depth", err)
	}
	return nil
}
