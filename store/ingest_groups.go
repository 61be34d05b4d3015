package store

import (
	"context"
	"database/sql"

	"github.com/dlqdash/dlqdash/dlq"
)

// groupDelta is a page's change to one failure group.
type groupDelta struct {
	group       dlq.Group
	id          int64
	present     int64
	added       int64
	first, last int64
}

func upsertGroups(ctx context.Context, tx *sql.Tx, eid int64, groups map[string]*groupDelta) error {
	for _, d := range groups {
		err := tx.QueryRowContext(ctx, `INSERT INTO groups (key, reason, description_pattern, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET present = present + excluded.present, total = total + excluded.total,
				first_seen_at = min(first_seen_at, excluded.first_seen_at), last_seen_at = max(last_seen_at, excluded.last_seen_at)
			RETURNING id`,
			d.group.ID, d.group.Reason, d.group.DescriptionPattern, d.present, d.added, d.first, d.last).Scan(&d.id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO group_entities (group_id, entity_id, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_id, entity_id) DO UPDATE SET present = present + excluded.present, total = total + excluded.total,
				first_seen_at = min(first_seen_at, excluded.first_seen_at), last_seen_at = max(last_seen_at, excluded.last_seen_at)`,
			d.id, eid, d.present, d.added, d.first, d.last); err != nil {
			return err
		}
	}
	return nil
}
