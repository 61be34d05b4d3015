package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// TestReadDoesNotWaitForThePurge: a search or a property filter that
// waits for the indexes waits for its messages, not for the rows of keys
// decided not indexed that the same index run purges, purgeBatch rows a
// transaction: the run ends once the messages are indexed, and the next
// one purges on, with nobody asking.
func TestReadDoesNotWaitForThePurge(t *testing.T) { ForEachEngine(t, testReadDoesNotWaitForThePurge) }

func testReadDoesNotWaitForThePurge(t *testing.T, engine string) {
	ctx := t.Context()
	s := OpenFresh(t, engine)
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
		t.Fatal(err)
	}
	const keys = 10
	apply := func(from, to int) {
		t.Helper()
		var msgs []dlq.Message
		for i := from; i < to; i++ {
			props := map[string]any{}
			for k := range keys {
				props[fmt.Sprint("unique", k)] = fmt.Sprintf("%d-%d", k, i)
			}
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint(i),
				Body: []byte("x"), ApplicationProperties: dlq.EncodeProperties(props)})
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: int64(from + 1),
			Through: int64(to), Messages: msgs, SeenAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	// 1,999 messages: the keys are undecided and have a row each; the
	// next one decides them not indexed, a minute ago.
	apply(0, propertyKeyDecideAt-1)
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	apply(propertyKeyDecideAt-1, propertyKeyDecideAt)
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	unindexed := `SELECT count(*) FROM message_properties p JOIN property_keys k ON k.key = p.key WHERE k.indexed = 0`
	before := pkCount(t, s, unindexed)
	if want := int64(keys * (propertyKeyDecideAt - 1)); before != want || before <= 2*purgeBatch {
		t.Fatalf("%d rows of keys decided not indexed, want %d, more than two transactions of the purge", before, want)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE property_keys SET decided_at = `+s.eng.dbClockMillis()+` - ? WHERE indexed = 0`,
		(purgeAfter + time.Second).Milliseconds()); err != nil {
		t.Fatal(err)
	}

	// A new message, left to the indexer, and a read that waits for it.
	readWaitingForARun(t, s, func() { apply(propertyKeyDecideAt, propertyKeyDecideAt+1) })
	left := pkCount(t, s, unindexed)
	if left == 0 {
		t.Errorf("the read waited until all %d rows of keys decided not indexed were purged", before)
	}
	through, newest, err := s.indexProgress(ctx)
	if err != nil || through != newest {
		t.Fatalf("the read returned with the watermark at %d of %d (%v)", through, newest, err)
	}

	// The indexer purges the rest without being asked.
	deadline := time.Now().Add(30 * time.Second)
	for left > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		left = pkCount(t, s, unindexed)
	}
	if left > 0 {
		t.Errorf("%d rows of keys decided not indexed are still there 30 s after the read", left)
	}
}

// readWaitingForARun runs ingest with the indexer of s paused, so that
// what it ingests is left to an index run, then a read that waits for the
// indexes, and lets the indexer run once the read waits. It returns when
// the read has.
func readWaitingForARun(t *testing.T, s *Store, ingest func()) {
	t.Helper()
	resume := PauseIndexerForTest(s)
	ingest()
	read := make(chan error, 1)
	go func() { read <- s.waitIndexed(t.Context(), -1) }()
	for s.idx.waiters.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	resume()
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}
