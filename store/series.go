package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// maxSeriesJobs bounds the jobs marked on a series; maxSeriesJobScan the
// messages of one job looked at to tell whether it touched the series'
// group (a job selected from the group matches at its first message).
const (
	maxSeriesJobs    = 100
	maxSeriesJobScan = 100_000
)

// DeadLetterSeries counts a group's or an entity's dead letters over a
// window by enqueued time (dlq.CountSeries), with the jobs that acted on
// them.
//
// The counts are range scans of a covering index, one per bucket: messages_by_group
// (group_id, coalesce(enqueued_at, -1), ...) for a group, messages_by_entity
// (entity_id, coalesce(enqueued_at, -1), ...) for an entity; the subqueue
// and entity are checked in the index, so no table row is read. Its cost is
// the number of the group's (entity's) messages in the window. The jobs come
// from the jobs table (those created in the window, newest first, at most
// maxSeriesJobs), each checked with one probe of its messages: an entity
// through job_messages' own entity column, a group through the message's
// group (at most maxSeriesJobScan of a job's messages).
func (s *Store) DeadLetterSeries(ctx context.Context, q dlq.SeriesQuery) (dlq.CountSeries, error) {
	out := dlq.CountSeries{Since: q.Since.UTC(), Until: q.Until.UTC()}
	if q.Buckets <= 0 || !q.Until.After(q.Since) || (q.Group == "" && q.Entity == "") {
		return out, errors.New("dead-letter series: want a group or an entity, a positive bucket count and until after since")
	}
	from, to := out.Since.UnixMilli(), out.Until.UnixMilli()
	width := max((to-from+int64(q.Buckets)-1)/int64(q.Buckets), 1)
	out.Width = time.Duration(width) * time.Millisecond
	out.Counts = make([]int64, q.Buckets)

	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return out, fmt.Errorf("dead-letter series: %w", err)
	}
	defer tx.Rollback()

	var ents []int64
	if q.Entity != "" {
		if ents, err = entityIDs(ctx, tx, q.Namespace, q.Entity); err != nil {
			return out, fmt.Errorf("dead-letter series: %w", err)
		}
		if len(ents) == 0 {
			return out, nil
		}
	} else if q.Namespace != "" {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM entities WHERE namespace = ?`, q.Namespace)
		if ents, err = collect(rows, err, scanInt64); err != nil {
			return out, fmt.Errorf("dead-letter series: %w", err)
		}
		if len(ents) == 0 {
			return out, nil
		}
	}
	var groupID int64
	if q.Group != "" {
		err := tx.QueryRowContext(ctx, `SELECT id FROM groups WHERE key = ?`, q.Group).Scan(&groupID)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("dead-letter series: %w", err)
		}
	}

	// One count per bucket: each a covering range of the index (a single
	// GROUP BY over the bucket arithmetic makes SQLite read the table rows).
	stmt, err := tx.PrepareContext(ctx, seriesQuery(s.eng, groupID, ents))
	if err != nil {
		return out, fmt.Errorf("dead-letter series: %w", err)
	}
	defer stmt.Close()
	for b := range out.Counts {
		lo := from + int64(b)*width
		hi := min(lo+width, to)
		args := []any{lo, hi}
		if groupID != 0 {
			args = []any{groupID, lo, hi}
		}
		if err := stmt.QueryRowContext(ctx, args...).Scan(&out.Counts[b]); err != nil {
			return out, fmt.Errorf("dead-letter series: %w", err)
		}
	}

	if out.Jobs, err = seriesJobs(ctx, tx, q, groupID, from, to); err != nil {
		return out, fmt.Errorf("dead-letter series: jobs: %w", err)
	}
	return out, nil
}

// seriesQuery counts one bucket: a group's messages through
// messages_by_group (entities, if any, checked in the index), an entity's
// through messages_by_entity. Its arguments: the group's id (for a group),
// then the bucket's start and end.
func seriesQuery(eng engine, groupID int64, ents []int64) string {
	var in strings.Builder
	for i, id := range ents {
		if i > 0 {
			in.WriteByte(',')
		}
		fmt.Fprint(&in, id)
	}
	const window = `coalesce(m.enqueued_at, -1) >= ? AND coalesce(m.enqueued_at, -1) < ? AND m.subqueue IN (1, 2)`
	if groupID != 0 {
		q := `SELECT count(*) FROM messages m ` + eng.indexedBy("messages_by_group") + ` WHERE m.group_id = ? AND ` + window
		if len(ents) > 0 {
			q += ` AND m.entity_id IN (` + in.String() + `)`
		}
		return q
	}
	return `SELECT count(*) FROM messages m ` + eng.indexedBy("messages_by_entity") + ` WHERE m.entity_id IN (` + in.String() + `) AND ` + window
}

// seriesJobs are the jobs created in [from, to) that acted on the series'
// messages, oldest first.
func seriesJobs(ctx context.Context, tx *sql.Tx, q dlq.SeriesQuery, groupID int64, from, to int64) ([]dlq.SeriesJob, error) {
	where := []string{`j.created_at >= ?`, `j.created_at < ?`}
	args := []any{from, to}
	if q.Namespace != "" {
		where, args = append(where, `j.namespace = ?`), append(args, q.Namespace)
	}
	if q.Entity != "" {
		where = append(where, `EXISTS (SELECT 1 FROM job_messages jm WHERE jm.job_id = j.id AND jm.entity = ?)`)
		args = append(args, q.Entity)
	}
	if groupID != 0 {
		where = append(where, `EXISTS (SELECT 1 FROM (SELECT message_id FROM job_messages WHERE job_id = j.id LIMIT ?) jm
			JOIN messages m ON m.id = jm.message_id WHERE m.group_id = ?)`)
		args = append(args, maxSeriesJobScan, groupID)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, action, status, coalesce(started_at, created_at) FROM jobs j`+whereClause(where)+
		` ORDER BY j.id DESC LIMIT ?`, append(args, maxSeriesJobs)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dlq.SeriesJob
	for rows.Next() {
		var j dlq.SeriesJob
		var at int64
		if err := rows.Scan(&j.ID, &j.Action, &j.Status, &at); err != nil {
			return nil, err
		}
		j.At = time.UnixMilli(at).UTC()
		out = append([]dlq.SeriesJob{j}, out...)
	}
	return out, rows.Err()
}

func scanInt64(r interface{ Scan(...any) error }) (int64, error) {
	var v int64
	err := r.Scan(&v)
	return v, err
}
