package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/audit"
)

// This file reads the audit trail one row per action (0016_audit_actions):
// the entries a job writes a batch of messages at a time grouped under
// their job and action, every other entry a row of its own.

const auditActionColumns = "a.id, a.last_seq, a.first_at, a.last_at, a.actor, a.action, a.outcome, " +
	"coalesce(a.job_id, ''), coalesce(a.namespace, ''), coalesce(a.destination_namespace, ''), a.entries, a.messages, l.params, l.hash"

const auditActionCursorPrefix = "g1."

// indexAuditAction records e, just appended in tx, in its action
// (0016_audit_actions): a new action, or the one its GroupKey names grown.
// An id already taken (an entry appended again by hand after its removal)
// leaves the index as it is.
func indexAuditAction(ctx context.Context, eng engine, tx *sql.Tx, e audit.Entry) error {
	p := audit.Describe(e)
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	// SQLite takes two ON CONFLICT clauses (the group grows; an id taken
	// does nothing); PostgreSQL takes one, so there an id taken is checked
	// first, and then the group grows as on SQLite.
	insert := `INSERT INTO audit_actions (id, group_key, last_seq, first_at, last_at, actor, action, outcome,
			job_id, namespace, destination_namespace, entries, messages)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)
		ON CONFLICT (group_key) DO UPDATE SET last_seq = excluded.last_seq, last_at = excluded.last_at,
			entries = audit_actions.entries + 1, messages = audit_actions.messages + excluded.messages`
	args := []any{e.Seq, null(p.GroupKey), e.Seq, e.At.UnixMilli(), e.At.UnixMilli(), e.Actor, e.Action, e.Outcome,
		null(p.JobID), null(p.Namespace), null(p.DestinationNamespace), len(e.MessageIDs)}
	if !eng.postgres {
		insert += " ON CONFLICT DO NOTHING"
	} else {
		var taken bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM audit_actions WHERE id = ?)`, e.Seq).Scan(&taken); err != nil {
			return fmt.Errorf("index audit entry %d: %w", e.Seq, err)
		}
		if taken {
			if p.GroupKey == "" {
				return nil
			}
			// The group grows; the entry's own id stays another action's.
			insert = `UPDATE audit_actions SET last_seq = ?, last_at = ?, entries = entries + 1, messages = messages + ?
				WHERE group_key = ?`
			args = []any{e.Seq, e.At.UnixMilli(), len(e.MessageIDs), p.GroupKey}
		}
	}
	insert += " RETURNING id"
	var id int64
	err := tx.QueryRowContext(ctx, insert, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index audit entry %d: %w", e.Seq, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_action_entries (action_id, seq) VALUES (?, ?) ON CONFLICT DO NOTHING`, id, e.Seq); err != nil {
		return fmt.Errorf("index audit entry %d: %w", e.Seq, err)
	}
	return nil
}

