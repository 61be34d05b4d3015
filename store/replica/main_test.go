package replica_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/store/pgtest"
	"github.com/dlqdash/dlqdash/store/replica"
)

var pg pgtest.Shared

func TestMain(m *testing.M) {
	if dsn := os.Getenv(holderEnv); dsn != "" {
		os.Exit(runDoomedHolder(dsn)) // a child of TestLeaseTakeoverAfterHolderKilled
	}
	os.Exit(pg.Run(m))
}

// database is a fresh database with the package's schema.
func database(t *testing.T) string {
	t.Helper()
	dsn := pg.Database(t)
	p := pool(t, dsn)
	if err := replica.CreateSchema(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// pool is one replica's connection pool.
func pool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatalf("pool on %s: %v", dsn, err)
	}
	t.Cleanup(p.Close)
	return p
}

// waitFor polls cond until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blocked reports whether done is still open after a while: how a test
// sees that a statement waits for a lock.
func blocked[T any](done <-chan T) bool {
	select {
	case <-done:
		return false
	case <-time.After(400 * time.Millisecond):
		return true
	}
}

func run(t *testing.T, db replica.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// pgtestCluster is a cluster of the test's own, for tests that stop it.
func pgtestCluster(t *testing.T) *pgtest.Cluster { return pgtest.Start(t) }
