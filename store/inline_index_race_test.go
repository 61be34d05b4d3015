package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// An ingest page that decides to index itself inline (someone searched
// just now) while an index run starts, right after the decision, must not
// wait for that run to take the index file's lock: it waited in SQLite's
// busy handler while holding the catalog's, and failed with "database is
// locked" once the run's transactions (one after the other, a catch-up of
// a bulk read) outlasted busy_timeout. The page goes on without indexing
// inline; the run indexes it.
func TestInlineIndexingDoesNotWaitForAnIndexRun(t *testing.T) {
	if testing.Short() {
		t.Skip("ingests a backlog of 20,000 messages")
	}
	path := store.FreshTarget(t, "sqlite")
	ctx := t.Context()
	// A short busy_timeout: the run's one transaction of 16,384 messages
	// outlasts it, as a catch-up of many outlasts the default 5 s.
	s, err := store.Open(ctx, path, store.Options{BusyTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, indexAt); err != nil {
		t.Fatal(err)
	}
	store.PauseIndexerForTest(s)
	const pages, perPage = 20, 1000
	for pg := range pages {
		var msgs []dlq.Message
		for i := range perPage {
			seq := int64(pg*perPage + i + 1)
			// Many distinct words a message: an index transaction of
			// 16,384 of them takes a good part of a second.
			var words strings.Builder
			for w := range 60 {
				fmt.Fprintf(&words, "w%dx%d ", w, (seq*7919+int64(w)*104729)%5003)
			}
			msgs = append(msgs, indexMessage(seq, words.String(), fmt.Sprintf("tenant%d", seq%13)))
		}
		applyIndexPage(t, s, int64(pg*perPage+1), int64((pg+1)*perPage), msgs...)
	}
	restore := store.IndexRunDuringInlineForTest(s)
	defer restore()
	next := int64(pages*perPage + 1)
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 1, Through: next,
		Messages: []dlq.Message{indexMessage(next, "latecomer", "acme")}, SeenAt: indexAt}); err != nil {
		t.Fatalf("a page ingested while an index run starts: %v", err)
	}
	restore()
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.FlushIndex(fctx); err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "latecomer"}); len(got) != 1 || got[0] != next {
		t.Errorf("search latecomer: %v, want [%d]", got, next)
	}
}
