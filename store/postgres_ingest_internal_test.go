package store

import (
	"context"
	"database/sql"
	"slices"
	"testing"
)

// The ingest's transactions commit without waiting for their WAL's flush
// (asyncCommit), whatever the session's setting; other writes keep it.
func TestIngestCommitsAsynchronously(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	s, err := Open(ctx, FreshTarget(t, "postgres")+"&synchronous_commit=on", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setting := func(tx interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		var v string
		if err := tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tx, ic, err := s.beginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := setting(tx); got != "off" {
		t.Errorf("synchronous_commit in an ingest transaction: %s, want off", got)
	}
	tx.Rollback()
	ic.release()
	wtx, err := s.beginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer wtx.Rollback()
	if got := setting(wtx); got != "on" {
		t.Errorf("synchronous_commit in another write: %s, want on (the session's)", got)
	}
}
