package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestTwoStoresIngestOneDatabase: two stores on one database (two
// processes on one SQLite file, two replicas on one PostgreSQL database)
// ingesting their own namespaces at once write every message once under
// its own id, and the counters and groups add up: the store's write
// transactions run one at a time on both engines. The namespaces share no
// row (each its own failure groups), so that nothing but the store's write
// lock orders the two (shared group rows would, by their row locks).
func TestTwoStoresIngestOneDatabase(t *testing.T) {
	store.ForEachEngine(t, testTwoStoresIngestOneDatabase)
}

func testTwoStoresIngestOneDatabase(t *testing.T, engine string) {
	ctx := t.Context()
	target := store.FreshTarget(t, engine)
	var stores []*store.Store
	for range 2 {
		s, err := store.Open(ctx, target, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	at := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	const pages, perPage = 20, 50
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, s := range stores {
		ns := s.Namespace(fmt.Sprintf("ns%d", i))
		if _, err := ns.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for p := range pages {
				var msgs []dlq.Message
				for k := range perPage {
					seq := int64(p*perPage + k + 1)
					reason := fmt.Sprintf("%s-%s", ns.Name(), []string{"SqlTimeout", "Validation"}[k%2])
					enq := at.Add(time.Duration(seq) * time.Millisecond)
					msgs = append(msgs, dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: fmt.Sprint(seq),
						EnqueuedAt: &enq, DeadLetterReason: &reason, Body: []byte("order failed")})
				}
				if _, err := ns.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
					From: int64(p*perPage + 1), Through: int64((p + 1) * perPage), Messages: msgs, SeenAt: at}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = 2 * pages * perPage
	seen := map[int64]bool{}
	cursor := ""
	for {
		recs, next, err := stores[0].ListMessages(ctx, dlq.Filter{}, 500, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if seen[r.ID] {
				t.Fatalf("message %d listed twice", r.ID)
			}
			seen[r.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != total {
		t.Fatalf("%d messages listed, want %d", len(seen), total)
	}
	groups, err := stores[1].ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var present int64
	for _, g := range groups {
		present += g.Present
		if len(g.Namespaces) != 1 || g.Present != total/4 {
			t.Errorf("group %s: %d present in %d namespaces, want %d in 1", g.Reason, g.Present, len(g.Namespaces), total/4)
		}
	}
	if len(groups) != 4 || present != total {
		t.Errorf("%d groups with %d present, want 4 with %d", len(groups), present, total)
	}
	for i := range stores {
		if n, err := stores[i].CountMessages(ctx, dlq.Filter{Namespace: fmt.Sprintf("ns%d", i), Query: "order"}, 0); n != total/2 || err != nil {
			t.Errorf("namespace ns%d: search finds %d, %v; want %d", i, n, err, total/2)
		}
	}
}
