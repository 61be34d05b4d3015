package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// Close indexes the unindexed tail for a bounded time only (issue 20: it
// took tens of seconds after a bulk read on PostgreSQL); what it leaves is
// indexed by the next start's indexer on its own, with no read asking.
func TestCloseLeavesTheTailToTheNextStart(t *testing.T) {
	for _, engine := range store.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := t.Context()
			target := store.FreshTarget(t, engine)
			s := indexStore(t, target)
			store.PauseIndexerForTest(s)
			const n = 300
			for page := range 3 {
				var msgs []dlq.Message
				for i := range n / 3 {
					seq := int64(1 + page*n/3 + i)
					msgs = append(msgs, indexMessage(seq, fmt.Sprintf("w%d", seq), fmt.Sprintf("t%d", seq%7)))
				}
				applyIndexPage(t, s, msgs[0].SequenceNumber, msgs[len(msgs)-1].SequenceNumber, msgs...)
			}
			store.SetCloseIndexBudgetForTest(s, 0)
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("Close took %s", time.Since(start))
			ro, err := store.OpenReadOnly(ctx, target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			through, newest, err := store.IndexProgressForTest(ctx, ro)
			ro.Close()
			if err != nil || through != 0 || newest != n {
				t.Fatalf("after Close with no budget: watermark %d, newest %d, %v; want 0, %d (the tail left)", through, newest, err, n)
			}

			// The next start indexes the tail without being asked.
			s2, err := store.Open(ctx, target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			store.AwaitIndexerForTest(t, s2, 20*time.Second) // the next start indexes the tail
			if got := seqsOf(t, s2, dlq.Filter{Query: "w300"}); !slices.Equal(got, []int64{n}) {
				t.Errorf("w300 after the next start: %v", got)
			}
			if got := seqsOf(t, s2, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t3"}}, Query: "w10"}); !slices.Equal(got, []int64{10}) {
				t.Errorf("tenant t3 and w10: %v", got)
			}

			// With its budget, Close indexes a tail this small whole.
			store.PauseIndexerForTest(s2)
			applyIndexPage(t, s2, n+1, n+1, indexMessage(n+1, "last", "acme"))
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			ro, err = store.OpenReadOnly(ctx, target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if through, newest, err := store.IndexProgressForTest(ctx, ro); err != nil || through != n+1 || newest != n+1 {
				t.Errorf("after Close with its budget: watermark %d, newest %d, %v; want %d, %d", through, newest, err, n+1, n+1)
			}
		})
	}
}

// An index run that is going when Close is called stops after its current
// transaction: Close does not wait for the run's whole catch-up.
func TestCloseStopsARunningCatchUp(t *testing.T) {
	for _, engine := range store.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := t.Context()
			target := store.FreshTarget(t, engine)
			s := indexStore(t, target)
			resume := store.PauseIndexerForTest(s)
			var msgs []dlq.Message
			for seq := int64(1); seq <= 300; seq++ {
				msgs = append(msgs, indexMessage(seq, fmt.Sprintf("w%d", seq), "acme"))
			}
			applyIndexPage(t, s, 1, 300, msgs...)
			store.SetIndexBatchMaxForTest(s, 50)
			store.SetCloseIndexBudgetForTest(s, 0)
			started, release := store.HoldAfterIndexBatchForTest(s)
			resume() // the run starts: 50 messages a transaction
			<-started
			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			time.Sleep(100 * time.Millisecond) // Close has asked the run to stop
			release()
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			ro, err := store.OpenReadOnly(ctx, target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if through, newest, err := store.IndexProgressForTest(ctx, ro); err != nil || through != 50 || newest != 300 {
				t.Errorf("after Close: watermark %d, newest %d, %v; want 50, 300 (the run stopped after its transaction)", through, newest, err)
			}
		})
	}
}
