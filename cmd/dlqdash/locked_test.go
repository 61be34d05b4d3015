package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/store"
)

// A command on a SQLite file another process keeps locked fails (exit 1)
// after the busy timeout with one line saying who can hold it and what to
// do: stop the other dlqdash (or tool) using the file. It does not blame a
// search indexer the command never started.
func TestLockedDatabaseSaysWhatToDo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dlqdash.db")
	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	other, err := sql.Open("sqlite", db) // another process's connection
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)

	code, _, errOut := runCmd(t, "token", "create", "--db", db, "--name", "ci-bot", "--role", "viewer")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errOut)
	}
	line := strings.TrimRight(errOut, "\n")
	if strings.Contains(line, "\n") {
		t.Errorf("more than one line on stderr: %q", errOut)
	}
	for _, want := range []string{"dlqdash: token create:", "database is locked", "another process", db, "stop the other dlqdash", "try again"} {
		if !strings.Contains(line, want) {
			t.Errorf("stderr %q does not say %q", line, want)
		}
	}
	if strings.Contains(line, "indexer") {
		t.Errorf("stderr %q blames an indexer the command never started", line)
	}
}
