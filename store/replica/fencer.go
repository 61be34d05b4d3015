package replica

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Fencer is what a store's write transaction runs first when the write must
// be refused once its writer no longer holds what entitles it to write: a
// lease's term (LeaseFence), a job's claim (ClaimFence), or the turn to
// append to a chain (ChainLock). The store calls Fence inside the
// transaction, before its first write, and rolls back on its error
// (ErrStaleTerm, ErrClaimLost, or the database's).
//
// It is the hook between the replicas' wiring, which knows the term, and
// the PostgreSQL store, which owns the transactions: the wiring hands the
// store a Fencer, the store calls it. A store that only one process writes
// (SQLite) needs none.
type Fencer interface {
	Fence(ctx context.Context, tx pgx.Tx) error
}

// LeaseFence fences writes with a lease's term: Fence.
type LeaseFence struct {
	Name string // the lease: "ingest/" + namespace
	Term int64
}

// Fence implements Fencer with Fence.
func (f LeaseFence) Fence(ctx context.Context, tx pgx.Tx) error {
	return Fence(ctx, tx, f.Name, f.Term)
}

// ClaimFence fences a job's writes with its claim: Claims.Fence.
type ClaimFence struct {
	Claims  *Claims
	Replica string
	Claim   Claim
}

// Fence implements Fencer with Claims.Fence.
func (f ClaimFence) Fence(ctx context.Context, tx pgx.Tx) error {
	return f.Claims.Fence(ctx, tx, f.Replica, f.Claim)
}

// ChainLock serialises the appends to a chain: LockChain.
type ChainLock string

// AuditChain is the name of the audit trail's chain.
const AuditChain ChainLock = "audit"

// Fence implements Fencer with LockChain.
func (c ChainLock) Fence(ctx context.Context, tx pgx.Tx) error { return LockChain(ctx, tx, string(c)) }

// Fences runs several fencers in order (a job's write that also appends to
// the audit chain).
type Fences []Fencer

// Fence implements Fencer: the first error stops it.
func (fs Fences) Fence(ctx context.Context, tx pgx.Tx) error {
	for _, f := range fs {
		if err := f.Fence(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}
