package storetest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dlqdash/dlqdash/store"
)

// TestSeederWritesThroughApplyPage seeds a small catalog in two steps (one
// seeder continuing after another's Skip) and checks that every message is
// present exactly once, counted, indexed for search and carries orderType,
// and that the second step added new messages rather than seeing the first
// step's again.
func TestSeederWritesThroughApplyPage(t *testing.T) {
	const first, more = 2500, 700
	path := filepath.Join(t.TempDir(), "scale.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	SeedScale(t, st, first, ScaleOptions{Total: 10_000, Page: 300})
	again, err := NewSeeder(t.Context(), st, ScaleOptions{Total: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	again.Skip(first)
	if err := again.Seed(t.Context(), more); err != nil {
		t.Fatal(err)
	}
	if got := again.Seeded(); got != first+more {
		t.Errorf("Seeded() = %d, want %d", got, first+more)
	}
	if got := again.Written(); got != more {
		t.Errorf("Written() = %d, want %d", got, more)
	}
	st.Close()

	db, err := OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string) int64 {
		t.Helper()
		var v int64
		if err := db.QueryRowContext(t.Context(), q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	const want = first + more
	for q, w := range map[string]int64{
		`SELECT count(*) FROM messages WHERE gone_at IS NULL`:                               want,
		`SELECT count(*) FROM messages`:                                                     want,
		`SELECT sum(present) FROM catalog_counts`:                                           want,
		`SELECT count(*) FROM messages WHERE properties ->> '$.orderType' IS NOT NULL`:      want,
		`SELECT count(DISTINCT properties ->> '$.orderType') FROM messages`:                 int64(len(OrderTypes)),
		`SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'properties:orderType'`: want,
		`SELECT count(DISTINCT entity_id) FROM messages`:                                    int64(len(genEntities)),
	} {
		if got := one(q); got != w {
			t.Errorf("%s = %d, want %d", q, got, w)
		}
	}
}

// TestSeederCanceledSaysSo: Seed under a context that ends before its
// messages are written returns the context's error, never nil (nil means
// every message Seeded counts is committed). The generator's goroutine
// sees the cancellation when it hands over a page; with no page made yet
// it used to close the pipe quietly and Seed returned nil about one call
// in two.
func TestSeederCanceledSaysSo(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "scale.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := NewSeeder(t.Context(), st, ScaleOptions{Total: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 24 {
		if err := s.Seed(ctx, 10); !errors.Is(err, context.Canceled) {
			t.Fatalf("Seed %d under a canceled context: %v, want context.Canceled", i, err)
		}
	}
	if got := s.Written(); got != 0 {
		t.Errorf("Written() = %d after Seeds under a canceled context, want 0", got)
	}
}
