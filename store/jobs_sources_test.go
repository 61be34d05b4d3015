package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/replica"
)

// Jobs on one source hold it one at a time: a second job is told which job
// holds it, until that one lets go, finishes, or (another process's hold)
// is no longer alive; other sources and namespaces are independent; a
// run under an older claim term can neither take back nor let go of its
// successor's hold.
func TestHoldSource(t *testing.T) { store.ForEachEngine(t, testHoldSource) }

func testHoldSource(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 60)
	ctx := t.Context()
	var ids []int64
	for _, r := range fx.recs {
		if r.GoneAt == nil && r.State == dlq.StateActive && r.ReplayCount == 0 {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) < 3 {
		t.Fatalf("fixture has %d present messages", len(ids))
	}
	job := func(id int64) int64 {
		t.Helper()
		j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x", CreatedBy: "tester"}, replay.Selection{IDs: []int64{id}}, 100)
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	a, b, c := job(ids[0]), job(ids[1]), job(ids[2])
	src := replay.SourceHold{Namespace: "prod", Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}
	hold := func(s *store.Store, id, term int64, in replay.SourceHold) int64 {
		t.Helper()
		in.JobID, in.Term = id, term
		got, err := s.HoldSource(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	release := func(id, term int64) {
		t.Helper()
		h := src
		h.JobID, h.Term = id, term
		if err := fx.s.ReleaseSource(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if got := hold(fx.s, a, 1, src); got != a {
		t.Fatalf("a free source: held by %d, want %d", got, a)
	}
	if got := hold(fx.s, b, 0, src); got != a {
		t.Fatalf("job %d got a source job %d holds (holder %d)", b, a, got)
	}
	other := src
	other.SubQueue = dlq.SubQueueTransferDeadLetter
	if got := hold(fx.s, b, 0, other); got != b {
		t.Fatalf("another subqueue of the entity: holder %d, want %d", got, b)
	}
	elsewhere := src
	elsewhere.Namespace = "staging"
	if got := hold(fx.s, c, 0, elsewhere); got != c {
		t.Fatalf("the entity in another namespace: holder %d, want %d", got, c)
	}
	// The job's run under a later claim takes its hold over; the earlier
	// run's release then changes nothing.
	if got := hold(fx.s, a, 2, src); got != a {
		t.Fatalf("job %d under term 2: holder %d", a, got)
	}
	// The earlier run's hold arriving late (its claim was adopted, its
	// write was delayed): refused, even through a store without the claim
	// fence, and the hold stays the later term's (its release below frees
	// the source).
	stale := src
	stale.JobID, stale.Term = a, 1
	if got, err := fx.s.HoldSource(ctx, stale); !errors.Is(err, replica.ErrClaimLost) {
		t.Fatalf("job %d under term 1 after term 2 held: holder %d, %v; want refused as a lost claim", a, got, err)
	} else if !strings.Contains(err.Error(), "term 1 is stale") {
		t.Errorf("the refusal says %q, want which term is stale", err)
	}
	release(a, 1)
	if got := hold(fx.s, b, 0, src); got != a {
		t.Fatalf("a release under an old term freed the source: holder %d, want %d", got, a)
	}
	release(a, 2)
	if got := hold(fx.s, b, 0, src); got != b {
		t.Fatalf("after job %d let go: holder %d, want %d", a, got, b)
	}
	// A hold dies with its job's end.
	if _, err := fx.s.SetStatus(ctx, b, replay.StatusPaused, "paused by tester"); err != nil {
		t.Fatal(err)
	}
	if got := hold(fx.s, a, 2, src); got != a {
		t.Fatalf("job %d paused: holder %d, want %d", b, got, a)
	}

	// Another process's store (a replica that restarted, or another one):
	// its hold of an unfinished job is alive only while the job's claim
	// heart-beats (PostgreSQL's claims; SQLite is one process's, so a hold
	// left by an earlier process is dead).
	s2, err := store.Open(ctx, fx.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := hold(s2, c, 0, src); got != c {
		t.Fatalf("a hold of another process, its job unclaimed: holder %d, want %d (taken over)", got, c)
	}
	if engine != "postgres" {
		return
	}
	if err := store.ExecForTest(ctx, fx.s, `UPDATE jobs SET claimed_by = 'replica-b', heartbeat_at = now() WHERE id = ?`, c); err != nil {
		t.Fatal(err)
	}
	if got := hold(fx.s, a, 2, src); got != c {
		t.Fatalf("a hold of another replica whose claim heart-beats: holder %d, want %d", got, c)
	}
	if err := store.ExecForTest(ctx, fx.s, `UPDATE jobs SET heartbeat_at = now() - interval '1 minute' WHERE id = ?`, c); err != nil {
		t.Fatal(err)
	}
	if got := hold(fx.s, a, 2, src); got != a {
		t.Fatalf("a hold of a replica whose heartbeat is stale: holder %d, want %d (taken over)", got, a)
	}
}
