package store

import (
	"slices"
	"testing"
)

// TestInlineIndexLocksAllOrNothing: on PostgreSQL an ingest transaction
// that wants to index its own page takes both index locks or neither.
// With a batch's property rows holding the second, the first must not stay
// with the page until it commits (index batches would wait for it).
func TestInlineIndexLocksAllOrNothing(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL only")
	}
	s := OpenFresh(t, "postgres")
	ctx := t.Context()
	// tryBoth reports whether another transaction gets each lock now.
	tryBoth := func() (bool, bool) {
		t.Helper()
		tx, err := s.writer.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var a, b bool
		if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(?), pg_try_advisory_xact_lock(?)`,
			indexLockKey, indexPropsLockKey).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		return a, b
	}

	// A batch's property rows hold the second lock.
	holder, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, indexPropsLockKey); err != nil {
		t.Fatal(err)
	}
	page, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer page.Rollback()
	if got, err := s.lockIndexInline(ctx, page); err != nil || got {
		t.Fatalf("lockIndexInline with the second lock held elsewhere = %v, %v; want false", got, err)
	}
	if a, _ := tryBoth(); !a {
		t.Error("the page kept the first index lock after it gave up indexing inline")
	}
	var one int
	if err := page.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		t.Fatalf("the page's transaction after the locks: %v", err)
	}
	if err := page.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}

	// Both free: the page takes both, until it ends.
	page, err = s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer page.Rollback()
	if got, err := s.lockIndexInline(ctx, page); err != nil || !got {
		t.Fatalf("lockIndexInline with both locks free = %v, %v; want true", got, err)
	}
	if a, b := tryBoth(); a || b {
		t.Errorf("another transaction got the index locks (%v, %v) while the page holds them", a, b)
	}
}
