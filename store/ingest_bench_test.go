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
	props := dlq.EncodeProperties(map[string]any{"tenant": "acme", "attempt": int64(3)})
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
