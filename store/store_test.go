package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

func openTemp(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenMigrateReopen(t *testing.T) { ForEachEngine(t, testOpenMigrateReopen) }

func testOpenMigrateReopen(t *testing.T, engine string) {
	path := FreshTarget(t, engine)
	ctx := t.Context()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	v, err := s.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() || v < 1 {
		t.Fatalf("Version = %d, want %d", v, SchemaVersion())
	}
	if err := s.SetMeta(ctx, "greeting", "hello"); err != nil {
		t.Fatal(err)
	}
	ents, err := s.ListEntities(ctx)
	if err != nil || len(ents) != 0 {
		t.Fatalf("ListEntities = %d entities, %v; want 0, nil", len(ents), err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openTemp(t, path)
	got, err := s.Meta(ctx, "greeting")
	if err != nil || got != "hello" {
		t.Fatalf("after reopen Meta = %q, %v; want hello", got, err)
	}
	var rows int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows after reopen, want %d (each migration once)", rows, SchemaVersion())
	}
	if _, err := s.Meta(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Meta(missing) = %v, want ErrNotFound", err)
	}
}

func TestOddFileNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"with space.db", "we?ird.db", "hash#1.db", "pct%41.db"} {
		path := filepath.Join(dir, name)
		s := openTemp(t, path)
		if err := s.SetMeta(t.Context(), "k", "v"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: database not at its path: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); !strings.Contains(n, ".db") {
			t.Errorf("stray file %q", n)
		}
	}
}

func TestPragmas(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "p.db"))
	ctx := t.Context()
	check := func(pool, pragma, want string) {
		t.Helper()
		db := s.writer
		if pool == "reader" {
			db = s.reader
		}
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("%s PRAGMA %s: %v", pool, pragma, err)
		}
		if got != want {
			t.Errorf("%s PRAGMA %s = %q, want %q", pool, pragma, got, want)
		}
	}
	for _, pool := range []string{"writer", "reader"} {
		check(pool, "journal_mode", "wal")
		check(pool, "synchronous", "1")
		check(pool, "foreign_keys", "1")
		check(pool, "busy_timeout", "5000")
	}
	check("writer", "query_only", "0")
	check("reader", "query_only", "1")
}

func TestWriteThroughReadPoolFails(t *testing.T) { ForEachEngine(t, testWriteThroughReadPoolFails) }

func testWriteThroughReadPoolFails(t *testing.T, engine string) {
	s := OpenFresh(t, engine)
	ctx := t.Context()
	if _, err := s.reader.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('k', 'v')`); err == nil {
		t.Fatal("insert through the read pool succeeded; want a query_only error")
	}
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('k', 'v')`); err != nil {
		t.Fatalf("insert through the writer: %v", err)
	}
}

func TestSchemaTooNew(t *testing.T) { ForEachEngine(t, testSchemaTooNew) }

func testSchemaTooNew(t *testing.T, engine string) {
	path := FreshTarget(t, engine)
	ctx := t.Context()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	future := SchemaVersion() + 7
	if _, err := s.writer.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future', 0)`, future); err != nil {
		t.Fatal(err)
	}
	s.Close()

	_, err = Open(ctx, path, Options{})
	var tooNew *SchemaTooNewError
	if !errors.As(err, &tooNew) {
		t.Fatalf("Open = %v, want *SchemaTooNewError", err)
	}
	if tooNew.DatabaseVersion != future || tooNew.KnownVersion != SchemaVersion() {
		t.Fatalf("got versions %d/%d, want %d/%d", tooNew.DatabaseVersion, tooNew.KnownVersion, future, SchemaVersion())
	}
	for _, want := range []string{path, "version " + strconv.Itoa(future), "version " + strconv.Itoa(SchemaVersion())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestUnwritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing directory", filepath.Join(dir, "nope", "d.db"), "does not exist"},
		{"parent is a file", filepath.Join(file, "d.db"), "not a directory"},
		{"path is a directory", dir, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrUnwritable) {
				t.Errorf("error %v is not ErrUnwritable", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestLockedByAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locked.db")
	ctx := t.Context()
	holder := openTemp(t, path)

	// Hold the write lock the way another process would.
	conn, err := holder.writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)

	s, err := Open(ctx, path, Options{BusyTimeout: 50 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded while another connection held the write lock")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open = %v, want ErrLocked", err)
	}
	t.Logf("%v", err)
	// While it opens, only another process can hold the lock: the words
	// say so, name the file and what to do, and do not blame an indexer
	// the store does not run yet.
	for _, want := range []string{"50ms", "another process", path, "stop the other dlqdash", "try again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "indexer") {
		t.Errorf("error %q blames an indexer while the store was opening", err)
	}
}

// Once open, the store's own search indexer may hold the index file's
// lock (here its one connection does, as while it writes a batch): a job
// whose filter searches, and so indexes the tail in its own transaction,
// waits up to the store's busy timeout and then says that this dlqdash's
// indexer or another process held it, and what to do; not that another
// dlqdash surely did.
func TestLockedByOwnIndexer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "indexing.db")
	ctx := t.Context()
	s, err := Open(ctx, path, Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := s.idxdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `UPDATE idx.index_meta SET key = key WHERE 0`); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x", CreatedBy: "tester"},
		replay.Selection{Filter: &dlq.Filter{Query: "timeout"}}, 100)
	conn.ExecContext(context.Background(), `ROLLBACK`)
	conn.Close()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("CreateJob while the index file is locked = %v, want ErrLocked", err)
	}
	t.Logf("%v", err)
	for _, want := range []string{"create job", "50ms", "this dlqdash's own search indexer", "another process", IndexPath(path), "try again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "5s") {
		t.Errorf("error %q says the default busy timeout, not the store's", err)
	}
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name    string
		files   fstest.MapFS
		wantErr string
		want    []int
	}{
		{"ordered", fstest.MapFS{
			"migrations/0002_b.sql": {Data: []byte("B")},
			"migrations/0001_a.sql": {Data: []byte("A")},
		}, "", []int{1, 2}},
		{"gap", fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("A")},
			"migrations/0003_c.sql": {Data: []byte("C")},
		}, "expected version 2", nil},
		{"bad name", fstest.MapFS{
			"migrations/init.sql": {Data: []byte("A")},
		}, "positive number", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if len(got) != len(tt.want) || got[0] != 1 || got[len(got)-1] != len(tt.want) {
				t.Fatalf("versions = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := loadMigrations(migrationFiles); err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
}

func TestNowIsUsedForMigrationTimes(t *testing.T) {
	// Now is a field so tests can pin it; Open uses time.Now, so check the
	// recorded time is plausible rather than exact.
	before := time.Now().Add(-time.Minute).UnixMilli()
	s := openTemp(t, filepath.Join(t.TempDir(), "t.db"))
	var at int64
	if err := s.reader.QueryRowContext(t.Context(), `SELECT applied_at FROM schema_migrations WHERE version = 1`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if at < before {
		t.Fatalf("applied_at = %d, earlier than %d", at, before)
	}
	s.Now = func() time.Time { return time.UnixMilli(42) }
	if got := s.nowMillis(); got != 42 {
		t.Fatalf("nowMillis with pinned Now = %d, want 42", got)
	}
}
