//go:build scale

// The issue 18 scale harness: a catalog of a million dead letters, written
// through the ingester's own write path (storetest.Seeder: SyncEntities,
// then ApplyPage pages of up to 1,000 messages), and the figures of the
// issue's table. It is out of the default test run (build tag scale):
//
//	go test -tags scale -run TestScaleIngest -timeout 60m -v ./store/
//	go test -tags scale -run TestScaleIngest -timeout 60m -v ./store/ -scale.n 100000
//	go test -tags scale -run TestScaleIngest -timeout 60m -v ./store/ \
//	    -scale.cpuprofile /tmp/cpu.out -scale.profile-from 700000 -scale.profile-to 900000 -scale.stats
//
// TestScaleIngest reports the ingest rate into an empty catalog (the whole
// run and every tenth of it, so the rate at 100k and at 1M are side by
// side), the CPU time and blocks written per message (getrusage: figures
// that do not depend on how loaded the machine is), and the memory
// high-water mark (maxrss of the process, and the Go heap's peak).
//
// Read-side measurements (lists, filters, search, concurrent clients while
// ingesting) go in their own file with the same build tag and use
// scaleCatalog for a seeded catalog (reused from -scale.db), and
// ingestAtRate with its seeder to keep ingesting while they measure.
package store_test

import (
	"context"
	"database/sql"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

var (
	scaleN           = flag.Int("scale.n", 1_000_000, "messages the scale harness ingests")
	scaleDB          = flag.String("scale.db", "", "database file of the scale harness: kept after the run; scaleCatalog reuses it when it exists")
	scaleCPUProfile  = flag.String("scale.cpuprofile", "", "write a CPU profile of the ingest between -scale.profile-from and -scale.profile-to messages")
	scaleBlock       = flag.String("scale.blockprofile", "", "write a block profile of the same window")
	scaleTrace       = flag.String("scale.trace", "", "write an execution trace (go tool trace) of the same window")
	scaleProfileFrom = flag.Int("scale.profile-from", 700_000, "messages ingested when profiling starts")
	scaleProfileTo   = flag.Int("scale.profile-to", 900_000, "messages ingested when profiling stops")
	scaleWriterSQL   = flag.String("scale.writer-sql", "", "statements (separated by ;) run on the store's writer connection before the ingest, to try settings")
	scaleStats       = flag.Bool("scale.stats", false, "log SQLite's page counts of every table and index, and the search index's segments, after the ingest")
)

// usage is what getrusage says about this process.
type usage struct {
	cpu     time.Duration // user + system
	written int64         // blocks written (512 bytes)
	maxRSS  int64         // bytes
}

func rusage(tb testing.TB) usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return usage{
		cpu:     time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		written: ru.Oublock,
		maxRSS:  ru.Maxrss << 10,
	}
}

// heapPeak samples the Go runtime's total memory (heap, stacks, runtime)
// every 50 ms until stop is called, and returns the highest sample.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	go func() {
		defer close(finished)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

const mib = 1 << 20

