package store_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// A reader's scope (dlq.Filter.Namespaces, access rules): three namespaces
// with 3 messages each; a scope of two lists, counts and finds by id only
// theirs, with or without an entity; an empty scope nothing.
func TestFilterNamespacesScope(t *testing.T) { store.ForEachEngine(t, testFilterNamespacesScope) }

func testFilterNamespacesScope(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s, _, _ := twoNamespacesOn(t, engine, at, 3)
	apac := s.Namespace("apac")
	if _, err := apac.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
		t.Fatal(err)
	}
	var msgs []dlq.Message
	for i := range 3 {
		enq := at.Add(time.Duration(i) * time.Second)
		msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: "apac", EnqueuedAt: &enq})
	}
	if _, err := apac.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64, Messages: msgs, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
	all, _, err := s.ListMessages(ctx, dlq.Filter{}, 100, "")
	if err != nil || len(all) != 9 {
		t.Fatalf("all: %d %v", len(all), err)
	}
	ids := make([]int64, len(all))
	for i, r := range all {
		ids[i] = r.ID
	}
	for _, tt := range []struct {
		name string
		f    dlq.Filter
		want map[string]int
	}{
		{"eu and apac", dlq.Filter{Namespaces: []string{"eu", "apac"}}, map[string]int{"eu": 3, "apac": 3}},
		{"with an entity", dlq.Filter{Entity: "orders", Namespaces: []string{"us", "apac"}}, map[string]int{"us": 3, "apac": 3}},
		{"a namespace outside the scope", dlq.Filter{Namespace: "us", Namespaces: []string{"eu"}}, map[string]int{}},
		{"an empty scope", dlq.Filter{Namespaces: []string{}}, map[string]int{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]int{}
			recs, _, err := s.ListMessages(ctx, tt.f, 100, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				got[r.Namespace]++
			}
			want := 0
			for ns, n := range tt.want {
				want += n
				if got[ns] != n {
					t.Errorf("listed %v, want %v", got, tt.want)
				}
			}
			if len(recs) != want {
				t.Errorf("listed %d, want %d (%v)", len(recs), want, got)
			}
			if n, err := s.CountMessages(ctx, tt.f, 1000); err != nil || n != int64(want) {
				t.Errorf("counted %d (%v), want %d", n, err, want)
			}
			byID, err := s.MessagesByID(ctx, ids, tt.f)
			if err != nil || len(byID) != want {
				t.Errorf("by id %d (%v), want %d", len(byID), err, want)
			}
		})
	}
}

// The audit trail's namespace filter (params' namespace or
// destination_namespace) and a reader's visible namespaces (entries naming
// none stay visible).
func TestAuditNamespaceFilters(t *testing.T) { store.ForEachEngine(t, testAuditNamespaceFilters) }

func testAuditNamespaceFilters(t *testing.T, engine string) {
	ctx := t.Context()
	s, _, _ := twoNamespacesOn(t, engine, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), 1)
	log := audit.New(s)
	for _, p := range []map[string]any{
		{"namespace": "eu"},
		{"namespace": "us"},
		{"namespace": "eu", "destination_namespace": "us"},
		{"route": "POST /logout"},
	} {
		if _, err := log.Append(ctx, audit.Record{Action: audit.ActionDenied, Params: p, Outcome: audit.OutcomeDenied}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(f audit.Filter) []string {
		t.Helper()
		es, _, err := s.ListAudit(ctx, f, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, string(e.Params))
		}
		return out
	}
	if got := list(audit.Filter{Namespace: "us"}); len(got) != 2 {
		t.Errorf("namespace us: %v, want the us entry and the eu->us one", got)
	}
	got := list(audit.Filter{Visible: []string{"eu"}})
	if len(got) != 3 {
		t.Errorf("visible eu: %v, want the two eu entries and the one naming none", got)
	}
	for _, p := range got {
		var m map[string]any
		json.Unmarshal([]byte(p), &m)
		if m["namespace"] == "us" {
			t.Errorf("visible eu holds %s", p)
		}
	}
	if got := list(audit.Filter{Visible: []string{}}); len(got) != 1 {
		t.Errorf("visible none: %v, want the entry naming none", got)
	}
}
