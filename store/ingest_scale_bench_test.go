package store_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// BenchmarkApplyPageInto1M measures the catalog's write side when the
// catalog already holds 1,000,000 messages: 100,000 more dead letters with
// 1 KiB JSON bodies, in the 1,000-message transactions the ingester writes
// when peeks keep up (target: still >= 15,000 msg/s).
//
//	go test -run '^$' -bench ApplyPageInto1M -benchtime 1x ./store/
func BenchmarkApplyPageInto1M(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		now := time.Now()
		s := openCatalogCopy(b, "bench-orders", now)

		body := bytes.Repeat([]byte(`{"sku":"A-1","qty":3,"note":"customer asked for gift wrap"},`), 17)
		reason := "SqlTimeout"
		props := dlq.EncodeProperties(map[string]any{"tenant": "acme", "attempt": int64(3)})
		const total, page = 100_000, 1000
		b.StartTimer()
		start := time.Now()
		for seq := int64(0); seq < total; {
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
			if _, err := s.ApplyPage(b.Context(), dlq.Page{Entity: "bench-orders", SubQueue: dlq.SubQueueDeadLetter,
				From: from, Through: seq, Messages: msgs, SeenAt: now}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "msg/s")
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// openCatalogCopy opens a copy of the generated million-message catalog
// (and of its index file: its search and property rows) with one more
// queue, named queue, listed at now.
func openCatalogCopy(b *testing.B, queue string, now time.Time) *store.Store {
	b.Helper()
	src := storetest.Catalog(b, benchMessages)
	path := filepath.Join(b.TempDir(), "catalog.db")
	copyFile(b, src, path)
	copyFile(b, store.IndexPath(src), store.IndexPath(path))
	s, err := store.Open(b.Context(), path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// The generated entities stay listed: a sync that left them out would
	// mark a million messages gone.
	have, err := s.ListEntities(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	listed := []dlq.Entity{{Path: queue, Kind: dlq.KindQueue}}
	for _, e := range have {
		if e.DeletedAt == nil {
			listed = append(listed, e.Entity)
		}
	}
	if _, err := s.SyncEntities(b.Context(), listed, now); err != nil {
		b.Fatal(err)
	}
	return s
}

func copyFile(tb testing.TB, from, to string) {
	tb.Helper()
	in, err := os.Open(from)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}
