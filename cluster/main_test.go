package cluster_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/store/pgtest"
	"github.com/dlqdash/dlqdash/store/replica"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// database is a fresh database with the leases table and the tables the
// tests' stand-in for the PostgreSQL store writes.
func database(t *testing.T) string {
	t.Helper()
	dsn := pg.Database(t)
	p := pool(t, dsn)
	if err := replica.CreateSchema(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(t.Context(), pgCatalogSchema); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// pool is one replica's connection pool.
func pool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	replica.ConfigureWriter(cfg.ConnConfig)
	p, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("pool on %s: %v", dsn, err)
	}
	t.Cleanup(p.Close)
	return p
}
