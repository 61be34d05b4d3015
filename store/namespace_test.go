package store_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

// twoNamespaces opens a store whose namespaces eu and us both have the
// queue orders, with n dead letters each (reasons Timeout in both; Bad only
// in us), and returns it with the two namespace catalogs.
func twoNamespaces(t *testing.T, at time.Time, n int) (*store.Store, *store.Namespace, *store.Namespace) {
	return twoNamespacesOn(t, "sqlite", at, n)
}

// twoNamespacesOn is twoNamespaces on engine (store.Engines).
func twoNamespacesOn(t *testing.T, engine string, at time.Time, n int) (*store.Store, *store.Namespace, *store.Namespace) {
	t.Helper()
	ctx := t.Context()
	s, err := store.Open(ctx, store.FreshTarget(t, engine), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	eu, us := s.Namespace("eu"), s.Namespace("us")
	for _, ns := range []*store.Namespace{eu, us} {
		if _, err := ns.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue,
			Counts: dlq.Counts{DeadLetter: int64(n)}}}, at); err != nil {
			t.Fatal(err)
		}
		var msgs []dlq.Message
		for i := range n {
			enq := at.Add(time.Duration(i) * time.Second)
			reason := "Timeout"
			if ns == us && i%2 == 1 {
				reason = "Bad"
			}
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive,
				MessageID: fmt.Sprintf("%s-%d", ns.Name(), i), EnqueuedAt: &enq, DeadLetterReason: &reason,
				Body: []byte(ns.Name())})
		}
		if _, err := ns.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 0,
			Through: math.MaxInt64, Messages: msgs, SeenAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := ns.SaveCursor(ctx, dlq.Cursor{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, MaxSeen: int64(n),
			BrokerCount: int64(n)}); err != nil {
			t.Fatal(err)
		}
	}
	return s, eu, us
}

// TestNamespacesShareAPathWithoutMixing: the same queue name in two
// namespaces is two entities; each namespace's writes, cursors, listing and
// last success stay its own, and the filters tell them apart.
func TestNamespacesShareAPathWithoutMixing(t *testing.T) {
	store.ForEachEngine(t, testNamespacesShareAPathWithoutMixing)
}