// auditActionWhere is f as SQL conditions on audit_actions (a). An action's
// actor, action, job and namespaces are those of each of its entries; the
// time range keeps the actions with an entry in it (first_at before until,
// last_at at or after since).
func auditActionWhere(eng engine, f audit.Filter) ([]string, []any) {
	var where []string
	var args []any
	if f.Actor != "" {
		where = append(where, "a.actor = ?")
		args = append(args, f.Actor)
	}
	if f.Action != "" {
		where = append(where, "a.action = ?")
		args = append(args, f.Action)
	}
	if f.Since != nil {
		where = append(where, "a.last_at >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if f.Until != nil {
		where = append(where, "a.first_at < ?")
		args = append(args, f.Until.UnixMilli())
	}
	if f.Namespace != "" {
		where = append(where, "(a.namespace = ? OR a.destination_namespace = ?)")
		args = append(args, f.Namespace, f.Namespace)
	}
	if f.Visible != nil {
		names, _ := json.Marshal(f.Visible) // strings always marshal
		where = append(where, "(a.namespace IS NULL OR a.namespace IN ("+eng.jsonTexts()+"))")
		args = append(args, string(names))
	}
	if f.Job != "" {
		where = append(where, "a.job_id = ?")
		args = append(args, f.Job)
	}
	return where, args
}

// ListAuditActions returns a page of the actions matching f, newest first
// (by their first entry), and the cursor of the next page ("" after the
// last). limit is clamped as ListAudit's. An action's place never changes
// as it grows, so pages neither skip nor repeat one.
func (s *Store) ListAuditActions(ctx context.Context, f audit.Filter, limit int, cursor string) ([]audit.ActionRow, string, error) {
	switch {
	case limit <= 0:
		limit = DefaultAuditLimit
	case limit > MaxAuditLimit:
		limit = MaxAuditLimit
	}
	where, args := auditActionWhere(s.eng, f)
	if cursor != "" {
		k, err := decodeKey(auditActionCursorPrefix, cursor, "pass next_cursor from the previous page as it is")
		if err != nil {
			return nil, "", err
		}
		where = append(where, "a.id < ?")
		args = append(args, k.id)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+auditActionColumns+" FROM audit_actions a JOIN audit_log l ON l.seq = a.id"+
		whereClause(where)+" ORDER BY a.id DESC LIMIT ?", append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("list audit actions: %w", err)
	}
	defer rows.Close()
	var out []audit.ActionRow
	for rows.Next() {
		a, err := scanAuditAction(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list audit actions: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list audit actions: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeKey(auditActionCursorPrefix, pageKey{id: out[limit-1].ID})
	}
	return out, next, nil
}

// AuditAction returns one action by its id (the seq of its first entry), or
// ErrNotFound.
func (s *Store) AuditAction(ctx context.Context, id int64) (audit.ActionRow, error) {
	rows, err := s.reader.QueryContext(ctx, "SELECT "+auditActionColumns+" FROM audit_actions a JOIN audit_log l ON l.seq = a.id WHERE a.id = ?", id)
	if err != nil {
		return audit.ActionRow{}, fmt.Errorf("read audit action %d: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return audit.ActionRow{}, fmt.Errorf("read audit action %d: %w", id, err)
		}
		return audit.ActionRow{}, fmt.Errorf("audit action %d: %w", id, ErrNotFound)
	}
	a, err := scanAuditAction(rows)
	if err != nil {
		return audit.ActionRow{}, fmt.Errorf("read audit action %d: %w", id, err)
	}
	return a, nil
}

func scanAuditAction(rows *sql.Rows) (audit.ActionRow, error) {
	var a audit.ActionRow
	var first, last int64
	var params string
	if err := rows.Scan(&a.ID, &a.LastSeq, &first, &last, &a.Actor, &a.Action, &a.Outcome, &a.JobID, &a.Namespace,
		&a.DestinationNamespace, &a.Entries, &a.Messages, &params, &a.Hash); err != nil {
		return a, err
	}
	a.FirstAt, a.LastAt = time.UnixMilli(first).UTC(), time.UnixMilli(last).UTC()
	a.Params = json.RawMessage(params)
	return a, nil
}

// Page sizes of AuditActionMessages.
const (
	DefaultAuditMessagesLimit = 500
	MaxAuditMessagesLimit     = 5000
)

const auditMessagesCursorPrefix = "i1."

// AuditActionMessages returns a page of the message ids an action's entries
// hold, in the order they were recorded, and the cursor of the next page
// ("" after the last). limit is clamped to [1, MaxAuditMessagesLimit] (0
// means DefaultAuditMessagesLimit). Only the entries the page reaches are
// read (SQLite's json_each walks an entry's array), so a page of a job of
// 100,000 messages costs what its page holds, not the job. An action that
// does not exist has no messages.
func (s *Store) AuditActionMessages(ctx context.Context, id int64, limit int, cursor string) ([]string, string, error) {
	switch {
	case limit <= 0:
		limit = DefaultAuditMessagesLimit
	case limit > MaxAuditMessagesLimit:
		limit = MaxAuditMessagesLimit
	}
	// The cursor is the next id's place: its entry (seq) and its index in
	// the entry's message_ids, plus one.
	var from pageKey
	if cursor != "" {
		k, err := decodeKey(auditMessagesCursorPrefix, cursor, "pass next_cursor from the previous page as it is")
		if err != nil {
			return nil, "", err
		}
		from = pageKey{at: k.at, id: k.id - 1}
	}
	eng := s.eng
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, "", fmt.Errorf("read audit action messages: %w", err)
	}
	defer tx.Rollback()
	// nextEntry is the action's first entry at or after seq (false: none).
	nextEntry := func(seq int64) (int64, bool, error) {
		var s int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM audit_action_entries WHERE action_id = ? AND seq >= ? ORDER BY seq LIMIT 1`, id, seq).Scan(&s)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("read audit action messages: %w", err)
		}
		return s, true, nil
	}
	var ids []string
	seq, idx := from.at, from.id
	for len(ids) < limit {
		s, ok, err := nextEntry(seq)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			return ids, "", nil
		}
		if s != seq {
			idx = 0
		}
		got, more, err := entryMessageIDs(ctx, eng, tx, s, idx, limit-len(ids))
		if err != nil {
			return nil, "", err
		}
		ids = append(ids, got...)
		if more > 0 {
			return ids, encodeKey(auditMessagesCursorPrefix, pageKey{at: s, id: more + 1}), nil
		}
		seq, idx = s+1, 0
	}
	// The page is full at an entry's end: the next entry, if any, starts
	// the next page.
	if _, ok, err := nextEntry(seq); err != nil || !ok {
		return ids, "", err
	}
	return ids, encodeKey(auditMessagesCursorPrefix, pageKey{at: seq, id: 1}), nil
}

// entryMessageIDs reads up to n ids of entry seq's message_ids from index
// start, and where the next id is (0: the entry holds no more). json_each
// walks the array in order.
func entryMessageIDs(ctx context.Context, eng engine, tx *sql.Tx, seq, start int64, n int) ([]string, int64, error) {
	q := `SELECT j.key, j.value FROM audit_log l,
		json_each(CASE WHEN json_valid(l.message_ids) THEN l.message_ids ELSE '[]' END) j
		WHERE l.seq = ? AND j.key >= ? AND j.type = 'text' LIMIT ?`
	if eng.postgres {
		// json_array_elements WITH ORDINALITY walks the array in order
		// (dlqdash_json_array: migration 0016).
		q = `SELECT j.ord - 1, j.elem #>> '{}' FROM audit_log l,
			json_array_elements(dlqdash_json_array(l.message_ids)) WITH ORDINALITY AS j(elem, ord)
			WHERE l.seq = ? AND j.ord - 1 >= ? AND json_typeof(j.elem) = 'string' ORDER BY j.ord LIMIT ?`
	}
	rows, err := tx.QueryContext(ctx, q, seq, start, n+1)
	if err != nil {
		return nil, 0, fmt.Errorf("read audit entry %d's messages: %w", seq, err)
	}
	defer rows.Close()
	var ids []string
	var key int64
	for rows.Next() {
		var id string
		if err := rows.Scan(&key, &id); err != nil {
			return nil, 0, fmt.Errorf("read audit entry %d's messages: %w", seq, err)
		}
		if len(ids) == n {
			return ids, key, nil
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read audit entry %d's messages: %w", seq, err)
	}
	return ids, 0, nil
}
