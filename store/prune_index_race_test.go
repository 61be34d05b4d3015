package store_test

import (
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// Retention deletes a message's index rows (in the index file) and then
// the message (in the catalog), in two transactions; the indexer may run
// between them with a snapshot of the catalog that still holds the
// message. No index row may outlive its message: pruned messages that got
// indexed meanwhile are kept for the next prune, which deletes both.
func TestPruneLeavesNoIndexRowsWhenTheIndexerRunsBetween(t *testing.T) {
	s := indexStore(t, store.FreshTarget(t, "sqlite"))
	ctx := t.Context()
	applyIndexPage(t, s, 1, 1, indexMessage(1, "kept", "acme"))
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	resume := store.PauseIndexerForTest(s)
	defer resume()
	applyIndexPage(t, s, 2, 3, indexMessage(2, "ghost", "initech"), indexMessage(3, "ghost", "initech"))
	applyIndexPage(t, s, 2, 3) // 2 and 3 are gone, not indexed yet
	restore := store.IndexBetweenPruneStepsForTest(s)
	if _, err := s.PruneGone(ctx, indexAt.Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	restore()
	orphans := func() (props, fts int64) {
		return readCount(t, s, `SELECT count(*) FROM message_properties WHERE message_id NOT IN (SELECT id FROM messages)`),
			readCount(t, s, `SELECT count(*) FROM messages_fts WHERE rowid NOT IN (SELECT id FROM messages)`)
	}
	if p, f := orphans(); p != 0 || f != 0 {
		t.Fatalf("after a prune with an index run between its steps: %d property rows and %d search rows without their message", p, f)
	}
	// The next prune deletes what the first one kept, rows and messages.
	if n, err := s.PruneGone(ctx, indexAt.Add(time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("second prune: %d, %v; want 2", n, err)
	}
	if p, f := orphans(); p != 0 || f != 0 {
		t.Fatalf("after the second prune: %d property rows and %d search rows without their message", p, f)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "ghost", IncludeGone: true}); len(got) != 0 {
		t.Errorf("pruned messages found by search: %v", got)
	}
	if n := readCount(t, s, `SELECT count(*) FROM messages`); n != 1 {
		t.Errorf("%d messages, want 1 (kept)", n)
	}
}