func testNamespacesShareAPathWithoutMixing(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s, eu, us := twoNamespacesOn(t, engine, at, 6)

	es, err := s.ListEntities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Path != "orders" || es[1].Path != "orders" || es[0].Namespace != "eu" || es[1].Namespace != "us" {
		t.Fatalf("entities %+v: want orders in eu and in us", es)
	}
	for _, tt := range []struct {
		f    dlq.Filter
		want int
		ns   string
	}{
		{dlq.Filter{}, 12, ""},
		{dlq.Filter{Namespace: "eu"}, 6, "eu"},
		{dlq.Filter{Namespace: "us"}, 6, "us"},
		{dlq.Filter{Entity: "orders"}, 12, ""},
		{dlq.Filter{Namespace: "us", Entity: "orders"}, 6, "us"},
		{dlq.Filter{Namespace: "us", Reason: "Bad"}, 3, "us"},
		{dlq.Filter{Namespace: "eu", Reason: "Bad"}, 0, "eu"},
		{dlq.Filter{Namespace: "eu", Query: "us"}, 0, "eu"},
		{dlq.Filter{Namespace: "nowhere"}, 0, ""},
	} {
		recs, _, err := s.ListMessages(ctx, tt.f, 100, "")
		if err != nil {
			t.Fatalf("%+v: %v", tt.f, err)
		}
		if len(recs) != tt.want {
			t.Errorf("%+v: %d messages, want %d", tt.f, len(recs), tt.want)
		}
		for _, r := range recs {
			if tt.ns != "" && (r.Namespace != tt.ns || r.MessageID[:2] != tt.ns) {
				t.Errorf("%+v: message %s of namespace %q", tt.f, r.MessageID, r.Namespace)
			}
			if r.Namespace == "" {
				t.Errorf("%+v: message %s without a namespace", tt.f, r.MessageID)
			}
		}
		n, err := s.CountMessages(ctx, tt.f, 1000)
		if err != nil || n != int64(tt.want) {
			t.Errorf("%+v: count %d, %v; want %d", tt.f, n, err, tt.want)
		}
	}
	var unknown *dlq.UnknownEntityError
	if _, _, err := s.ListMessages(ctx, dlq.Filter{Namespace: "eu", Entity: "payments"}, 10, ""); !errors.As(err, &unknown) {
		t.Errorf("unknown entity in eu: %v", err)
	}

	// Cursors are per namespace.
	for _, ns := range []*store.Namespace{eu, us} {
		cs, err := ns.Cursors(ctx)
		if err != nil || len(cs) != 1 || cs[0].Present != 6 {
			t.Errorf("%s cursors %+v, %v: want one with 6 present", ns.Name(), cs, err)
		}
	}

	// A listing of one namespace without orders deletes only its orders.
	later := at.Add(time.Minute)
	sync, err := eu.SyncEntities(ctx, nil, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(sync.Deleted) != 1 || len(sync.Gone) != 6 {
		t.Errorf("eu sync %+v: want orders deleted with its 6 messages", sync)
	}
	if n, _ := s.CountMessages(ctx, dlq.Filter{Namespace: "us"}, 100); n != 6 {
		t.Errorf("us has %d present after eu's orders went, want 6", n)
	}
	if last, err := eu.LastSuccess(ctx); err != nil || last == nil || !last.Equal(later) {
		t.Errorf("eu last success %v, %v; want %v", last, err, later)
	}
	if last, err := us.LastSuccess(ctx); err != nil || last == nil || !last.Equal(at) {
		t.Errorf("us last success %v, %v; want %v", last, err, at)
	}
}

// TestGroupsCountPerNamespace: one failure in two namespaces is one group,
// with a count in each.
func TestGroupsCountPerNamespace(t *testing.T) { store.ForEachEngine(t, testGroupsCountPerNamespace) }

func testGroupsCountPerNamespace(t *testing.T, engine string) {
	s, _, _ := twoNamespacesOn(t, engine, time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC), 6)
	gs, err := s.ListGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 {
		t.Fatalf("groups %+v: want Timeout and Bad", gs)
	}
	for _, g := range gs {
		switch g.Reason {
		case "Timeout":
			want := []dlq.NamespaceCount{{Name: "eu", Present: 6, Total: 6, Entities: []string{"orders"}}, {Name: "us", Present: 3, Total: 3, Entities: []string{"orders"}}}
			if g.Present != 9 || fmt.Sprint(g.Namespaces) != fmt.Sprint(want) || fmt.Sprint(g.Entities) != "[orders]" {
				t.Errorf("Timeout: %+v; want 9 present as %v in [orders]", g, want)
			}
		case "Bad":
			want := []dlq.NamespaceCount{{Name: "us", Present: 3, Total: 3, Entities: []string{"orders"}}}
			if g.Present != 3 || fmt.Sprint(g.Namespaces) != fmt.Sprint(want) {
				t.Errorf("Bad: %+v; want %v", g, want)
			}
		}
	}
}

// TestAdoptUnnamed: rows cataloged before namespaces (namespace "") carry
// on under the first namespace's name, with their cursors and last success.
func TestAdoptUnnamed(t *testing.T) { store.ForEachEngine(t, testAdoptUnnamed) }

func testAdoptUnnamed(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, at) // the unnamed namespace's orders
	if err := s.SaveCursor(ctx, dlq.Cursor{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, MaxSeen: 4}); err != nil {
		t.Fatal(err)
	}
	n, err := s.AdoptUnnamed(ctx, "contoso.servicebus.windows.net")
	if err != nil || n != 1 {
		t.Fatalf("adopted %d, %v; want 1", n, err)
	}
	ns := s.Namespace("contoso.servicebus.windows.net")
	cs, err := ns.Cursors(ctx)
	if err != nil || len(cs) != 1 || cs[0].MaxSeen != 4 {
		t.Errorf("cursors after adoption %+v, %v", cs, err)
	}
	if last, err := ns.LastSuccess(ctx); err != nil || last == nil || !last.Equal(at) {
		t.Errorf("last success after adoption %v, %v", last, err)
	}
	if n, err := s.AdoptUnnamed(ctx, "other"); err != nil || n != 0 {
		t.Errorf("second adoption %d, %v; want nothing", n, err)
	}
	es, _ := s.ListEntities(ctx)
	if len(es) != 1 || es[0].Namespace != "contoso.servicebus.windows.net" {
		t.Errorf("entities %+v", es)
	}
}

// TestAdoptRenamedNamespace: a catalog of a namespace that was renamed (the
// demo's "demo" became "prod-eu") carries on under the new name: its
// entities, messages, cursors and last success, its jobs as source and as
// destination; the other namespace is untouched and a second call moves
// nothing.
func TestAdoptRenamedNamespace(t *testing.T) { store.ForEachEngine(t, testAdoptRenamedNamespace) }

