//go:build scale

// The same scale measurements on both engines (issue 20): ingest into an
// empty catalog through the ingester's write path (storetest.Seeder), then
// list and search p95 over the catalog it wrote, SQLite then PostgreSQL in
// one run so that both share the machine's load:
//
//	go test -tags scale -run TestScaleEngines -timeout 60m -v ./store/ -scale.engines-n 100000
//
// PostgreSQL is a pgtest cluster (fsync off: a throwaway cluster; see
// pgtest) on a unix socket, vacuumed and analyzed after the load. The process's own CPU (getrusage) is the
// client's share; the server's is the CPU time of the cluster's processes
// (the test binary's descendants, from /proc), so the load-independent
// cost of a message is the sum.
package store_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

var (
	scaleEnginesN = flag.Int("scale.engines-n", 100_000, "messages TestScaleEngines ingests per engine")
	scalePGURL    = flag.String("scale.pg-url", "", "TestScalePostgresPlans: explain the queries on this PostgreSQL database (a filled catalog, for example the one BenchmarkConcurrentReads' -conc.pg-template keeps) instead of seeding a fresh one")
)

func TestScaleEngines(t *testing.T) {
	n := *scaleEnginesN
	for _, engine := range store.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, store.FreshTarget(t, engine), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			seeder, err := storetest.NewSeeder(ctx, st, storetest.ScaleOptions{Total: n})
			if err != nil {
				t.Fatal(err)
			}
			cpu0, srv0, start := processCPU(), serverCPU(), time.Now()
			if err := seeder.Seed(ctx, n); err != nil {
				t.Fatal(err)
			}
			wall, cpu, srv := time.Since(start), processCPU()-cpu0, serverCPU()-srv0
			t.Logf("%s: ingested %d messages in %s: %.0f msg/s; CPU per message %.1f µs in the process, %.1f µs in the server",
				engine, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(),
				float64(cpu.Microseconds())/float64(n), float64(srv.Microseconds())/float64(n))
			if engine == "postgres" {
				// Autovacuum vacuums and analyzes tables this size within a
				// minute of the load (PostgreSQL 13 and later vacuum after
				// inserts, setting the visibility map that index-only scans
				// need); the measurement does not wait for it.
				if err := store.WriterExecForTest(ctx, st, "VACUUM ANALYZE"); err != nil {
					t.Fatal(err)
				}
			}
			props := func(kv ...string) []dlq.PropertyMatch {
				var out []dlq.PropertyMatch
				for i := 0; i+1 < len(kv); i += 2 {
					out = append(out, dlq.PropertyMatch{Key: kv[i], Value: kv[i+1]})
				}
				return out
			}
			deep, _, err := st.ListMessages(ctx, dlq.Filter{}, 500, "")
			if err != nil || len(deep) == 0 {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name   string
				f      dlq.Filter
				cursor bool
			}{
				{"list: all", dlq.Filter{}, false},
				{"list: all, a page 2,000 rows deep", dlq.Filter{}, true},
				{"list: entity " + storetest.BigEntity, dlq.Filter{Entity: storetest.BigEntity}, false},
				{"list: subqueue transfer_dead_letter", dlq.Filter{SubQueue: dlq.SubQueueTransferDeadLetter}, false},
				{"filter: property region (30 %)", dlq.Filter{Properties: props("region", storetest.CommonRegion)}, false},
				{"filter: tenant-0009 + priority high", dlq.Filter{Properties: props("tenant", "tenant-0009", "priority", "high")}, false},
				{"filter: entity + reason SqlTimeout", dlq.Filter{Entity: storetest.BigEntity, Reason: "SqlTimeout"}, false},
				{"search: word in 1/3 of bodies", dlq.Filter{Query: storetest.CommonWord}, false},
				{"search: word in 1 %", dlq.Filter{Query: storetest.MidWord}, false},
				{"search: rare word", dlq.Filter{Query: storetest.RareWord}, false},
				{"search: entity + word in 1 %", dlq.Filter{Entity: storetest.BigEntity, Query: storetest.MidWord}, false},
			} {
				cursor := ""
				if c.cursor {
					// 2,000 rows in: four pages of 500.
					for range 4 {
						var next string
						if _, next, err = st.ListMessages(ctx, c.f, 500, cursor); err != nil {
							t.Fatal(err)
						}
						cursor = next
					}
				}
				var ds []time.Duration
				var rows int
				cpu0, srv0 := processCPU(), serverCPU()
				const runs = 60
				for range runs {
					t0 := time.Now()
					recs, _, err := st.ListMessages(ctx, c.f, store.DefaultListLimit, cursor)
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					ds = append(ds, time.Since(t0))
					rows = len(recs)
				}
				slices.Sort(ds)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				t.Logf("%s %-40s p50 %7.2f ms  p95 %7.2f ms  CPU/page %.2f ms process + %.2f ms server  (%d rows)",
					engine, c.name, ms(ds[len(ds)/2]), ms(ds[len(ds)*95/100]),
					ms((processCPU()-cpu0)/runs), ms((serverCPU()-srv0)/runs), rows)
			}
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time of this process's descendants that are still
// running (the pgtest cluster's postmaster and backends; the pools keep
// their connections), from /proc: utime + stime in clock ticks (100 Hz).
func serverCPU() time.Duration {
	parent := map[int]int{}
	ticks := map[int]int64{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		pid, _ := strconv.Atoi(s[:strings.IndexByte(s, ' ')])
		fields := strings.Fields(s[end+2:]) // from the state field (3rd)
		if len(fields) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		ut, _ := strconv.ParseInt(fields[11], 10, 64)
		stt, _ := strconv.ParseInt(fields[12], 10, 64)
		parent[pid], ticks[pid] = ppid, ut+stt
	}
	self := os.Getpid()
	var total int64
	for pid, t := range ticks {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				total += t
				break
			}
		}
	}
	return time.Duration(total) * 10 * time.Millisecond
}

