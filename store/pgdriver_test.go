package store

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRewritePlaceholders(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT ?, ?", "SELECT $1, $2"},
		{"WHERE a = ? AND b = '?' AND c = ?", "WHERE a = $1 AND b = '?' AND c = $2"},
		{"WHERE a = 'it''s ?' AND b = ?", "WHERE a = 'it''s ?' AND b = $1"},
		{`SELECT "odd?col" FROM t WHERE x = ?`, `SELECT "odd?col" FROM t WHERE x = $1`},
		{"SELECT ? -- why?\n, ?", "SELECT $1 -- why?\n, $2"},
		{"SELECT /* ? */ ?", "SELECT /* ? */ $1"},
		{"CREATE FUNCTION f() AS $$ SELECT '?' $$; SELECT ?", "CREATE FUNCTION f() AS $$ SELECT '?' $$; SELECT $1"},
		{"SELECT 'unterminated ?", "SELECT 'unterminated ?"},
		{"SELECT ? -- to the end ?", "SELECT $1 -- to the end ?"},
	} {
		if got := rewritePlaceholders(tt.in); got != tt.want {
			t.Errorf("rewritePlaceholders(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := pgSQL(tt.in); got != tt.want {
			t.Errorf("pgSQL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestMigrationTwins: every SQLite migration has its PostgreSQL twin, of
// the same number and name, and nothing else is there.
func TestMigrationTwins(t *testing.T) {
	names := func(dir string) []string {
		files, err := fs.Glob(migrationFiles, dir+"/*.sql")
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			files[i] = path.Base(f)
		}
		return files
	}
	lite, pgs := names(sqliteEngine.migrationDir()), names(postgresEngine.migrationDir())
	for _, n := range lite {
		if !slices.Contains(pgs, n) {
			t.Errorf("migration %s has no PostgreSQL twin: write store/migrations/postgres/%s (see the README there)", n, n)
		}
	}
	for _, n := range pgs {
		if !slices.Contains(lite, n) {
			t.Errorf("store/migrations/postgres/%s is the twin of no SQLite migration", n)
		}
	}
	if _, err := loadMigrationsIn(migrationFiles, postgresEngine.migrationDir()); err != nil {
		t.Fatal(err)
	}
}

func TestPGTextRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", "héllo ☃", "bad \xff reason", "nul\x00inside", "\xc3\x28", "\xf4\x8f\xbf\xbf literal byte rune",
		"\U0010FF41", "\xf4\x8f", "mixed \x00\xfe\U0010FFFF\U0010FEFF end", "\xed\xa0\x80 surrogate"} {
		enc := encodePGText(s)
		if !utf8.ValidString(enc) || strings.IndexByte(enc, 0) >= 0 {
			t.Errorf("encodePGText(%q) = %q: not valid UTF-8 without NUL", s, enc)
		}
		dec := enc
		if strings.Contains(enc, byteRunePrefix) {
			dec = decodePGText(enc)
		}
		if dec != s {
			t.Errorf("%q encodes to %q, decodes to %q", s, enc, dec)
		}
		if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && !strings.Contains(s, byteRunePrefix) && enc != s {
			t.Errorf("valid text %q changed to %q", s, enc)
		}
	}
}

// TestPostgresSchemaHasReplicaTables: the replicas' coordination runs on
// the store's own schema: store/replica's leases and job claims work on a
// database the store migrated.
func TestPostgresSchemaHasReplicaTables(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	s := OpenFresh(t, "postgres")
	ctx := t.Context()
	for _, q := range []string{
		`INSERT INTO leases (name, term, holder, acquired_at, renewed_at, expires_at) VALUES ('ingest:x', 1, 'r1', now(), now(), now())`,
		`INSERT INTO jobs (action, status, created_at, created_by) VALUES ('replay', 'queued', 0, 'test')`,
		`UPDATE jobs SET claimed_by = 'r1', claim_term = claim_term + 1, heartbeat_at = now()`,
	} {
		if _, err := s.writer.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestOpenReadOnlyPostgres: OpenReadOnly on PostgreSQL (export, audit
// verify beside a serving replica) reads a migrated database, writes
// nothing through either pool, and refuses a database without the schema
// or with a newer one.
func TestOpenReadOnlyPostgres(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	empty := FreshTarget(t, "postgres")
	if _, err := OpenReadOnly(ctx, empty, Options{}); err == nil || !strings.Contains(err.Error(), "not a dlqdash database") {
		t.Fatalf("an empty database: %v", err)
	}
	target := FreshTarget(t, "postgres")
	s, err := Open(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ro.Meta(ctx, "k"); err != nil || v != "v" {
		t.Errorf("Meta through the read-only store = %q, %v", v, err)
	}
	if err := ro.SetMeta(ctx, "k", "w"); err == nil {
		t.Error("a write through the read-only store succeeded")
	}
	ro.Close()
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)`,
		SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var tooNew *SchemaTooNewError
	if _, err := OpenReadOnly(ctx, target, Options{}); !errors.As(err, &tooNew) {
		t.Fatalf("a newer schema: %v", err)
	}
}

func TestTSVectorLiteral(t *testing.T) {
	got := tsvector("Order-123 failed: order é", "Timeout", "", `{"k":"it's"}`)
	want := `'timeout':1B 'k':4D 'it':5D 's':6D 'order':8A,11A '123':9A 'failed':10A 'e':12A`
	if got != want {
		t.Errorf("tsvector = %s\nwant       %s", got, want)
	}
	if q := (match{{cols: notBodyColumns, words: []searchWord{{text: "order-12", prefix: true}}}}).tsquery(); q != `('order':BCD <-> '12':*BCD)` {
		t.Errorf("tsquery = %s", q)
	}
}

func BenchmarkTSVector(b *testing.B) {
	body := strings.Repeat(`{"orderId":"ORD-2026-118","customer":"Müller GmbH","items":[{"sku":"A-17","qty":3}],"note":"pending backorder"} `, 8)
	b.ReportAllocs()
	for b.Loop() {
		tsvector(body, "MaxDeliveryCountExceeded", "Timeout after 30012 ms", `{"tenant":"t-9","region":"westeurope"}`)
	}
}