func testAdoptRenamedNamespace(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s, _, _ := twoNamespacesOn(t, engine, at, 4)
	ids := func(ns string) []int64 {
		recs, _, err := s.ListMessages(ctx, dlq.Filter{Namespace: ns}, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	fromEU, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "t", Namespace: "eu"},
		replay.Selection{IDs: ids("eu")[:1]}, 3)
	if err != nil {
		t.Fatal(err)
	}
	usToEU, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "t", Namespace: "us", DestinationNamespace: "eu",
		Destination: "orders"}, replay.Selection{IDs: ids("us")[:1]}, 3)
	if err != nil {
		t.Fatal(err)
	}

	n, err := s.Adopt(ctx, "eu", "prod-eu")
	if err != nil || n != 1 {
		t.Fatalf("adopted %d, %v; want 1 entity", n, err)
	}
	if got, old := len(ids("prod-eu")), len(ids("eu")); got != 4 || old != 0 {
		t.Errorf("prod-eu has %d messages and eu %d after the rename, want 4 and 0", got, old)
	}
	if len(ids("us")) != 4 {
		t.Errorf("us has %d messages, want its 4", len(ids("us")))
	}
	ns := s.Namespace("prod-eu")
	if cs, err := ns.Cursors(ctx); err != nil || len(cs) != 1 || cs[0].MaxSeen != 4 {
		t.Errorf("prod-eu cursors %+v, %v; want eu's", cs, err)
	}
	if last, err := ns.LastSuccess(ctx); err != nil || last == nil || !last.Equal(at) {
		t.Errorf("prod-eu last success %v, %v; want %v", last, err, at)
	}
	if j, err := s.Job(ctx, fromEU.ID); err != nil || j.Namespace != "prod-eu" || j.DestinationNamespace != "" {
		t.Errorf("eu's job after the rename: %+v, %v", j, err)
	}
	if j, err := s.Job(ctx, usToEU.ID); err != nil || j.Namespace != "us" || j.DestinationNamespace != "prod-eu" {
		t.Errorf("us's job into eu after the rename: namespace %q destination %q, %v", j.Namespace, j.DestinationNamespace, err)
	}
	if jobs, _, err := s.ListJobsIn(ctx, "prod-eu", 10, ""); err != nil || len(jobs) != 1 || jobs[0].ID != fromEU.ID {
		t.Errorf("prod-eu's jobs %+v, %v", jobs, err)
	}
	if n, err := s.Adopt(ctx, "eu", "prod-eu"); err != nil || n != 0 {
		t.Errorf("second rename moved %d, %v; want nothing", n, err)
	}
}

// TestGroupNamespacesOrderedBySums: a group's namespaces are ordered by
// their sums (present, then total, then name), not by their largest
// entity: eu has two entities of 4 (8 in all), us one of 5.
func TestGroupNamespacesOrderedBySums(t *testing.T) {
	store.ForEachEngine(t, testGroupNamespacesOrderedBySums)
}

func testGroupNamespacesOrderedBySums(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s, err := store.Open(ctx, store.FreshTarget(t, engine), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fill := func(ns *store.Namespace, counts map[string]int) {
		t.Helper()
		var ents []dlq.Entity
		for path, n := range counts {
			ents = append(ents, dlq.Entity{Path: path, Kind: dlq.KindQueue, Counts: dlq.Counts{DeadLetter: int64(n)}})
		}
		if _, err := ns.SyncEntities(ctx, ents, at); err != nil {
			t.Fatal(err)
		}
		for path, n := range counts {
			var msgs []dlq.Message
			for i := range n {
				enq, reason := at.Add(time.Duration(i)*time.Second), "Timeout"
				msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive,
					MessageID: fmt.Sprintf("%s-%s-%d", ns.Name(), path, i), EnqueuedAt: &enq, DeadLetterReason: &reason})
			}
			if _, err := ns.ApplyPage(ctx, dlq.Page{Entity: path, SubQueue: dlq.SubQueueDeadLetter, From: 0,
				Through: math.MaxInt64, Messages: msgs, SeenAt: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(s.Namespace("eu"), map[string]int{"billing": 4, "orders": 4})
	fill(s.Namespace("us"), map[string]int{"shipping": 5})
	gs, err := s.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []dlq.NamespaceCount{
		{Name: "eu", Present: 8, Total: 8, Entities: []string{"billing", "orders"}},
		{Name: "us", Present: 5, Total: 5, Entities: []string{"shipping"}},
	}
	if len(gs) != 1 || gs[0].Present != 13 || fmt.Sprint(gs[0].Namespaces) != fmt.Sprint(want) ||
		fmt.Sprint(gs[0].Entities) != "[shipping billing orders]" {
		t.Fatalf("groups %+v; want one of 13 present, its namespaces %v, its entities [shipping billing orders]", gs, want)
	}
}
