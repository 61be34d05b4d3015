package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// Lineage bounds: how many replays back a copy is followed to its first
// dead letter, and how many events a lineage holds.
const (
	maxLineageDepth  = 32
	maxLineageEvents = 200
)

// Lineage is the timeline of the message id's lineage across replays, from
// its first dead letter: each dead letter, what each job did to it, the
// copies the jobs sent that were seen dead-lettered again, what jobs did to
// those, and so on, in that order (a copy's events follow the job that sent
// it). A copy is known by the dlqdash.job_id it carries and the job's record
// of the copy's MessageId; the original by the job's record of the message
// it copied.
//
// Cost: per step back, one read of the copy's job's messages (the job's
// primary key range); per step forward, the message's jobs
// (job_messages_by_message) and the copies (messages_copies).
func (s *Store) Lineage(ctx context.Context, id int64) ([]dlq.LineageEvent, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("lineage of %d: %w", id, err)
	}
	defer tx.Rollback()
	rec, err := lineageRecord(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("lineage of %d: %w", id, err)
	}
	// Back to the first dead letter.
	root := rec
	for range maxLineageDepth {
		orig, ok, err := originalOf(ctx, tx, root)
		if err != nil {
			return nil, fmt.Errorf("lineage of %d: %w", id, err)
		}
		if !ok {
			break
		}
		root = orig
	}
	var out []dlq.LineageEvent
	seen := map[int64]bool{}
	var walk func(r dlq.Record, depth int) error
	walk = func(r dlq.Record, depth int) error {
		if seen[r.ID] || len(out) >= maxLineageEvents || depth > maxLineageDepth {
			return nil
		}
		seen[r.ID] = true
		out = append(out, dlq.LineageEvent{Kind: dlq.LineageDeadLettered, At: r.FirstSeenAt, Message: r, Depth: depth})
		rows, err := tx.QueryContext(ctx, `SELECT jm.job_id, jm.item_state, jm.copy_message_id, jm.updated_at, j.action
			FROM job_messages jm JOIN jobs j ON j.id = jm.job_id WHERE jm.message_id = ? ORDER BY jm.job_id`, r.ID)
		if err != nil {
			return err
		}
		type step struct {
			ev     dlq.LineageEvent
			copyID string
		}
		var steps []step
		for rows.Next() {
			var (
				ev      dlq.LineageEvent
				updated int64
				action  string
			)
			if err := rows.Scan(&ev.JobID, &ev.State, &ev.CopyMessageID, &updated, &action); err != nil {
				rows.Close()
				return err
			}
			ev.Kind, ev.At, ev.Message, ev.Depth = dlq.LineageReplayed, time.UnixMilli(updated).UTC(), r, depth
			if action == string(replay.ActionDiscard) {
				ev.Kind = dlq.LineageDiscarded
			}
			steps = append(steps, step{ev, ev.CopyMessageID})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, st := range steps {
			if len(out) >= maxLineageEvents {
				return nil
			}
			out = append(out, st.ev)
			if st.copyID == "" {
				continue
			}
			copies, err := copiesByJob(ctx, s.eng, tx, st.copyID, st.ev.JobID)
			if err != nil {
				return err
			}
			for _, c := range copies {
				if err := walk(c, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 0); err != nil {
		return nil, fmt.Errorf("lineage of %d: %w", id, err)
	}
	return out, nil
}

func lineageRecord(ctx context.Context, tx *sql.Tx, id int64) (dlq.Record, error) {
	r, err := scanRecord(tx.QueryRowContext(ctx, "SELECT "+recordColumns+" FROM messages m "+recordJoins+" WHERE m.id = ?", id), false)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	return r, err
}

// originalOf finds the message a copy was replayed from: the copy's job
// (its dlqdash.job_id) recorded the copy's MessageId against it.
func originalOf(ctx context.Context, tx *sql.Tx, c dlq.Record) (dlq.Record, bool, error) {
	if c.ReplayCount == 0 || c.MessageID == "" {
		return dlq.Record{}, false, nil
	}
	var props map[string]json.RawMessage
	if json.Unmarshal(c.ApplicationProperties, &props) != nil {
		return dlq.Record{}, false, nil
	}
	var jobText string
	if json.Unmarshal(props[replay.PropJobID], &jobText) != nil {
		return dlq.Record{}, false, nil
	}
	var jobID int64
	if _, err := fmt.Sscan(jobText, &jobID); err != nil {
		return dlq.Record{}, false, nil
	}
	var origID int64
	err := tx.QueryRowContext(ctx, `SELECT message_id FROM job_messages WHERE job_id = ? AND copy_message_id = ? LIMIT 1`,
		jobID, c.MessageID).Scan(&origID)
	if errors.Is(err, sql.ErrNoRows) {
		return dlq.Record{}, false, nil // the job or its record is gone
	}
	if err != nil {
		return dlq.Record{}, false, err
	}
	r, err := lineageRecord(ctx, tx, origID)
	if errors.Is(err, ErrNotFound) {
		return r, false, nil // retention removed the original
	}
	return r, err == nil, err
}

// copiesByJob are the cataloged copies with MessageId copyID sent by job
// jobID (a copy sent to a topic may be dead-lettered by several of its
// subscriptions), oldest first.
func copiesByJob(ctx context.Context, eng engine, tx *sql.Tx, copyID string, jobID int64) ([]dlq.Record, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+recordColumns+` FROM messages m `+eng.indexedBy("messages_copies")+` `+recordJoins+`
		WHERE m.replay_count > 0 AND m.message_id = ?
		AND `+eng.jobIDOfCopy("m.properties")+` = ? ORDER BY m.id`, copyID, jobID)
	if err != nil {
		return nil, err
	}
	return collect(rows, nil, func(r interface{ Scan(...any) error }) (dlq.Record, error) { return scanRecord(r, false) })
}
