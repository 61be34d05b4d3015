package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/audit"
)

// This file keeps the audit trail (0006_audit.sql) for package audit, which
// computes the hash chain; the store only serialises appends and reads.

// Page sizes of ListAudit.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

const auditColumns = "seq, at, actor, action, params, message_ids, outcome, prev_hash, hash"

// AppendAudit reads the newest entry and inserts the one build makes from
// it, in one write transaction (beginWrite): on SQLite an IMMEDIATE one on
// the single writer connection, where appends from this process queue and
// another process waits for the file's write lock; on PostgreSQL one
// holding the store's advisory write lock, where the appends of every
// replica queue. Either way every entry chains onto the one before it.
func (s *Store) AppendAudit(ctx context.Context, build func(lastSeq int64, lastHash string) (audit.Entry, error)) (audit.Entry, error) {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return audit.Entry{}, s.wrap("append audit entry", err)
	}
	defer tx.Rollback()
	e, err := appendAuditTx(ctx, s.eng, tx, build)
	if err != nil {
		return audit.Entry{}, s.wrap("append audit entry", err)
	}
	if err := tx.Commit(); err != nil {
		return audit.Entry{}, s.wrap("append audit entry", err)
	}
	return e, nil
}

// appendAuditTx appends build's entry in tx, a write transaction of
// beginWrite (which serialises it with every other append): AppendAudit's,
// or one that also writes what the entry records (SetStatusAudited).
func appendAuditTx(ctx context.Context, eng engine, tx *sql.Tx, build func(lastSeq int64, lastHash string) (audit.Entry, error)) (audit.Entry, error) {
	lastSeq, lastHash := int64(0), audit.GenesisHash
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&lastSeq, &lastHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return audit.Entry{}, err
	}
	e, err := build(lastSeq, lastHash)
	if err != nil {
		return audit.Entry{}, err
	}
	ids := e.MessageIDs
	if ids == nil {
		ids = []string{}
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return audit.Entry{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Seq, e.At.UnixMilli(), e.Actor, e.Action, string(e.Params), string(idsJSON), e.Outcome, e.PrevHash, e.Hash); err != nil {
		return audit.Entry{}, err
	}
	if err := indexAuditAction(ctx, eng, tx, e); err != nil {
		return audit.Entry{}, err
	}
	return e, nil
}

// auditWhere is f as SQL conditions.
func auditWhere(eng engine, f audit.Filter) ([]string, []any) {
	var where []string
	var args []any
	if f.Actor != "" {
		where = append(where, "actor = ?")
		args = append(args, f.Actor)
	}
	if f.Action != "" {
		where = append(where, "action = ?")
		args = append(args, f.Action)
	}
	if f.Since != nil {
		where = append(where, "at >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if f.Until != nil {
		where = append(where, "at < ?")
		args = append(args, f.Until.UnixMilli())
	}
	// The namespace is in the params (a job's and its messages' entries,
	// a denied request's): read where they are JSON (a tampered entry's
	// may not be, and names none).
	ns := eng.jsonField("params", "namespace")
	if f.Namespace != "" {
		where = append(where, "("+ns+" = ? OR "+eng.jsonField("params", "destination_namespace")+" = ?)")
		args = append(args, f.Namespace, f.Namespace)
	}
	if f.Visible != nil {
		names, _ := json.Marshal(f.Visible) // strings always marshal
		where = append(where, "("+ns+" IS NULL OR "+ns+" IN ("+eng.jsonTexts()+"))")
		args = append(args, string(names))
	}
	if f.Job != "" {
		// The actions index (0016) knows each entry's job.
		where = append(where, "seq IN (SELECT e.seq FROM audit_actions a JOIN audit_action_entries e ON e.action_id = a.id WHERE a.job_id = ?)")
		args = append(args, f.Job)
	}
	return where, args
}

// ScanAudit calls fn with every entry matching f in seq order, streaming
// from one snapshot of the read pool (safe beside a serving dlqdash), and
// stops at fn's first error, returning it.
func (s *Store) ScanAudit(ctx context.Context, f audit.Filter, fn func(audit.Entry) error) error {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	defer tx.Rollback()
	where, args := auditWhere(s.eng, f)
	rows, err := tx.QueryContext(ctx, "SELECT "+auditColumns+" FROM audit_log"+whereClause(where)+" ORDER BY seq", args...)
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return fmt.Errorf("read audit log: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	return nil
}

const auditCursorPrefix = "a1."

// ListAudit returns a page of the entries matching f, newest first, and the
// cursor of the next page ("" after the last). limit is clamped to
// [1, MaxAuditLimit] (0 means DefaultAuditLimit). Pages are keyset by seq.
func (s *Store) ListAudit(ctx context.Context, f audit.Filter, limit int, cursor string) ([]audit.Entry, string, error) {
	switch {
	case limit <= 0:
		limit = DefaultAuditLimit
	case limit > MaxAuditLimit:
		limit = MaxAuditLimit
	}
	where, args := auditWhere(s.eng, f)
	if cursor != "" {
		k, err := decodeKey(auditCursorPrefix, cursor, "pass next_cursor from the previous page as it is")
		if err != nil {
			return nil, "", err
		}
		where = append(where, "seq < ?")
		args = append(args, k.id)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+auditColumns+" FROM audit_log"+whereClause(where)+
		" ORDER BY seq DESC LIMIT ?", append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("list audit log: %w", err)
	}
	defer rows.Close()
	var out []audit.Entry
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list audit log: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list audit log: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeKey(auditCursorPrefix, pageKey{id: out[limit-1].Seq})
	}
	return out, next, nil
}

func scanAudit(rows *sql.Rows) (audit.Entry, error) {
	var e audit.Entry
	var at int64
	var params, ids string
	if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Action, &params, &ids, &e.Outcome, &e.PrevHash, &e.Hash); err != nil {
		return e, err
	}
	e.At = time.UnixMilli(at).UTC()
	e.Params = json.RawMessage(params)
	// A message_ids column that is not a JSON array of strings (tampered
	// with) is kept as one id that cannot match, so verify reports the
	// entry rather than failing to read it.
	if err := json.Unmarshal([]byte(ids), &e.MessageIDs); err != nil || e.MessageIDs == nil {
		e.MessageIDs = []string{"invalid message_ids: " + strconv.Quote(strings.TrimSpace(ids))}
	}
	return e, nil
}
