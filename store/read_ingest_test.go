package store_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestReadsWhatIngestWrites is the contract between the catalog's two
// sides: messages written by ApplyPage (not by storetest) are found by every
// filter and search strategy, in particular property filters, which rely on
// the search index holding the properties' JSON text (propertyPhrase).
func TestReadsWhatIngestWrites(t *testing.T) { store.ForEachEngine(t, testReadsWhatIngestWrites) }

func testReadsWhatIngestWrites(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, at)
	var msgs []dlq.Message
	for i := range 60 {
		enq := at.Add(time.Duration(i) * time.Second)
		msgs = append(msgs, dlq.Message{
			SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint(i), EnqueuedAt: &enq,
			DeadLetterReason:           ptr([]string{"SqlTimeout", "Bad <input>"}[i%2]),
			DeadLetterErrorDescription: ptr(fmt.Sprintf("after %d ms", i)),
			ApplicationProperties: dlq.EncodeProperties(map[string]any{
				"tenant": fmt.Sprintf("t%d", i%3), "html<&>": "<b>" + fmt.Sprint(i%2) + "</b>", "line\nkey": "a\nb",
				"n": int64(i), "ok": i%2 == 0, "dlqdash.original_entity": "orders/x",
			}),
			Body: []byte(fmt.Sprintf(`{"word":"%s"}`, []string{"kiwi", "mango"}[i%2])),
		})
	}
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 0, Through: math.MaxInt64,
		Messages: msgs, SeenAt: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	props := func(kv ...string) []dlq.PropertyMatch {
		var out []dlq.PropertyMatch
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, dlq.PropertyMatch{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	gs, err := s.ListGroups(ctx)
	if err != nil || len(gs) != 2 {
		t.Fatalf("groups %v, %v", gs, err)
	}
	tests := []struct {
		f    dlq.Filter
		want func(i int) bool
	}{
		{dlq.Filter{Properties: props("tenant", "t1")}, func(i int) bool { return i%3 == 1 }},
		{dlq.Filter{Properties: props("html<&>", "<b>1</b>")}, func(i int) bool { return i%2 == 1 }},
		{dlq.Filter{Properties: props("line\nkey", "a\nb", "n", "7")}, func(i int) bool { return i == 7 }},
		{dlq.Filter{Properties: props("ok", "true", "tenant", "t0")}, func(i int) bool { return i%2 == 0 && i%3 == 0 }},
		{dlq.Filter{Properties: props("dlqdash.original_entity", "orders/x")}, func(int) bool { return true }},
		{dlq.Filter{Properties: props("dlqdash.original_entity", "orders")}, func(int) bool { return false }},
		{dlq.Filter{Query: "mango"}, func(i int) bool { return i%2 == 1 }},
		{dlq.Filter{Query: "input"}, func(i int) bool { return i%2 == 1 }},
		{dlq.Filter{Query: "t2 ms"}, func(i int) bool { return i%3 == 2 }},
		{dlq.Filter{Reason: "Bad <input>"}, func(i int) bool { return i%2 == 1 }},
		{dlq.Filter{Group: gs[0].ID}, func(i int) bool { return (gs[0].Reason == "SqlTimeout") == (i%2 == 0) }},
	}
	for _, how := range []string{"", "fetch", "collect", "probe", "check"} {
		restore := store.ForceSearchForTest(how)
		for _, tt := range tests {
			var want []string
			for i := 59; i >= 0; i-- {
				if tt.want(i) {
					want = append(want, fmt.Sprint(i))
				}
			}
			recs, _, err := s.ListMessages(ctx, tt.f, 500, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.MessageID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%q %+v:\n got %v\nwant %v", how, tt.f, got, want)
			}
		}
		restore()
	}
}
