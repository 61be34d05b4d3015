package main

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/store/storetest"
)

// BenchmarkExport runs `dlqdash export --include-gone` over the generated
// catalog of a million messages (storetest.Catalog, built once and cached),
// writing to a counter: rows/s, output MB/s and the peak heap while it runs.
//
//	go test -run '^$' -bench Export -benchtime 1x ./cmd/dlqdash
func BenchmarkExport(b *testing.B) {
	path := storetest.Catalog(b, 1_000_000)
	for _, format := range []string{"jsonl", "csv"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			var peak atomic.Uint64
			stop, sampled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sampled)
				t := time.NewTicker(10 * time.Millisecond)
				defer t.Stop()
				var ms runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						runtime.ReadMemStats(&ms)
						if ms.HeapInuse > peak.Load() {
							peak.Store(ms.HeapInuse)
						}
					}
				}
			}()
			var out countingWriter
			start := time.Now()
			for b.Loop() {
				var stderr bytes.Buffer
				if code := run(b.Context(), []string{"export", "--db", path, "--include-gone", "--format", format}, env(), &out, &stderr); code != exitOK {
					b.Fatalf("exit %d: %s", code, stderr.String())
				}
			}
			elapsed := time.Since(start)
			close(stop)
			<-sampled
			b.ReportMetric(float64(out.lines)/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(out.bytes)/elapsed.Seconds()/(1<<20), "MB/s")
			b.ReportMetric(float64(out.lines)/float64(b.N), "rows/op")
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
		})
	}
}

type countingWriter struct{ lines, bytes int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes += int64(len(p))
	w.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}
