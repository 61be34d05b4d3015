package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store/replica"
)

const auditSchema = `
CREATE TABLE audit_log (
	seq         bigint PRIMARY KEY,
	at          bigint NOT NULL,
	actor       text NOT NULL,
	action      text NOT NULL,
	params      text NOT NULL,
	message_ids text[] NOT NULL,
	outcome     text NOT NULL,
	prev_hash   text NOT NULL,
	hash        text NOT NULL
);
`

// pgAudit stands in for the PostgreSQL store's audit trail (audit.Store):
// AppendAudit calls its fencer first in the transaction, as the store's
// will with replica.AuditChain, then reads the head and inserts the next
// entry.
type pgAudit struct {
	pool *pgxpool.Pool
	lock replica.Fencer // nil: no lock (the control)
}

func (a *pgAudit) AppendAudit(ctx context.Context, build func(int64, string) (audit.Entry, error)) (audit.Entry, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return audit.Entry{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if a.lock != nil {
		if err := a.lock.Fence(ctx, tx); err != nil {
			return audit.Entry{}, err
		}
	}
	seq, hash := int64(0), audit.GenesisHash
	err = tx.QueryRow(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return audit.Entry{}, err
	}
	e, err := build(seq, hash)
	if err != nil {
		return audit.Entry{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit_log VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		e.Seq, e.At.UnixMilli(), e.Actor, e.Action, string(e.Params), e.MessageIDs, e.Outcome, e.PrevHash, e.Hash); err != nil {
		return audit.Entry{}, err
	}
	return e, tx.Commit(ctx)
}

func (a *pgAudit) ScanAudit(ctx context.Context, _ audit.Filter, fn func(audit.Entry) error) error {
	rows, err := a.pool.Query(ctx, `SELECT seq, at, actor, action, params, message_ids, outcome, prev_hash, hash FROM audit_log ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e audit.Entry
		var at int64
		var params string
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Action, &params, &e.MessageIDs, &e.Outcome, &e.PrevHash, &e.Hash); err != nil {
			return err
		}
		e.At, e.Params = time.UnixMilli(at).UTC(), []byte(params)
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// appendConcurrently appends per entries from each of replicas audit logs
// (one pool each) at once, and returns the appends that failed.
func appendConcurrently(t *testing.T, dsn string, replicas, per int, lock replica.Fencer) (int, *audit.Log) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	var log *audit.Log
	for r := range replicas {
		l := audit.New(&pgAudit{pool: pool(t, dsn), lock: lock})
		log = l
		wg.Go(func() {
			for i := range per {
				_, err := l.Append(t.Context(), audit.Record{Actor: fmt.Sprintf("replica-%d", r), Action: audit.ActionJobPaused,
					Params: map[string]any{"job_id": fmt.Sprint(i)}})
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failed, log
}

// Appends from three replicas at once, each serialised by the chain lock
// (replica.AuditChain, an advisory lock taken first in the transaction),
// make one chain: every append succeeds, the sequence has no gap and no
// fork, and audit verify passes. Without the lock, the same appends read
// the same head and collide.
func TestAuditChainAcrossReplicas(t *testing.T) {
	const replicas, per = 3, 40
	dsn := database(t)
	if _, err := pool(t, dsn).Exec(t.Context(), auditSchema); err != nil {
		t.Fatal(err)
	}
	failed, log := appendConcurrently(t, dsn, replicas, per, replica.AuditChain)
	if failed != 0 {
		t.Errorf("%d appends failed with the chain lock", failed)
	}
	n, err := log.Verify(t.Context(), nil)
	if err != nil || n != replicas*per {
		t.Fatalf("audit verify: %d entries, %v; want %d and a whole chain", n, err, replicas*per)
	}

	// The control: the same without the lock.
	collided := 0
	for round := 0; round < 10 && collided == 0; round++ {
		d := database(t)
		if _, err := pool(t, d).Exec(t.Context(), auditSchema); err != nil {
			t.Fatal(err)
		}
		collided, _ = appendConcurrently(t, d, replicas, per, nil)
	}
	if collided == 0 {
		t.Error("without the chain lock no append ever collided: the test does not show what the lock does")
	}
	t.Logf("%d appends from %d replicas with the lock: one chain; without it %d of them collided", replicas*per, replicas, collided)
}
