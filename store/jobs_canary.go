package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/replay"
)

// Honest outcomes and the canary (migration 0009): a job's count of copies
// dead-lettered again is kept by a trigger on the catalog's inserts, so it
// is as live as the ingester, costs the ingest of ordinary dead letters
// nothing (the trigger's WHEN reads replay_count first) and counts each
// copy once. The reasons are read with the job, the most frequent first.

// maxRedeadletteredReasons is how many reasons a job carries.
const maxRedeadletteredReasonsSQL = "10"

const jobCanaryColumns = `redeadlettered, ` + jobReasonsSQLite + `,
	canary_count, canary_watch_ms, pause_on_redeadletter, ramp_ms, canary_verdict, guard_sent_base, guard_redeadlettered_base`

// jobReasonsSQLite is the column of a job's reasons; jobReasonsPG the same
// on PostgreSQL (engine.jobColumns).
const (
	jobReasonsSQLite = `(SELECT json_group_array(json_array(reason, count)) FROM (SELECT reason, count FROM job_redeadlettered r
		WHERE r.job_id = jobs.id ORDER BY count DESC, reason LIMIT ` + maxRedeadletteredReasonsSQL + `))`
	jobReasonsPG = `(SELECT json_agg(json_build_array(reason, count) ORDER BY count DESC, reason) FROM (SELECT reason, count
		FROM job_redeadlettered r WHERE r.job_id = jobs.id ORDER BY count DESC, reason LIMIT ` + maxRedeadletteredReasonsSQL + `) AS top)`
)

// canaryRow is what scanJob reads of jobCanaryColumns.
type canaryRow struct {
	redeadlettered     int
	reasons            *string
	count              int
	watch, ramp        int64
	pause              *float64
	verdict            string
	sentBase, backBase int
}

func (c canaryRow) into(j *replay.Job) error {
	j.Counts.Redeadlettered = c.redeadlettered
	if c.reasons != nil {
		var rows [][2]json.RawMessage
		if err := json.Unmarshal([]byte(*c.reasons), &rows); err != nil {
			return fmt.Errorf("job %d's reasons: %w", j.ID, err)
		}
		for _, r := range rows {
			var rc replay.ReasonCount
			if err := errors.Join(json.Unmarshal(r[0], &rc.Reason), json.Unmarshal(r[1], &rc.Count)); err != nil {
				return fmt.Errorf("job %d's reasons: %w", j.ID, err)
			}
			j.RedeadletteredReasons = append(j.RedeadletteredReasons, rc)
		}
	}
	j.Canary = replay.Canary{Count: c.count, Watch: time.Duration(c.watch) * time.Millisecond, PauseOnRedeadletter: c.pause,
		Ramp: time.Duration(c.ramp) * time.Millisecond, Verdict: c.verdict, SentBase: c.sentBase, RedeadletteredBase: c.backBase}
	return nil
}

// SetCanary implements replay.Store.
func (s *Store) SetCanary(ctx context.Context, jobID int64, verdict string, sentBase, redeadletteredBase int) (replay.Job, error) {
	const op = "record a job's canary"
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET canary_verdict = ?, guard_sent_base = ?, guard_redeadlettered_base = ?
		WHERE id = ?`, verdict, sentBase, redeadletteredBase, jobID)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return replay.Job{}, fmt.Errorf("job %d: %w", jobID, replay.ErrNotFound)
	}
	return s.commitJob(ctx, tx, op, jobID)
}

// JobsOfCopies implements web.JobOutcomes: the jobs of which the catalog
// messages ids hold dead-lettered copies.
func (s *Store) JobsOfCopies(ctx context.Context, ids []int64) ([]replay.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	js, err := readJobs(s.reader.QueryContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id IN (
		SELECT `+s.eng.jobIDOfCopy("properties")+` FROM messages
		WHERE id IN (`+s.eng.jsonInts()+`) AND replay_count > 0 AND subqueue IN (1, 2)) ORDER BY id`, idList(ids)))
	if err != nil {
		return nil, fmt.Errorf("jobs of copies: %w", err)
	}
	return js, nil
}
