package store

import (
	"io/fs"
	"path"
	"slices"
	"testing"
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
