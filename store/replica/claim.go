package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrClaimLost reports that a job is no longer claimed by this replica under
// the claim's term: another replica adopted it after this one's heartbeats
// stopped for longer than Claims.Stale. The transaction must be rolled back
// and the job left alone.
var ErrClaimLost = errors.New("job claim lost")

// DefaultStale is how long a claimed job's heartbeat may be silent before
// another replica may adopt the job.
const DefaultStale = 30 * time.Second

// Claims hands out the rows of a jobs table to replicas, one replica per
// row. The table has at least these columns (the PostgreSQL store's jobs
// table will):
//
//	id           bigint PRIMARY KEY
//	claimed_by   text            -- the replica working the job; NULL when none
//	claim_term   bigint NOT NULL -- increments on each claim: the claim's fencing token
//	heartbeat_at timestamptz     -- the claimer's last heartbeat, database clock
type Claims struct {
	// Table is the table's name.
	Table string
	// Claimable is an SQL condition on the table's columns selecting the
	// rows that want a worker, such as "state IN ('queued', 'running')". It
	// is code, never input. Empty means every row.
	Claimable string
	// Stale is DefaultStale when zero.
	Stale time.Duration
}

// Claim is one job held by one replica.
type Claim struct {
	ID   int64
	Term int64
	// AdoptedFrom is the replica that held the job before and stopped
	// heart-beating, or "" for a job nobody held.
	AdoptedFrom string
}

func (c *Claims) stale() time.Duration {
	if c.Stale > 0 {
		return c.Stale
	}
	return DefaultStale
}

// Claim gives replica the lowest-numbered claimable job that nobody holds or
// whose holder's heartbeat is older than Stale; ok is false when there is
// none. Rows being claimed by others at the same moment are skipped (FOR
// UPDATE SKIP LOCKED), so concurrent claimers neither wait for nor get the
// same job.
func (c *Claims) Claim(ctx context.Context, db DB, replica string) (cl Claim, ok bool, err error) {
	t := pgx.Identifier{c.Table}.Sanitize()
	claimable := c.Claimable
	if claimable == "" {
		claimable = "true"
	}
	err = db.QueryRow(ctx, `
		UPDATE `+t+` AS j SET claimed_by = $1, claim_term = j.claim_term + 1, heartbeat_at = now()
		FROM (
			SELECT id, claimed_by FROM `+t+`
			WHERE (`+claimable+`)
			  AND (claimed_by IS NULL OR heartbeat_at IS NULL OR heartbeat_at < now() - $2 * interval '1 microsecond')
			ORDER BY id
			LIMIT 1
			FOR UPDATE SKIP LOCKED
		) AS free
		WHERE j.id = free.id
		RETURNING j.id, j.claim_term, coalesce(free.claimed_by, '')`,
		replica, c.stale().Microseconds()).Scan(&cl.ID, &cl.Term, &cl.AdoptedFrom)
	if errors.Is(err, pgx.ErrNoRows) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, fmt.Errorf("claim a job from %s: %w", c.Table, err)
	}
	return cl, true, nil
}

// Heartbeat marks every job replica holds as alive and returns their ids: a
// job missing from them was adopted by another replica, and its worker here
// must stop.
func (c *Claims) Heartbeat(ctx context.Context, db DB, replica string) ([]int64, error) {
	rows, err := db.Query(ctx, `
		UPDATE `+pgx.Identifier{c.Table}.Sanitize()+` SET heartbeat_at = now()
		WHERE claimed_by = $1 RETURNING id`, replica)
	if err != nil {
		return nil, fmt.Errorf("heartbeat the jobs of %s: %w", replica, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("heartbeat the jobs of %s: %w", replica, err)
	}
	return ids, nil
}

// Release lets the job go (when it is finished, or the replica shuts down),
// so that another replica may claim it at once if it is still claimable.
func (c *Claims) Release(ctx context.Context, db DB, replica string, cl Claim) error {
	_, err := db.Exec(ctx, `
		UPDATE `+pgx.Identifier{c.Table}.Sanitize()+` SET claimed_by = NULL, heartbeat_at = NULL
		WHERE id = $1 AND claimed_by = $2 AND claim_term = $3`, cl.ID, replica, cl.Term)
	if err != nil {
		return fmt.Errorf("release job %d: %w", cl.ID, err)
	}
	return nil
}

// Fence makes tx a write of replica's claim on the job: it locks the job's
// row FOR SHARE and checks that the claim is still replica's with cl's
// term, else returns ErrClaimLost. The share lock keeps Claim (which
// updates the row) from adopting the job until tx ends, as Fence does for
// leases.
func (c *Claims) Fence(ctx context.Context, tx pgx.Tx, replica string, cl Claim) error {
	var holder *string
	var term int64
	err := tx.QueryRow(ctx, `
		SELECT claimed_by, claim_term FROM `+pgx.Identifier{c.Table}.Sanitize()+`
		WHERE id = $1 FOR SHARE`, cl.ID).Scan(&holder, &term)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence job %d: no such job: %w", cl.ID, ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("fence job %d: %w", cl.ID, err)
	}
	if holder == nil || *holder != replica || term != cl.Term {
		return fmt.Errorf("fence job %d: claim term %d of %s is stale (term %d now): %w", cl.ID, cl.Term, replica, term, ErrClaimLost)
	}
	return nil
}
