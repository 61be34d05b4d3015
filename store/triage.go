package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/alert"
	"github.com/dlqdash/dlqdash/dlq"
)

// Triage: what people say about a failure group (migration 0014). The
// ingest path never writes these columns; the trigger groups_reopen moves a
// resolved group that receives new dead letters back to new.

// triageColumns are the groups columns triageRow scans, in its order.
const triageColumns = `name, status, owner, notes, status_changed_at, reopened_at`

type triageRow struct {
	name, status, owner, notes string
	changedAt, reopenedAt      *int64
}

func (t *triageRow) dest() []any {
	return []any{&t.name, &t.status, &t.owner, &t.notes, &t.changedAt, &t.reopenedAt}
}

func (t triageRow) triage() dlq.GroupTriage {
	return dlq.GroupTriage{Name: t.name, Status: dlq.GroupStatus(t.status), Owner: t.owner, Notes: t.notes,
		StatusChangedAt: timeOf(t.changedAt), ReopenedAt: timeOf(t.reopenedAt)}
}

// UpdateGroupTriage applies c to the group with this key in one
// transaction and returns its triage before and after. A status change
// (to a different status) sets StatusChangedAt. ErrNotFound when there is
// no such group.
func (s *Store) UpdateGroupTriage(ctx context.Context, key string, c dlq.TriageChange) (before, after dlq.GroupTriage, err error) {
	if c.Status != nil && !c.Status.Valid() {
		return before, after, fmt.Errorf("update group %s: %q is not a status", key, *c.Status)
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return before, after, s.wrap("update group", err)
	}
	defer tx.Rollback()
	var id int64
	var t triageRow
	err = tx.QueryRowContext(ctx, `SELECT id, `+triageColumns+` FROM groups WHERE key = ?`, key).
		Scan(append([]any{&id}, t.dest()...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return before, after, fmt.Errorf("group %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return before, after, fmt.Errorf("update group %s: %w", key, err)
	}
	before = t.triage()
	if c.Name != nil {
		t.name = *c.Name
	}
	if c.Owner != nil {
		t.owner = *c.Owner
	}
	if c.Notes != nil {
		t.notes = *c.Notes
	}
	if c.Status != nil && string(*c.Status) != t.status {
		t.status = string(*c.Status)
		now := s.nowMillis()
		t.changedAt = &now
	}
	if _, err := tx.ExecContext(ctx, `UPDATE groups SET name = ?, status = ?, owner = ?, notes = ?, status_changed_at = ? WHERE id = ?`,
		t.name, t.status, t.owner, t.notes, t.changedAt, id); err != nil {
		return before, after, fmt.Errorf("update group %s: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		return before, after, s.wrap("update group", err)
	}
	return before, t.triage(), nil
}

// UnauditedReopenings returns the reopenings (groups_reopen) not yet
// marked audited, oldest first.
func (s *Store) UnauditedReopenings(ctx context.Context) ([]alert.Reopening, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT r.id, g.key, g.name, g.reason, g.description_pattern, r.at, r.added
		FROM group_reopenings r JOIN groups g ON g.id = r.group_id WHERE r.audited = 0 ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("read reopened groups: %w", err)
	}
	defer rows.Close()
	var out []alert.Reopening
	for rows.Next() {
		var r alert.Reopening
		var reason, pattern string
		var at int64
		if err := rows.Scan(&r.ID, &r.GroupKey, &r.Name, &reason, &pattern, &at, &r.Added); err != nil {
			return nil, fmt.Errorf("read reopened groups: %w", err)
		}
		if r.Name == "" {
			r.Name = dlq.GroupName(reason, pattern)
		}
		r.At = time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// MarkReopeningAudited records that reopening id is in the audit trail.
func (s *Store) MarkReopeningAudited(ctx context.Context, id int64) error {
	if _, err := s.writer.ExecContext(ctx, `UPDATE group_reopenings SET audited = 1 WHERE id = ?`, id); err != nil {
		return s.wrap("mark reopened group audited", err)
	}
	return nil
}
