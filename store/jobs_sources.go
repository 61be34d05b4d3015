package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store/replica"
)

// A job's hold on the source it reads (replay.Store's HoldSource; the
// job_sources table, 0017): jobs on one entity's subqueue run one at a
// time, in one process and across the replicas of a PostgreSQL store.

// sourceHoldStale is how long the claim heartbeat of another replica's job
// may be silent before its hold is taken for dead (the replica died): the
// replicas' claims go stale after as long (cluster.DefaultClaimStale), and
// the job is then adopted, and holds its source again, elsewhere. A job
// waiting for the hold meanwhile only waits longer: a scan waits one lock
// duration from its start for locks another receiver may hold anyway.
const sourceHoldStaleSeconds = 20

// processToken identifies this Store value's holds: a hold this process
// took is alive while its job is unfinished; one an earlier process took
// (it crashed, and SQLite is one process's) is dead.
func (s *Store) processToken() string {
	s.tokenOnce.Do(func() { s.token = rand.Text() })
	return s.token
}

// HoldSource implements replay.Store.
func (s *Store) HoldSource(ctx context.Context, h replay.SourceHold) (int64, error) {
	const op = "hold a job's source"
	code, err := subQueueCode(h.SubQueue)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, s.wrap(op, err)
	}
	defer tx.Rollback()
	var holder int64
	var holderToken string
	err = tx.QueryRowContext(ctx, `SELECT job_id, holder FROM job_sources WHERE namespace = ? AND entity = ? AND subqueue = ?`,
		h.Namespace, h.Entity, code).Scan(&holder, &holderToken)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, s.wrap(op, err)
	case holder != h.JobID:
		alive, err := s.holdAlive(ctx, tx, holder, holderToken)
		if err != nil {
			return 0, s.wrap(op, err)
		}
		if alive {
			return holder, nil
		}
	}
	// The term guard is in the statement itself, whatever the read above
	// saw: a hold of the same job under a later claim term is never
	// replaced by its earlier run's (a run whose claim another replica
	// adopted, its write arriving late), only by a later term's or another
	// job's.
	res, err := tx.ExecContext(ctx, `INSERT INTO job_sources (namespace, entity, subqueue, job_id, term, holder, held_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, entity, subqueue) DO UPDATE SET job_id = excluded.job_id,
		term = excluded.term, holder = excluded.holder, held_at = excluded.held_at
		WHERE job_sources.job_id <> excluded.job_id OR job_sources.term <= excluded.term`,
		h.Namespace, h.Entity, code, h.JobID, h.Term, s.processToken(), s.nowMillis())
	if err != nil {
		return 0, s.wrap(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, s.wrap(op, err)
	} else if n == 0 {
		var term int64
		if err := tx.QueryRowContext(ctx, `SELECT term FROM job_sources WHERE namespace = ? AND entity = ? AND subqueue = ?`,
			h.Namespace, h.Entity, code).Scan(&term); err != nil {
			return 0, s.wrap(op, err)
		}
		return 0, fmt.Errorf("%s: job %d's run under claim term %d is stale: the job's run under term %d holds %s: %w",
			op, h.JobID, h.Term, term, h.SubQueue.Path(h.Entity), replica.ErrClaimLost)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap(op, err)
	}
	return h.JobID, nil
}

// holdAlive says whether the hold of job id (taken by the process of
// token) still stands: its job is unfinished and it is this process's
// hold, or (PostgreSQL) the job is claimed by a replica whose heartbeat is
// fresh.
func (s *Store) holdAlive(ctx context.Context, tx *sql.Tx, id int64, token string) (bool, error) {
	claimed := "0"
	if s.eng.postgres {
		claimed = fmt.Sprintf("CASE WHEN claimed_by IS NOT NULL AND heartbeat_at > now() - interval '%d seconds' THEN 1 ELSE 0 END",
			sourceHoldStaleSeconds)
	}
	var status string
	var fresh int
	err := tx.QueryRowContext(ctx, `SELECT status, `+claimed+` FROM jobs WHERE id = ?`, id).Scan(&status, &fresh)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch replay.Status(status) {
	case replay.StatusQueued, replay.StatusRunning, replay.StatusRetrying, replay.StatusCancelling:
	default:
		return false, nil
	}
	return token == s.processToken() || fresh == 1, nil
}

// ReleaseSource implements replay.Store.
func (s *Store) ReleaseSource(ctx context.Context, h replay.SourceHold) error {
	const op = "release a job's source"
	code, err := subQueueCode(h.SubQueue)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return s.wrap(op, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM job_sources WHERE namespace = ? AND entity = ? AND subqueue = ? AND job_id = ? AND term = ?`,
		h.Namespace, h.Entity, code, h.JobID, h.Term); err != nil {
		return s.wrap(op, err)
	}
	return s.wrap(op, tx.Commit())
}
