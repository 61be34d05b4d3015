//go:build scale

package store_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// TestScaleIndexer measures the indexer alone (issue 18/20: the property
// rows of the keys worth indexing): -scale.n messages are ingested with the
// indexer paused, then it indexes them all behind, with nothing else
// running in the process, so the CPU time (getrusage) and the bytes written
// per message are the indexer's own (-scale.cpuprofile writes a CPU
// profile of the indexing):
//
//	go test -tags scale -run 'TestScaleIndexer$' -timeout 60m -v ./store/ -scale.n 1000000
func TestScaleIndexer(t *testing.T) {
	n := *scaleN
	path := filepath.Join(t.TempDir(), "scale.db")
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	resume := store.PauseIndexerForTest(st)
	seeder, err := storetest.NewSeeder(ctx, st, storetest.ScaleOptions{Total: n, Every: min(max(n/10, 1), 10_000)})
	if err != nil {
		t.Fatal(err)
	}
	if err := seeder.Seed(ctx, n); err != nil {
		t.Fatal(err)
	}
	// -scale.cpuprofile profiles the indexing (all of it: the ingest is
	// over by then).
	if *scaleCPUProfile != "" {
		f, err := os.Create(*scaleCPUProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	before, start := rusage(t), time.Now()
	resume()
	if err := st.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed, after := time.Since(start), rusage(t)
	if *scaleCPUProfile != "" {
		pprof.StopCPUProfile()
	}
	t.Logf("indexed %d messages behind the ingest in %s: %.0f msg/s; %.1f µs CPU and %.2f KiB written per message",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		float64((after.cpu-before.cpu).Microseconds())/float64(n), float64(after.written-before.written)*512/1024/float64(n))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(store.IndexPath(path)); err == nil {
		t.Logf("index file (search and property rows) %.0f MiB", float64(fi.Size())/mib)
	}
}
