package replica

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// LockChain serialises the appends to one chain (the audit trail's hash
// chain) across every replica: it takes a transaction-level advisory lock
// keyed by the chain's name, which the database releases when tx commits
// or rolls back. An append calls it first, then reads the chain's head,
// then inserts the next link, so no two appends read the same head (a fork)
// and none is lost (a gap). Distinct names whose keys collide only share a
// lock.
func LockChain(ctx context.Context, tx pgx.Tx, chain string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "dlqdash.chain:"+chain); err != nil {
		return fmt.Errorf("lock chain %s: %w", chain, err)
	}
	return nil
}
