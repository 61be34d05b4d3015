//go:build scale

// The ingest at scale on PostgreSQL alone (issue 20's ingest row): the
// same write path and synthetic namespace as TestScaleEngines, without the
// reads after it, logged per tenth of the run with the CPU time a message
// costs in the test process and in the server:
//
//	DLQDASH_TEST_ENGINES=postgres go test -tags scale -run TestScalePostgresIngest -timeout 60m -v ./store/ -scale.engines-n 1000000
//
// -scale.cpuprofile (with -scale.profile-from and -scale.profile-to)
// profiles the process. With the cluster started with pg_stat_statements
// (DLQDASH_PGTEST_SETTINGS=shared_preload_libraries=pg_stat_statements) it
// logs the statements that took the server's time.
package store_test

import (
	"context"
	"flag"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

var scalePGParams = flag.String("scale.pg-params", "", "settings (name=value&...) added to the PostgreSQL URL of TestScalePostgresIngest's store: every session of its pools")

var scaleCloseAfterIngest = flag.Bool("scale.close-after-ingest", false, "TestScalePostgresIngest closes the store when the ingest ends, without waiting for the index (Close's bounded catch-up), then opens it again and times its indexer over what Close left")

var scalePGSQL = flag.String("scale.pg-sql", "", "statements (separated by ;) TestScalePostgresIngest runs on the fresh catalog before the ingest, to try settings")

func TestScalePostgresIngest(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	n := *scaleEnginesN
	ctx := context.Background()
	target := store.FreshTarget(t, "postgres")
	if *scalePGParams != "" {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + *scalePGParams
		t.Logf("sessions: %s", *scalePGParams)
	}
	st, err := store.Open(ctx, target, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, q := range strings.Split(*scalePGSQL, ";") {
		if q = strings.TrimSpace(q); q != "" {
			if err := store.WriterExecForTest(ctx, st, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			t.Logf("before the ingest: %s", q)
		}
	}
	statements := store.WriterExecForTest(ctx, st, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements") == nil &&
		store.WriterExecForTest(ctx, st, "SELECT pg_stat_statements_reset()") == nil
	if !statements {
		t.Log("pg_stat_statements is not loaded: no per-statement figures")
	}

	tenth := max(n/10, 1)
	var (
		start, last       time.Time
		lastCPU, lastSrv  time.Duration
		firstCPU, firstSv time.Duration
		lastDone          int
		profiling         bool
	)
	progress := func(done int) {
		now, cpu, srv := time.Now(), processCPU(), serverCPU()
		if done/tenth > lastDone/tenth || done == n {
			k := float64(done - lastDone)
			t.Logf("%8d messages: %6.0f msg/s over the last %d (CPU per message %5.1f µs process + %5.1f µs server); %6.0f msg/s overall",
				done, k/now.Sub(last).Seconds(), done-lastDone,
				float64((cpu-lastCPU).Microseconds())/k, float64((srv-lastSrv).Microseconds())/k,
				float64(done)/now.Sub(start).Seconds())
			last, lastCPU, lastSrv, lastDone = now, cpu, srv, done
		}
		if *scaleCPUProfile != "" && !profiling && done >= *scaleProfileFrom && done < *scaleProfileTo {
			f, err := os.Create(*scaleCPUProfile)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Fatal(err)
			}
			profiling = true
		}
		if profiling && done >= *scaleProfileTo {
			pprof.StopCPUProfile()
			profiling = false
			t.Log("profile written")
		}
	}
	seeder, err := storetest.NewSeeder(ctx, st, storetest.ScaleOptions{Total: n, Every: min(tenth, 10_000), Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	start, last = time.Now(), time.Now()
	firstCPU, firstSv = processCPU(), serverCPU()
	lastCPU, lastSrv = firstCPU, firstSv
	if err := seeder.Seed(ctx, n); err != nil {
		t.Fatal(err)
	}
	// The clock stops when the search documents and property rows cover
	// every message: the indexer writes them behind the ingest
	// (postgres_index.go), as the SQLite run's clock waits for its index.
	seeded := time.Since(start)
	if through, newest, err := store.IndexProgressForTest(ctx, st); err == nil {
		t.Logf("at the ingest's end the index covers %d of %d messages", through, newest)
	}
	if *scaleCloseAfterIngest {
		closing := time.Now()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		closed := time.Since(closing)
		if ro, err := store.OpenReadOnly(ctx, target, store.Options{}); err == nil {
			through, newest, _ := store.IndexProgressForTest(ctx, ro)
			ro.Close()
			t.Logf("Close left %d messages unindexed", newest-through)
		}
		reopened := time.Now()
		st, err = store.Open(ctx, target, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		through, newest, err := store.IndexProgressForTest(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		for through < newest { // the next start's indexer, unasked
			time.Sleep(50 * time.Millisecond)
			if through, newest, err = store.IndexProgressForTest(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("Close took %s; the next Open's indexer indexed what it left in %s", closed.Round(time.Millisecond),
			time.Since(reopened).Round(time.Millisecond))
	}
	if err := st.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the ingest ended after %s, the index %s later", seeded.Round(time.Millisecond), (time.Since(start) - seeded).Round(time.Millisecond))
	if profiling {
		pprof.StopCPUProfile()
	}
	wall, cpu, srv := time.Since(start), processCPU()-firstCPU, serverCPU()-firstSv
	t.Logf("postgres: ingested %d messages in %s: %.0f msg/s; CPU per message %.1f µs in the process + %.1f µs in the server = %.1f µs",
		n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(),
		float64(cpu.Microseconds())/float64(n), float64(srv.Microseconds())/float64(n),
		float64((cpu+srv).Microseconds())/float64(n))

	if statements {
		rows, err := st.ReaderForTest().QueryContext(ctx, `SELECT sum(calls), sum(total_exec_time + total_plan_time), sum(shared_blks_hit + shared_blks_read),
			sum(shared_blks_dirtied), sum(wal_bytes), left(regexp_replace(query, '\s+', ' ', 'g'), 70) AS q
			FROM pg_stat_statements GROUP BY q ORDER BY 2 DESC LIMIT 15`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var calls, blks, dirtied int64
			var ms, wal float64
			var q string
			if err := rows.Scan(&calls, &ms, &blks, &dirtied, &wal, &q); err != nil {
				t.Fatal(err)
			}
			t.Logf("%8.0f ms %6.1f µs/msg %7d calls %10d blocks %8d dirtied %7.0f B WAL/msg  %s",
				ms, ms*1000/float64(n), calls, blks, dirtied, wal/float64(n), q)
		}
	}
	var tables []string
	rows, err := st.ReaderForTest().QueryContext(ctx, `SELECT relname || ' ' || pg_size_pretty(pg_relation_size(oid))
		FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i')
		ORDER BY pg_relation_size(oid) DESC LIMIT 16`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		tables = append(tables, s)
	}
	rows.Close()
	t.Logf("largest relations: %v", tables)
}
