package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/replica"
)

// TestFencedWritesOnPostgres: the PostgreSQL store's side of serve's
// shared wiring. Two stores on one database (two replicas): the catalog
// fenced with the lease's current term writes (pages, cursors, depth
// samples), the other replica's, fenced with the term it held before,
// writes nothing (ErrStaleTerm, its transaction rolled back); a job's
// writes fenced by a claim this replica does not hold are refused too.
// On SQLite there is nothing to share: ReplicaDB says so.
func TestFencedWritesOnPostgres(t *testing.T) {
	if _, ok := store.OpenFresh(t, "sqlite").ReplicaDB(); ok {
		t.Error("a SQLite store offers a replica pool")
	}
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	open := func() *store.Store {
		s, err := store.Open(ctx, target, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	pool, ok := a.ReplicaDB()
	if !ok {
		t.Fatal("the PostgreSQL store has no replica pool")
	}
	const lease = "ingest/prod"
	old, ok, err := replica.Acquire(ctx, pool, lease, "pod-b", time.Second)
	if err != nil || !ok {
		t.Fatalf("acquire: %d %v %v", old, ok, err)
	}
	if err := replica.Release(ctx, pool, lease, "pod-b", old); err != nil {
		t.Fatal(err)
	}
	term, ok, err := replica.Acquire(ctx, pool, lease, "pod-a", time.Minute)
	if err != nil || !ok || term <= old {
		t.Fatalf("acquire: %d %v %v", term, ok, err)
	}

	current := a.FencedNamespace("prod", replica.LeaseFence{Name: lease, Term: term})
	stale := b.FencedNamespace("prod", replica.LeaseFence{Name: lease, Term: old})
	if _, err := current.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, indexAt); err != nil {
		t.Fatal(err)
	}
	page := func(c dlq.Catalog, seq int64) error {
		_, err := c.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: seq, Through: seq,
			Messages: []dlq.Message{indexMessage(seq, "fenced", "acme")}, SeenAt: indexAt})
		return err
	}
	if err := page(current, 1); err != nil {
		t.Fatalf("the lease holder's page: %v", err)
	}
	if err := page(stale, 2); !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("the stale term's page: %v, want ErrStaleTerm", err)
	}
	cur := dlq.Cursor{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, MaxSeen: 99}
	if err := stale.SaveCursor(ctx, cur); !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("the stale term's cursor: %v, want ErrStaleTerm", err)
	}
	if err := stale.RecordDepth(ctx, "orders", dlq.Counts{DeadLetter: 5}, indexAt); !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("the stale term's depth sample: %v, want ErrStaleTerm", err)
	}
	if _, err := stale.SyncEntities(ctx, nil, indexAt); !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("the stale term's entities: %v, want ErrStaleTerm", err)
	}
	if err := current.SaveCursor(ctx, dlq.Cursor{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, MaxSeen: 1}); err != nil {
		t.Errorf("the holder's cursor: %v", err)
	}
	// What the stale replica tried left nothing behind.
	if got := seqsOf(t, b, dlq.Filter{Query: "fenced"}); !slices.Equal(got, []int64{1}) {
		t.Errorf("messages after both pages: %v, want [1]", got)
	}
	curs, err := b.Namespace("prod").Cursors(ctx)
	if err != nil || len(curs) != 1 || curs[0].MaxSeen != 1 {
		t.Errorf("cursors %+v, %v: want the holder's only", curs, err)
	}
	ents, err := b.ListEntities(ctx)
	if err != nil || len(ents) != 1 || ents[0].DeletedAt != nil {
		t.Errorf("entities %+v, %v: the stale sync deleted something", ents, err)
	}

	// A job's writes under a claim that is not this replica's.
	recs, _, err := a.ListMessages(ctx, dlq.Filter{Query: "fenced"}, 10, "")
	if err != nil || len(recs) != 1 {
		t.Fatalf("messages %d, %v", len(recs), err)
	}
	j, err := a.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, CreatedBy: "tester", Namespace: "prod"},
		replay.Selection{IDs: []int64{recs[0].ID}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	claims := &replica.Claims{Table: "jobs", Claimable: "status IN ('queued', 'running')"}
	notMine := b.FencedJobs(replica.ClaimFence{Claims: claims, Replica: "pod-b", Claim: replica.Claim{ID: j.ID, Term: 7}})
	if _, err := notMine.SetStatus(ctx, j.ID, replay.StatusRunning, "", replay.StatusQueued); !errors.Is(err, replica.ErrClaimLost) {
		t.Errorf("a job write under a claim not held: %v, want ErrClaimLost", err)
	}
	if got, err := a.Job(ctx, j.ID); err != nil || got.Status != replay.StatusQueued {
		t.Errorf("job after the refused write: %+v, %v", got.Status, err)
	}
}
