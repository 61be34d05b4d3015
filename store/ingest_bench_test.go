package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// BenchmarkApplyPage measures the catalog's write side alone: pages of 250
// new dead letters with 1 KiB JSON bodies, as the ingester writes them.
//
//	go test -run '^$' -bench ApplyPage -benchtime 400x ./store/
func BenchmarkApplyPage(b *testing.B) {
	benchApplyPage(b, dlq.EncodeProperties(map[string]any{"tenant": "acme", "attempt": int64(3)}))
}

// BenchmarkApplyPageCopies is BenchmarkApplyPage where every message is a
// replayed copy dead-lettered again (dlqdash.job_id of an existing job):
// what the redeadlettered trigger (migration 0009) costs at most.
func BenchmarkApplyPageCopies(b *testing.B) {
	benchApplyPage(b, dlq.EncodeProperties(map[string]any{"tenant": "acme", "attempt": int64(3),
		"dlqdash.job_id": "1", "dlqdash.replay_count": int64(1)}))
}

func benchApplyPage(b *testing.B, props []byte) {
	const page = 250
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	if _, err := s.SyncEntities(b.Context(), []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, now); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte(`{"sku":"A-1","qty":3,"note":"customer asked for gift wrap"},`), 17)
	reason := "SqlTimeout"
	if _, err := s.writer.ExecContext(b.Context(), `INSERT INTO jobs (id, action, status, created_at, created_by)
		VALUES (1, 'replay', 'completed', 0, 'bench')`); err != nil {
		b.Fatal(err)
	}
	seq := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		msgs := make([]dlq.Message, page)
		from := seq + 1
		for i := range msgs {
			seq++
			desc := fmt.Sprintf("Timeout after %d ms", 30000+seq%100)
			at := now.Add(time.Duration(seq) * time.Millisecond)
			msgs[i] = dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: fmt.Sprintf("m-%d", seq),
				DeadLetterReason: &reason, DeadLetterErrorDescription: &desc, EnqueuedAt: &at,
				ApplicationProperties: props, Body: body}
		}
		if _, err := s.ApplyPage(b.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
			From: from, Through: seq, Messages: msgs, SeenAt: now}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/msg")
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "msg/s")
}
