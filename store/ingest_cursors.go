package store

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// SaveCursor stores the ingester's read state of one (entity, subqueue).
func (s *Store) SaveCursor(ctx context.Context, c dlq.Cursor) error {
	return s.saveCursor(ctx, "", c)
}

func (s *Store) saveCursor(ctx context.Context, ns string, c dlq.Cursor) error {
	sq, err := subQueueCode(c.SubQueue)
	if err != nil {
		return err
	}
	var lastErr any
	if c.LastError != "" {
		lastErr = c.LastError
	}
	err = s.execWrite(ctx, `INSERT INTO cursors (entity_id, subqueue, floor, max_seen, broker_count, main_low,
			last_pass_at, last_full_at, full_duration_ms, last_error)
		SELECT id, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM entities WHERE namespace = ? AND path = ?
		ON CONFLICT (entity_id, subqueue) DO UPDATE SET floor = excluded.floor, max_seen = excluded.max_seen,
			broker_count = excluded.broker_count, main_low = excluded.main_low, last_pass_at = excluded.last_pass_at,
			last_full_at = excluded.last_full_at, full_duration_ms = excluded.full_duration_ms, last_error = excluded.last_error`,
		sq, c.Floor, c.MaxSeen, c.BrokerCount, c.MainLow, millis(c.LastPassAt), millis(c.LastFullAt),
		c.FullDuration.Milliseconds(), lastErr, ns, c.Entity)
	if err != nil {
		return s.wrap("save cursor", err)
	}
	return nil
}

// Cursors returns every stored cursor of an entity that is not deleted, with
// the catalog's present count of its subqueue.
func (s *Store) Cursors(ctx context.Context) ([]dlq.Cursor, error) {
	return s.cursors(ctx, "")
}

func (s *Store) cursors(ctx context.Context, ns string) ([]dlq.Cursor, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT e.path, c.subqueue, c.floor, c.max_seen, c.broker_count, c.main_low,
			c.last_pass_at, c.last_full_at, c.full_duration_ms, coalesce(c.last_error, ''),
			coalesce((SELECT sum(present) FROM catalog_counts cc WHERE cc.entity_id = c.entity_id AND cc.subqueue = c.subqueue), 0)
		FROM cursors c JOIN entities e ON e.id = c.entity_id WHERE e.deleted_at IS NULL AND e.namespace = ?`, ns)
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	defer rows.Close()
	var out []dlq.Cursor
	for rows.Next() {
		var c dlq.Cursor
		var sq int
		var pass, full *int64
		var dur int64
		if err := rows.Scan(&c.Entity, &sq, &c.Floor, &c.MaxSeen, &c.BrokerCount, &c.MainLow, &pass, &full, &dur,
			&c.LastError, &c.Present); err != nil {
			return nil, fmt.Errorf("read cursors: %w", err)
		}
		c.SubQueue = subQueueOf(sq)
		c.LastPassAt, c.LastFullAt = timeOf(pass), timeOf(full)
		c.FullDuration = time.Duration(dur) * time.Millisecond
		out = append(out, c)
	}
	return out, rows.Err()
}

// PresentCount is the catalog's count of present messages in one subqueue.
func (s *Store) PresentCount(ctx context.Context, entity string, q dlq.SubQueue) (int64, error) {
	sq, err := subQueueCode(q)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.reader.QueryRowContext(ctx, `SELECT coalesce(sum(cc.present), 0) FROM catalog_counts cc
		JOIN entities e ON e.id = cc.entity_id WHERE e.path = ? AND cc.subqueue = ?`, entity, sq).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count present messages of %s: %w", entity, err)
	}
	return n, nil
}
