package store_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// The series counts exactly the seeded dead letters of the group (or
// entity) per bucket, whatever else is in the catalog, and marks the jobs
// that acted on them.
func TestDeadLetterSeriesCountsAndJobs(t *testing.T) {
	store.ForEachEngine(t, testDeadLetterSeriesCountsAndJobs)
}

func testDeadLetterSeriesCountsAndJobs(t *testing.T, engine string) {
	ctx := t.Context()
	path := store.FreshTarget(t, engine)
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders"}, storetest.Entity{Path: "email"})
	until := t0.Truncate(time.Hour).Add(time.Hour)
	since := until.Add(-24 * time.Hour)
	rng := rand.New(rand.NewPCG(3, 4))
	wantGroup, wantOrders := make([]int64, 24), make([]int64, 24)
	var recs []dlq.Record
	for i := range 600 {
		// From an hour before the window to an hour after it.
		at := since.Add(-time.Hour + time.Duration(rng.Int64N(int64(26*time.Hour))))
		ent := []string{"orders", "email"}[rng.IntN(2)]
		reason := []string{"SqlTimeout", "ValidationFailed"}[rng.IntN(2)]
		sq := []dlq.SubQueue{dlq.SubQueueDeadLetter, dlq.SubQueueDeadLetter, dlq.SubQueueTransferDeadLetter, dlq.SubQueueMain}[rng.IntN(4)]
		r := dlq.Record{Entity: ent, SubQueue: sq, FirstSeenAt: at, LastSeenAt: at,
			Message: dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint("m-", i), EnqueuedAt: &at,
				DeadLetterReason: &reason}}
		if sq == dlq.SubQueueMain {
			r.State, r.DeadLetterReason = dlq.StateDeferred, nil
		}
		if i%7 == 0 {
			r.GoneAt = &until // history counts too
		}
		recs = append(recs, r)
		if sq == dlq.SubQueueMain || at.Before(since) || !at.Before(until) {
			continue
		}
		b := int(at.Sub(since) / time.Hour)
		if reason == "SqlTimeout" {
			wantGroup[b]++
		}
		if ent == "orders" {
			wantOrders[b]++
		}
	}
	ids := storetest.Insert(t, path, recs...)
	var sqlTimeout string
	for _, r := range recs {
		if r.DeadLetterReason != nil && *r.DeadLetterReason == "SqlTimeout" && r.SubQueue == dlq.SubQueueDeadLetter {
			g, _ := dlq.GroupOf(&r.Message, r.SubQueue)
			sqlTimeout = g.ID
			break
		}
	}
	// A job of an orders SqlTimeout message, and one of an email
	// ValidationFailed message.
	pick := func(ent, reason string) int64 {
		for i, r := range recs {
			if r.Entity == ent && r.DeadLetterReason != nil && *r.DeadLetterReason == reason && r.GoneAt == nil && r.SubQueue == dlq.SubQueueDeadLetter {
				return ids[i]
			}
		}
		t.Fatal("no such message")
		return 0
	}
	jOrders, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "t"}, replay.Selection{IDs: []int64{pick("orders", "SqlTimeout")}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	jEmail, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "t"}, replay.Selection{IDs: []int64{pick("email", "ValidationFailed")}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The jobs were created now, in the test's real time: a window around
	// it marks them; the fixture's window (2026) does not.
	jobIDs := func(js []dlq.SeriesJob) []int64 {
		var out []int64
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}

	g, err := s.DeadLetterSeries(ctx, dlq.SeriesQuery{Group: sqlTimeout, Since: since, Until: until, Buckets: 24})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Counts, wantGroup) || g.Width != time.Hour {
		t.Errorf("group counts\n got %v\nwant %v (width %s)", g.Counts, wantGroup, g.Width)
	}
	e, err := s.DeadLetterSeries(ctx, dlq.SeriesQuery{Entity: "orders", Since: since, Until: until, Buckets: 24})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Counts, wantOrders) {
		t.Errorf("entity counts\n got %v\nwant %v", e.Counts, wantOrders)
	}
	if len(g.Jobs)+len(e.Jobs) != 0 {
		t.Errorf("jobs outside the window: %v %v", g.Jobs, e.Jobs)
	}
	now := time.Now()
	for _, tt := range []struct {
		q    dlq.SeriesQuery
		want []int64
	}{
		{dlq.SeriesQuery{Group: sqlTimeout}, []int64{jOrders.ID}},
		{dlq.SeriesQuery{Entity: "orders"}, []int64{jOrders.ID}},
		{dlq.SeriesQuery{Entity: "email"}, []int64{jEmail.ID}},
		{dlq.SeriesQuery{Entity: "nowhere"}, nil},
	} {
		tt.q.Since, tt.q.Until, tt.q.Buckets = now.Add(-time.Hour), now.Add(time.Hour), 4
		got, err := s.DeadLetterSeries(ctx, tt.q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(jobIDs(got.Jobs), tt.want) {
			t.Errorf("%+v: jobs %v, want %v", tt.q, jobIDs(got.Jobs), tt.want)
		}
	}
}

// The counts are a covering range scan of the group's (entity's) index:
// no table rows, nothing else.
func TestDeadLetterSeriesPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.db")
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, tt := range []struct{ q, want string }{
		{store.SeriesQueryForTest(1, nil),
			"SEARCH m USING COVERING INDEX messages_by_group (group_id=? AND <expr>>? AND <expr><?)"},
		{store.SeriesQueryForTest(0, []int64{1, 2}),
			"SEARCH m USING COVERING INDEX messages_by_entity (entity_id=? AND <expr>>? AND <expr><?)"},
	} {
		args := []any{0, 9}
		if strings.Contains(tt.q, "group_id = ?") {
			args = []any{1, 0, 9}
		}
		rows, err := s.ReaderForTest().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+tt.q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if len(plan) != 1 || plan[0] != tt.want {
			t.Errorf("plan %q, want %q", strings.Join(plan, "; "), tt.want)
		}
	}
}