// TestScalePostgresPlans logs PostgreSQL's plans (EXPLAIN ANALYZE) of the
// list queries that cost the most in TestScaleEngines, for each search
// strategy, on a catalog of -scale.engines-n messages, or on the catalog
// at -scale.pg-url.
func TestScalePostgresPlans(t *testing.T) {
	ctx := context.Background()
	target := *scalePGURL
	if target == "" {
		target = store.FreshTarget(t, "postgres")
	}
	st, err := store.Open(ctx, target, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if *scalePGURL == "" {
		storetest.SeedScale(t, st, *scaleEnginesN, storetest.ScaleOptions{Total: *scaleEnginesN})
		if err := store.WriterExecForTest(ctx, st, "VACUUM ANALYZE"); err != nil {
			t.Fatal(err)
		}
	}
	props := []dlq.PropertyMatch{{Key: "tenant", Value: "tenant-0009"}, {Key: "priority", Value: "high"}}
	for _, c := range []struct {
		name string
		f    dlq.Filter
	}{
		{"two properties", dlq.Filter{Properties: props}},
		{"common word", dlq.Filter{Query: storetest.CommonWord}},
		{"word in 1 %", dlq.Filter{Query: storetest.MidWord}},
		{"entity + word in 1 %", dlq.Filter{Entity: storetest.BigEntity, Query: storetest.MidWord}},
		{"entity + reason", dlq.Filter{Entity: storetest.BigEntity, Reason: "SqlTimeout"}},
		{"reason (the largest)", dlq.Filter{Reason: "MaxDeliveryCountExceeded"}},
		{"reason (rare)", dlq.Filter{Reason: "GdprErasure"}},
		{"reason of several groups", dlq.Filter{Reason: "HttpError"}},
	} {
		strategies := []string{"", "collect", "probe", "fetch"}
		if c.f.Query == "" && len(c.f.Properties) == 0 {
			strategies = []string{""} // no search to combine
		}
		for _, how := range strategies {
			restore := store.ForceSearchForTest(how)
			q, args, err := store.ListPageQueryForTest(ctx, st, c.f)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			rows, err := st.ReaderForTest().QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			var plan strings.Builder
			for rows.Next() {
				var line string
				rows.Scan(&line)
				plan.WriteString(line + "\n")
			}
			rows.Close()
			t.Logf("%s, strategy %q:\n%s\n%s", c.name, how, q, plan.String())
		}
	}
}

// TestScalePostgresSearchCost measures the search pages on the PostgreSQL
// catalog at -scale.pg-url (a filled one: see TestScalePostgresPlans): 40
// first pages of each, wall p50/p95 and CPU time a page in this process and
// in the server (every process of its cluster, from /proc: the cluster need
// not be this process's child), and checks each page against the one the
// walk asking about every row finds (ForceSearchForTest("probe")), which
// is right by construction.
func TestScalePostgresSearchCost(t *testing.T) {
	if *scalePGURL == "" {
		t.Skip("needs -scale.pg-url: a filled PostgreSQL catalog")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, *scalePGURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var backend int
	if err := st.ReaderForTest().QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	postmaster := procParent(backend)
	if postmaster <= 1 {
		t.Fatalf("the server's backend %d is not a process on this machine", backend)
	}
	ids := func(f dlq.Filter) []int64 {
		recs, _, err := st.ListMessages(ctx, f, store.DefaultListLimit, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    dlq.Filter
	}{
		{"search: word in 1/3 of bodies", dlq.Filter{Query: storetest.CommonWord}},
		{"search: word in 3 %", dlq.Filter{Query: storetest.MidWord}},
		{"search: rare word", dlq.Filter{Query: storetest.RareWord}},
		{"search: entity + word in 3 %", dlq.Filter{Entity: storetest.BigEntity, Query: storetest.MidWord}},
	} {
		restore := store.ForceSearchForTest("probe")
		want := ids(c.f)
		restore()
		got := ids(c.f)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the page is not the newest hits:\n got %v\nwant %v", c.name, got, want)
		}
		const runs = 40
		var ds []time.Duration
		cpu0, srv0 := processCPU(), clusterCPU(postmaster)
		for range runs {
			t0 := time.Now()
			ids(c.f)
			ds = append(ds, time.Since(t0))
		}
		cpu, srv := (processCPU()-cpu0)/runs, (clusterCPU(postmaster)-srv0)/runs
		slices.Sort(ds)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		t.Logf("%-32s p50 %7.2f ms  p95 %7.2f ms  CPU/page %.2f ms process + %.2f ms server  (%d rows)",
			c.name, ms(ds[len(ds)/2]), ms(ds[len(ds)*95/100]), ms(cpu), ms(srv), len(got))
	}
}

// procParent is the parent of process pid (0 if it cannot be read).
func procParent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 || end+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// clusterCPU is the CPU time of a PostgreSQL cluster: its postmaster (with
// the children it reaped) and its running children, from /proc in 10 ms
// ticks.
func clusterCPU(postmaster int) time.Duration {
	var ticks int64
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 || end+2 > len(s) {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 15 {
			continue
		}
		pid, _ := strconv.Atoi(s[:strings.IndexByte(s, ' ')])
		ppid, _ := strconv.Atoi(f[1])
		field := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
		switch {
		case pid == postmaster:
			ticks += field(11) + field(12) + field(13) + field(14)
		case ppid == postmaster:
			ticks += field(11) + field(12)
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
