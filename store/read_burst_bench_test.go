package store_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

var (
	burstN          = flag.Int("burst.n", 300_000, "messages BenchmarkListAfterBurst adds to the million before it lists")
	burstStrategies = flag.Bool("burst.strategies", false, "BenchmarkListAfterBurst also times the fetch and collect strategies forced on each search case")
)

// BenchmarkListAfterBurst is BenchmarkListMessages' first pages on a copy of
// the million-message catalog after a burst of -burst.n newer dead letters
// in one new queue, all with one reason (SqlTimeout), a tenant property and
// no word of the generated vocabulary but the common one (storetest's
// CommonWord, "pending"): an incident flooding one queue, as
// BenchmarkConcurrentReads' ingester does over a long run. A list whose
// plan assumes its matches are spread evenly over the catalog walks the
// whole burst before it finds any (issue 18). Forcing the probe strategy is
// left out: it would ask the search index about each message of the burst.
//
//	go test -run '^$' -bench ListAfterBurst -benchtime 20x -timeout 30m ./store/
func BenchmarkListAfterBurst(b *testing.B) {
	ctx := b.Context()
	now := time.Now().UTC()
	s := openCatalogCopy(b, "burst", now)
	defer s.Close()
	started := time.Now()
	reason := "SqlTimeout"
	const page = 1000
	for seq := int64(0); seq < int64(*burstN); {
		msgs := make([]dlq.Message, min(page, int64(*burstN)-seq))
		from := seq + 1
		for i := range msgs {
			seq++
			desc := fmt.Sprintf("timeout %d", seq)
			at := now.Add(time.Duration(seq) * time.Millisecond)
			msgs[i] = dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: fmt.Sprintf("burst-%d", seq),
				EnqueuedAt: &at, DeadLetterReason: &reason, DeadLetterErrorDescription: &desc,
				ApplicationProperties: dlq.EncodeProperties(map[string]any{"tenant": fmt.Sprintf("tenant-%04d", seq%2000), "priority": "high"}),
				Body:                  fmt.Appendf(nil, `{"order":%d,"note":"load pending %d"}`, seq, seq)}
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "burst", SubQueue: dlq.SubQueueDeadLetter, From: from, Through: seq,
			Messages: msgs, SeenAt: now}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.FlushIndex(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("added %d messages in %s", *burstN, time.Since(started).Round(time.Millisecond))
	for _, c := range benchListCases(b, s) {
		b.Run(c.name, func(b *testing.B) { measureFirstPage(b, s, c.f) })
		if !*burstStrategies || c.f.Query == "" {
			continue
		}
		for _, how := range []string{"fetch", "collect"} {
			b.Run(c.name+"/"+how, func(b *testing.B) {
				defer store.ForceSearchForTest(how)()
				defer store.SetFetchMaxForTest(1_000_000)()
				measureFirstPage(b, s, c.f)
			})
		}
	}
}
