package cluster

import (
	"context"
	"time"

	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store/replica"
)

// ClaimableJobs is the condition on the jobs table's status column that
// selects the jobs a replica's engine must run: those replay.Store's
// UnfinishedJobs returns (queued, running, retrying, cancelling). A paused
// job is claimed by nobody; resumed (queued again) on any replica, it is
// claimable by all.
const ClaimableJobs = "status IN ('queued', 'running', 'retrying', 'cancelling')"

// DefaultClaimStale is how long a job's heartbeat may be silent before
// another replica adopts it: with the engine's heartbeat every 5 s
// (replay.DefaultHeartbeat) and its look for work every 2 s, a job whose
// replica died is running again elsewhere within 30 s.
const DefaultClaimStale = 20 * time.Second

// JobClaims is replay.Claims over the jobs table of a PostgreSQL store,
// with store/replica.Claims: FOR UPDATE SKIP LOCKED, a heartbeat, and a
// claim term that fences the run's writes (Fencer).
type JobClaims struct {
	DB replica.DB // the replica's pool
	ID string     // this replica's id
	// Claims is the table and its claimable condition; NewJobClaims
	// fills it for the store's jobs table.
	Claims replica.Claims
}

// NewJobClaims is JobClaims on the table "jobs" (whose columns
// claimed_by, claim_term and heartbeat_at the PostgreSQL store's
// migrations create), its claimable jobs ClaimableJobs, adopted after
// stale (DefaultClaimStale when 0).
func NewJobClaims(db replica.DB, id string, stale time.Duration) *JobClaims {
	if stale <= 0 {
		stale = DefaultClaimStale
	}
	return &JobClaims{DB: db, ID: id, Claims: replica.Claims{Table: "jobs", Claimable: ClaimableJobs, Stale: stale}}
}

var _ replay.Claims = (*JobClaims)(nil)

// Claim implements replay.Claims.
func (c *JobClaims) Claim(ctx context.Context) (replay.Claim, bool, error) {
	cl, ok, err := c.Claims.Claim(ctx, c.DB, c.ID)
	if err != nil || !ok {
		return replay.Claim{}, false, err
	}
	return replay.Claim{JobID: cl.ID, Term: cl.Term, AdoptedFrom: cl.AdoptedFrom}, true, nil
}

// Heartbeat implements replay.Claims.
func (c *JobClaims) Heartbeat(ctx context.Context) ([]int64, error) {
	return c.Claims.Heartbeat(ctx, c.DB, c.ID)
}

// Release implements replay.Claims.
func (c *JobClaims) Release(ctx context.Context, cl replay.Claim) error {
	return c.Claims.Release(ctx, c.DB, c.ID, replica.Claim{ID: cl.JobID, Term: cl.Term})
}

// Fencer is what the store's write transactions of the job's run call
// first (replay.ClaimStore: the PostgreSQL store's Claimed(c) fences with
// it): the write is refused once another replica adopted the job.
func (c *JobClaims) Fencer(cl replay.Claim) replica.Fencer {
	return replica.ClaimFence{Claims: &c.Claims, Replica: c.ID, Claim: replica.Claim{ID: cl.JobID, Term: cl.Term}}
}
