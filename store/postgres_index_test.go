package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// On PostgreSQL the indexer writes the search documents and property rows
// behind the ingest (postgres_index.go), and every replica runs one: a
// crashed ingester's unindexed tail is indexed by the others from the
// watermark, each message once, however many index at the same time.
func TestPostgresIndexerCrashAndReplicas(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	a := indexStore(t, target)
	applyIndexPage(t, a, 1, 2, indexMessage(1, "alpha", "acme"), indexMessage(2, "beta", "acme"))
	if err := a.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	var replicas []*store.Store
	for range 3 {
		r, err := store.Open(ctx, target, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		store.PauseIndexerForTest(r)
		replicas = append(replicas, r)
	}
	// The ingester writes three pages its indexer never gets to, and dies.
	store.PauseIndexerForTest(a)
	const n = 300
	for page := range 3 {
		var msgs []dlq.Message
		for i := range n / 3 {
			seq := int64(3 + page*n/3 + i)
			msgs = append(msgs, indexMessage(seq, fmt.Sprintf("w%d", seq), fmt.Sprintf("t%d", seq%7)))
		}
		applyIndexPage(t, a, msgs[0].SequenceNumber, msgs[len(msgs)-1].SequenceNumber, msgs...)
	}
	if err := store.CrashForTest(a); err != nil {
		t.Fatal(err)
	}
	r0 := replicas[0]
	if got := readCount(t, r0, `SELECT count(*) FROM messages_fts`); got != 2 {
		t.Fatalf("%d search documents after the crash, want 2 (the tail unindexed)", got)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, r0); err != nil || through != 2 || newest != n+2 {
		t.Fatalf("watermark %d, newest %d, %v; want 2, %d", through, newest, err, n+2)
	}
	// Every replica indexes at once, several times over.
	var wg sync.WaitGroup
	for _, r := range replicas {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := store.CatchUpIndexForTest(ctx, r); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if got := readCount(t, r0, `SELECT count(*) FROM messages_fts`); got != n+2 {
		t.Errorf("%d search documents, want %d: each message once", got, n+2)
	}
	if got := readCount(t, r0, `SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM messages_fts f WHERE f.rowid = m.id)`); got != 0 {
		t.Errorf("%d messages without a search document", got)
	}
	if got := readCount(t, r0, `SELECT count(*) FROM message_properties`); got != n+2 {
		t.Errorf("%d property rows, want %d", got, n+2)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, r0); err != nil || through != newest {
		t.Errorf("watermark %d, newest %d, %v", through, newest, err)
	}
	// The reads of another replica find the tail, through both indexes.
	if got := seqsOf(t, replicas[1], dlq.Filter{Query: "w150"}); !slices.Equal(got, []int64{150}) {
		t.Errorf("w150: %v", got)
	}
	if got := seqsOf(t, replicas[2], dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t3"}}, Query: "w10"}); !slices.Equal(got, []int64{10}) {
		t.Errorf("tenant t3 and w10: %v", got)
	}
}
