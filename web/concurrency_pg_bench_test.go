package web

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/pgtest"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// postgresCatalog is BenchmarkConcurrentReads' catalog on PostgreSQL (issue
// 20): the generated million of storetest.Catalog, copied with
// store.CopyTo (the messages SQLite's run serves, with the same ids) and
// vacuumed and analyzed. Without -conc.pg-template it copies into a fresh
// database of a throwaway pgtest cluster (the copy takes several minutes);
// with it, the database at that URL keeps the copy (made on the first run)
// and each run clones it (CREATE DATABASE … TEMPLATE), as SQLite's run
// copies its file, so the ingest of one run is not in the next one's
// catalog. It returns the store and the CPU time of the cluster's processes
// so far (see clusterCPU).
func postgresCatalog(b *testing.B) (*store.Store, func() time.Duration) {
	ctx := context.Background()
	dsn := *concPGKeep
	if dsn == "" {
		dsn = pgtest.Start(b).Database(b)
		fillPostgres(b, dsn)
	} else {
		fillPostgres(b, dsn)
		dsn = cloneDatabase(b, dsn)
	}
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cpu, err := clusterCPU(ctx, dsn)
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	return st, cpu
}

// fillPostgres copies the generated catalog into the PostgreSQL database at
// dsn unless it has messages already.
func fillPostgres(b *testing.B, dsn string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var migrated, filled bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('messages') IS NOT NULL`).Scan(&migrated); err != nil {
		b.Fatal(err)
	}
	if migrated {
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages)`).Scan(&filled); err != nil {
			b.Fatal(err)
		}
	}
	if filled {
		return
	}
	// The catalog is a shared, read-only file: CopyTo reads a copy.
	src := filepath.Join(b.TempDir(), "catalog.db")
	if err := copyFile(storetest.Catalog(b, 1_000_000), src); err != nil {
		b.Fatal(err)
	}
	if err := copyFile(store.IndexPath(storetest.Catalog(b, 1_000_000)), store.IndexPath(src)); err != nil {
		b.Fatal(err)
	}
	from, err := store.Open(ctx, src, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer from.Close()
	to, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer to.Close()
	started := time.Now()
	b.Logf("copying the generated catalog into PostgreSQL (several minutes; -conc.pg-template keeps it)")
	last := ""
	err = from.CopyTo(ctx, to, func(p store.CopyProgress) {
		if p.Table != last && p.Copied == p.Total {
			b.Logf("copy: %s %d of %d (%s)", p.Table, p.Copied, p.Total, time.Since(started).Round(time.Second))
			last = p.Table
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	b.Logf("copied and vacuumed in %s", time.Since(started).Round(time.Second))
}

// cloneDatabase creates a copy of the database at dsn on the same server,
// dropped when b ends, and returns its URL. Nothing may be connected to the
// source meanwhile.
func cloneDatabase(b *testing.B, dsn string) string {
	ctx := context.Background()
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	src := strings.TrimPrefix(u.Path, "/")
	name := fmt.Sprintf("%s_run%d", src, os.Getpid())
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	started := time.Now()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{src}.Sanitize()+" STRATEGY FILE_COPY"); err != nil {
		b.Fatalf("clone %s: %v", src, err)
	}
	b.Logf("cloned %s in %s", src, time.Since(started).Round(time.Millisecond))
	b.Cleanup(func() {
		conn, err := pgx.Connect(ctx, admin.String())
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			b.Error(err)
		}
	})
	clone := *u
	clone.Path = "/" + name
	return clone.String()
}

// clusterCPU returns a function giving the CPU time, so far, of the
// PostgreSQL cluster serving dsn on this machine: its postmaster (with the
// children it has reaped) and every running child (backends, parallel
// workers, autovacuum, the writers), from /proc in clock ticks of 10 ms.
// The postmaster is the parent of a backend of dsn.
func clusterCPU(ctx context.Context, dsn string) (func() time.Duration, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, err
	}
	st, ok := procStat(backend)
	if !ok {
		return nil, fmt.Errorf("the server's backend %d is not a process on this machine: cannot measure its CPU", backend)
	}
	postmaster := st.ppid
	return func() time.Duration {
		var ticks int64
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			pid, err := strconv.Atoi(filepath.Base(d))
			if err != nil {
				continue
			}
			s, ok := procStat(pid)
			switch {
			case !ok:
			case pid == postmaster:
				ticks += s.utime + s.stime + s.cutime + s.cstime
			case s.ppid == postmaster:
				ticks += s.utime + s.stime
			}
		}
		return time.Duration(ticks) * 10 * time.Millisecond
	}, nil
}

type procStatFields struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads /proc/pid/stat.
func procStat(pid int) (procStatFields, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStatFields{}, false
	}
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 || end+2 > len(s) {
		return procStatFields{}, false
	}
	f := strings.Fields(s[end+2:]) // from the state (field 3)
	if len(f) < 15 {
		return procStatFields{}, false
	}
	var out procStatFields
	out.ppid, _ = strconv.Atoi(f[1])
	out.utime, _ = strconv.ParseInt(f[11], 10, 64)
	out.stime, _ = strconv.ParseInt(f[12], 10, 64)
	out.cutime, _ = strconv.ParseInt(f[13], 10, 64)
	out.cstime, _ = strconv.ParseInt(f[14], 10, 64)
	return out, true
}
