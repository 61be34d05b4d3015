package storetest

import (
	"path/filepath"
	"testing"

	"github.com/dlqdash/dlqdash/store"
)

// BenchmarkGenerate100k measures Generate: a synthetic catalog of 100,000
// messages into a freshly migrated database.
//
//	go test -run '^$' -bench Generate100k -benchtime 2x ./store/storetest/
func BenchmarkGenerate100k(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "catalog.db")
		s, err := store.Open(b.Context(), path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		b.StartTimer()
		if err := Generate(b.Context(), path, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msg/s")
}
