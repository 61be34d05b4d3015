package replica_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/store/replica"
)

const chainTable = `CREATE TABLE chain (seq bigint PRIMARY KEY, prev bytea NOT NULL, hash bytea NOT NULL, payload text NOT NULL)`

func link(prev []byte, payload string) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// appendLink appends payload to the chain the way the audit trail does:
// lock, read the head, insert the next link.
func appendLink(ctx context.Context, db *pgxpool.Pool, payload string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := replica.LockChain(ctx, tx, "audit"); err != nil {
			return err
		}
		var seq int64
		prev := []byte{}
		err := tx.QueryRow(ctx, `SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
		if err != nil && err != pgx.ErrNoRows {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO chain VALUES ($1, $2, $3, $4)`, seq+1, prev, link(prev, payload), payload)
		return err
	})
}

// Appenders on three replicas' pools append at once: one chain, no gap,
// no fork, no failed append.
func TestLockChainConcurrentAppendsMakeOneChain(t *testing.T) {
	const replicas, workers, each = 3, 4, 25
	dsn := database(t)
	run(t, pool(t, dsn), chainTable)
	var wg sync.WaitGroup
	errs := make(chan error, replicas*workers)
	for r := range replicas {
		db := pool(t, dsn)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					if err := appendLink(t.Context(), db, fmt.Sprintf("r%d w%d #%d", r, w, i)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append failed: %v", err)
	}

	rows, err := pool(t, dsn).Query(t.Context(), `SELECT seq, prev, hash, payload FROM chain ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Seq     int64
		Prev    []byte
		Hash    []byte
		Payload string
	}
	chain, err := pgx.CollectRows(rows, pgx.RowToStructByPos[entry])
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != replicas*workers*each {
		t.Fatalf("%d links, want %d", len(chain), replicas*workers*each)
	}
	prev := []byte{}
	payloads := map[string]bool{}
	for i, e := range chain {
		if e.Seq != int64(i+1) {
			t.Fatalf("link %d has seq %d: a gap", i+1, e.Seq)
		}
		if !bytes.Equal(e.Prev, prev) || !bytes.Equal(e.Hash, link(prev, e.Payload)) {
			t.Fatalf("link %d does not follow link %d: a fork", e.Seq, e.Seq-1)
		}
		payloads[e.Payload] = true
		prev = e.Hash
	}
	if len(payloads) != len(chain) {
		t.Fatalf("%d distinct payloads in %d links", len(payloads), len(chain))
	}
}

// The lock is what serialises: a second appender waits while the first
// holds it and goes on when the first commits; another chain does not wait.
func TestLockChainWaitsForTheHolder(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	a, b := pool(t, dsn), pool(t, dsn)
	tx1, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(context.Background())
	if err := replica.LockChain(ctx, tx1, "audit"); err != nil {
		t.Fatal(err)
	}

	other, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.LockChain(ctx, other, "another chain"); err != nil {
		t.Fatal(err)
	}
	other.Rollback(ctx)

	locked := make(chan error, 1)
	go func() {
		locked <- pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error { return replica.LockChain(ctx, tx, "audit") })
	}()
	if !blocked(locked) {
		t.Fatal("a second appender took the chain's lock while the first held it")
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("second appender after the first committed: %v", err)
	}
}
