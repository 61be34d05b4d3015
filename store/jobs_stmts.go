package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// jobStatements are the statements of a replay batch's writes
// (UpdateItems), prepared once on the writer: parsing them on every call
// was an eighth of its time.
type jobStatements struct {
	mu    sync.Mutex
	ready bool
	// states reads the states of a job's items (itemStates); count
	// counts the unfinished ones by state (countGroup).
	states, count *sql.Stmt
	// set[finished][withCopy] moves the items of one outcome.
	set [2][2]*sql.Stmt
	// counters adds to a job's counters; job reads a job back.
	counters, job *sql.Stmt
}

// Whatever the outcome: item_state, error, flagged (ORed), updated_at.
const itemSet = `item_state = ?, error = ?, flagged = CASE WHEN flagged = 1 OR ? = 1 THEN 1 ELSE 0 END, updated_at = ?`

// unfinished is the condition on the items an UPDATE may move: a finished
// item never moves again.
const unfinished = `item_state IN ('pending', 'locked', 'sent')`

func itemUpdate(eng engine, finished, withCopy bool) string {
	set := itemSet
	if finished {
		set += `, active = 0` // a finished item leaves the active set
	}
	if withCopy {
		// [[id, copy id], …]. The unary + keeps SQLite from scanning the
		// job's items for each id: it looks each one up by (message_id,
		// job_id) instead.
		if eng.postgres {
			return `UPDATE job_messages SET copy_message_id = u.value ->> 1, ` + set + `
			FROM json_array_elements(CAST(? AS json)) AS u (value) WHERE job_messages.job_id = ?
			AND job_messages.message_id = CAST(u.value ->> 0 AS bigint) AND ` + unfinished
		}
		return `UPDATE job_messages SET copy_message_id = u.value ->> 1, ` + set + `
			FROM json_each(?) AS u WHERE +job_messages.job_id = ? AND job_messages.message_id = u.value ->> 0 AND ` + unfinished
	}
	// [id, …]
	return `UPDATE job_messages SET ` + set + ` WHERE message_id IN (` + eng.jsonInts() + `) AND job_id = ? AND ` + unfinished
}

// prepareJobStatements prepares the statements once. It must not run
// inside a transaction of the writer (whose one connection that holds).
func (s *Store) prepareJobStatements(ctx context.Context) (*jobStatements, error) {
	js := &s.jobStmts
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.ready {
		return js, nil
	}
	var errs []error
	prep := func(q string) *sql.Stmt {
		st, err := s.writer.PrepareContext(ctx, q)
		errs = append(errs, err)
		return st
	}
	js.states = prep(`SELECT message_id, item_state, flagged FROM job_messages
		WHERE job_id = ? AND message_id IN (` + s.eng.jsonInts() + `)`)
	js.count = prep(`SELECT item_state, count(*), coalesce(sum(CASE WHEN flagged = 0 THEN 1 ELSE 0 END), 0) FROM job_messages
		WHERE job_id = ? AND message_id IN (` + s.eng.jsonInts() + `) AND ` + unfinished + ` GROUP BY item_state`)
	for f := range 2 {
		for c := range 2 {
			js.set[f][c] = prep(itemUpdate(s.eng, f == 1, c == 1))
		}
	}
	js.counters = prep(`UPDATE jobs SET pending = pending + ?, sent = sent + ?, completed = completed + ?,
		failed = failed + ?, skipped = skipped + ?, cancelled = cancelled + ?, flagged = flagged + ? WHERE id = ?`)
	js.job = prep(`SELECT ` + s.eng.jobColumns() + ` FROM jobs WHERE id = ?`)
	if err := errors.Join(errs...); err != nil {
		js.close()
		return nil, fmt.Errorf("prepare job statements: %w", err)
	}
	js.ready = true
	return js, nil
}

// close closes whatever was prepared (js.mu held).
func (js *jobStatements) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{js.states, js.count, js.set[0][0], js.set[0][1], js.set[1][0], js.set[1][1], js.counters, js.job} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	js.ready, js.states, js.count, js.set, js.counters, js.job = false, nil, nil, [2][2]*sql.Stmt{}, nil, nil
	return errors.Join(errs...)
}
