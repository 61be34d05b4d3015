package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/store/pgtest"
)

// The conformance suite: tests that run through ForEachEngine run the same
// assertions on SQLite and on PostgreSQL, so that no behaviour of the store
// exists in one engine only. PostgreSQL comes from pgtest: one cluster per
// test binary, a fresh database per test; outside CI a missing PostgreSQL
// skips those subtests, under CI (CI=true) it fails them.
// DLQDASH_TEST_ENGINES=sqlite (or postgres) runs one engine only.

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// Engines are the engines the conformance suite runs on.
func Engines() []string {
	all := []string{"sqlite", "postgres"}
	if only := os.Getenv("DLQDASH_TEST_ENGINES"); only != "" {
		return slices.DeleteFunc(all, func(e string) bool { return !slices.Contains(strings.Split(only, ","), e) })
	}
	return all
}

// ForEachEngine runs fn as a subtest per engine (named after it).
func ForEachEngine(t *testing.T, fn func(t *testing.T, engine string)) {
	t.Helper()
	for _, e := range Engines() {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

// FreshTarget is what Open takes for a fresh, empty database of engine: a
// file in a temporary directory, or a new database on the shared cluster.
func FreshTarget(t testing.TB, engine string) string {
	t.Helper()
	if engine == "postgres" {
		return pg.Database(t)
	}
	return filepath.Join(t.TempDir(), "catalog.db")
}

// OpenFresh opens a fresh store of engine, closed when the test ends.
func OpenFresh(t testing.TB, engine string) *Store {
	t.Helper()
	target := FreshTarget(t, engine)
	s, err := Open(t.Context(), target, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", target, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