// TestScaleIngest ingests -scale.n messages into an empty catalog and
// reports the figures of issue 18's ingest rows.
func TestScaleIngest(t *testing.T) {
	n := *scaleN
	path := *scaleDB
	if path == "" {
		path = filepath.Join(t.TempDir(), "scale.db")
	} else {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, q := range strings.Split(*scaleWriterSQL, ";") {
		if q = strings.TrimSpace(q); q != "" {
			if err := store.WriterExecForTest(ctx, st, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			t.Logf("writer: %s", q)
		}
	}

	tenth := max(n/10, 1)
	var (
		start     time.Time
		before    usage
		last      time.Time
		lastUsage usage
		lastDone  int
		profiling bool
		profiled  bool
	)
	stopProfile := func() {
		if !profiling {
			return
		}
		profiling, profiled = false, true
		if *scaleCPUProfile != "" {
			pprof.StopCPUProfile()
		}
		if *scaleBlock != "" {
			f, err := os.Create(*scaleBlock)
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.Lookup("block").WriteTo(f, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			runtime.SetBlockProfileRate(0)
		}
		if *scaleTrace != "" {
			trace.Stop()
		}
		t.Logf("profile written")
	}
	progress := func(done int) {
		now, u := time.Now(), rusage(t)
		if done/tenth > lastDone/tenth || done == n {
			k := done - lastDone
			t.Logf("%8d messages: %6.0f msg/s over the last %d (%5.1f µs CPU, %5.2f KiB written per message); %6.0f msg/s overall; maxrss %.1f MiB",
				done, float64(k)/now.Sub(last).Seconds(), k,
				float64((u.cpu-lastUsage.cpu).Microseconds())/float64(k),
				float64(u.written-lastUsage.written)*512/1024/float64(k),
				float64(done)/now.Sub(start).Seconds(), float64(u.maxRSS)/mib)
			last, lastUsage, lastDone = now, u, done
		}
		if !profiling && !profiled && done >= *scaleProfileFrom && (*scaleCPUProfile != "" || *scaleBlock != "" || *scaleTrace != "") {
			profiling = true
			if *scaleTrace != "" {
				f, err := os.Create(*scaleTrace)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				if err := trace.Start(f); err != nil {
					t.Fatal(err)
				}
			}
			if *scaleCPUProfile != "" {
				f, err := os.Create(*scaleCPUProfile)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				if err := pprof.StartCPUProfile(f); err != nil {
					t.Fatal(err)
				}
			}
			if *scaleBlock != "" {
				runtime.SetBlockProfileRate(int(time.Microsecond))
			}
		}
		if done >= *scaleProfileTo {
			stopProfile()
		}
	}
	every := min(tenth, 10_000)
	seeder, err := storetest.NewSeeder(ctx, st, storetest.ScaleOptions{Total: n, Every: every, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	peak := heapPeak()
	start, last = time.Now(), time.Now()
	before = rusage(t)
	lastUsage = before
	if err := seeder.Seed(ctx, n); err != nil {
		t.Fatal(err)
	}
	// The search and property rows are written behind the ingest: the
	// clock stops when they cover every message too.
	seeded := time.Since(start)
	if err := st.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	t.Logf("the indexes caught up %s after the last page", (elapsed - seeded).Round(time.Millisecond))
	restarts, copying, holding, syncs := store.LogRestartForTest(st)
	t.Logf("the catalog's log started over %d times: the writer copied for %s, the indexer waited %s; %d syncs of the log beforehand",
		restarts, copying.Round(time.Millisecond), holding.Round(time.Millisecond), syncs)
	after := rusage(t)
	stopProfile()
	goPeak := peak()

	t.Logf("ingested %d messages into an empty catalog in %s: %.0f msg/s; %.1f µs CPU and %.2f KiB written per message",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		float64((after.cpu-before.cpu).Microseconds())/float64(n), float64(after.written-before.written)*512/1024/float64(n))
	t.Logf("memory high-water mark: maxrss %.1f MiB (before the ingest %.1f MiB); Go runtime peak %.1f MiB",
		float64(after.maxRSS)/mib, float64(before.maxRSS)/mib, float64(goPeak)/mib)
	for _, wal := range []string{path + "-wal", store.IndexPath(path) + "-wal"} {
		if fi, err := os.Stat(wal); err == nil {
			t.Logf("write-ahead log %s: %.0f MiB", filepath.Base(wal), float64(fi.Size())/mib)
		}
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil {
		t.Logf("database file %.0f MiB", float64(fi.Size())/mib)
	}
	if fi, err := os.Stat(store.IndexPath(path)); err == nil {
		t.Logf("index file (search and property rows) %.0f MiB", float64(fi.Size())/mib)
	}
	if *scaleStats {
		logSQLiteStats(t, path)
	}
}

// logSQLiteStats logs the page count of every table and index (dbstat) and
// the search index's segments.
func logSQLiteStats(t *testing.T, path string) {
	db, err := storetest.OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var pageSize int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	// Both files: the catalog (main) and the index file (idx).
	rows, err := db.QueryContext(ctx, `SELECT name, count(*), sum(pgsize) FROM dbstat('main') GROUP BY name
		UNION ALL SELECT name, count(*), sum(pgsize) FROM dbstat('idx') GROUP BY name ORDER BY 2 DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var pages, bytes int64
		if err := rows.Scan(&name, &pages, &bytes); err != nil {
			t.Fatal(err)
		}
		t.Logf("  %-28s %8d pages  %7.1f MiB", name, pages, float64(bytes)/mib)
	}
	rows.Close()
	logFTSSegments(t, db)
}

// logFTSSegments logs how many segments the search index has, by level,
// from FTS5's own structure record (fts5vocab cannot see it; the _idx
// table holds one row per segment's leaf range).
func logFTSSegments(t *testing.T, db *sql.DB) {
	var segs, leaves int64
	if err := db.QueryRow(`SELECT count(DISTINCT segid), count(*) FROM messages_fts_idx`).Scan(&segs, &leaves); err != nil {
		t.Logf("search index segments: %v", err)
		return
	}
	t.Logf("search index: %d segments, %d index rows", segs, leaves)
}

// scaleCatalog returns an open store over a catalog of n messages written
// by storetest.Seeder, and a seeder that continues the same stream (for
// ingesting while measuring reads). With -scale.db naming an existing file
// it reuses that file (a TestScaleIngest run with -scale.db and the same
// -scale.n leaves one); otherwise it seeds a new catalog in a temporary
// directory (about a minute and a half per million on two cores).
func scaleCatalog(t *testing.T, n int) (*store.Store, *storetest.Seeder) {
	t.Helper()
	ctx := context.Background()
	path := *scaleDB
	reuse := false
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			reuse = true
		}
	} else {
		path = filepath.Join(t.TempDir(), "scale.db")
	}
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if !reuse {
		return st, storetest.SeedScale(t, st, n, storetest.ScaleOptions{Total: n})
	}
	seeder, err := storetest.NewSeeder(ctx, st, storetest.ScaleOptions{Total: n})
	if err != nil {
		t.Fatal(err)
	}
	seeder.Skip(n)
	return st, seeder
}

// ingestAtRate keeps seeder writing perSecond messages a second (in steps
// every 100 ms, as the ingester writes what each poll finds) from another
// goroutine, for measuring reads while the catalog is being written (issue
// 18: 32 clients while ingesting 1,000 msg/s). stop ends it and returns how
// many messages it wrote and the first error; the seeder must not be used
// elsewhere until then.
func ingestAtRate(seeder *storetest.Seeder, perSecond int) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		const step = 100 * time.Millisecond
		per := max(perSecond/10, 1)
		t := time.NewTicker(step)
		defer t.Stop()
		// What the seeder committed, the pages of a Seed that stop
		// interrupted included.
		start := seeder.Written()
		for {
			select {
			case <-ctx.Done():
				done <- result{seeder.Written() - start, nil}
				return
			case <-t.C:
			}
			if err := seeder.Seed(ctx, per); err != nil {
				if ctx.Err() != nil {
					err = nil
				}
				done <- result{seeder.Written() - start, err}
				return
			}
		}
	}()
	return func() (int, error) {
		cancel()
		r := <-done
		return r.n, r.err
	}
}

// TestScaleIngestAtRate checks the hook the read-side measurements use:
// over a small catalog, a second of ingestAtRate at 1,000 msg/s writes
// about that many messages and the catalog counts them.
func TestScaleIngestAtRate(t *testing.T) {
	st, seeder := scaleCatalog(t, 2000)
	db, err := storetest.OpenSQL(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	present := func() int64 {
		var n int64
		if err := db.QueryRow(`SELECT sum(present) FROM catalog_counts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := present()
	stop := ingestAtRate(seeder, 1000)
	time.Sleep(time.Second)
	n, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if n < 300 || n > 1100 {
		t.Errorf("wrote %d messages in a second at 1,000 msg/s", n)
	}
	if got := present() - before; got != int64(n) {
		t.Errorf("the catalog gained %d present messages, the seeder wrote %d", got, n)
	}
}
