package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
)

// keyedAuditDB makes a database as serve would: a key file created beside
// it, the switch entry, then n job entries (entry 1 is the switch).
func keyedAuditDB(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dlqdash.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var notes []string
	l, err := openAuditLog(t.Context(), Config{DB: path}, st, func(p string) { notes = append(notes, p) })
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0] != path+".audit-key" {
		t.Fatalf("key created notes = %q", notes)
	}
	fi, err := os.Stat(notes[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	for i := range n {
		if _, err := l.Append(t.Context(), audit.Record{Action: audit.ActionJobPaused, Params: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	// A second start reuses the key: no new file, no second switch.
	if _, err := openAuditLog(t.Context(), Config{DB: path}, st, func(p string) { t.Errorf("key created again at %s", p) }); err != nil {
		t.Fatal(err)
	}
	return path
}

// rehashAuditFrom (after tamper) rewrites the chain from seq on with SHA-256 links, as
// someone holding only the database file would after changing an entry.
func rehashAuditFrom(t *testing.T, path string, from int64) {
	t.Helper()
	st, err := store.OpenReadOnly(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var es []audit.Entry
	err = st.ScanAudit(context.Background(), audit.Filter{}, func(e audit.Entry) error { es = append(es, e); return nil })
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for i := range es {
		if es[i].Seq < from {
			continue
		}
		if i > 0 {
			es[i].PrevHash = es[i-1].Hash
		}
		es[i].Hash = es[i].ComputeHash()
		stmts = append(stmts, fmt.Sprintf("UPDATE audit_log SET prev_hash = '%s', hash = '%s' WHERE seq = %d", es[i].PrevHash, es[i].Hash, es[i].Seq))
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

const insertJob = `INSERT INTO jobs (action, status, created_at, created_by) VALUES ('replay', 'completed', 0, 'local')`

func TestAuditKeyedVerifyCommand(t *testing.T) {
	verify := func(t *testing.T, wantCode int, wantOut string, args ...string) {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"audit", "verify"}, args...)...)
		if code != wantCode || !strings.Contains(out, wantOut) {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, wantCode, wantOut)
		}
	}
	t.Run("intact, head", func(t *testing.T) {
		path := keyedAuditDB(t, 5)
		code, head, _ := runCmd(t, "audit", "head", "--db", path)
		if code != exitOK || !strings.HasPrefix(head, "6:") || len(head) != len("6:")+64+1 {
			t.Fatalf("audit head: exit %d, %q", code, head)
		}
		verify(t, exitOK, "audit chain intact: 6 entries\nhead "+head[:len(head)-1]+" (audit key from "+path+".audit-key)\n", "--db", path)
		verify(t, exitOK, "intact", "--db", path, "--expect-head", head)
		// The key given by file elsewhere and by the environment works too.
		key, _ := os.ReadFile(path + ".audit-key")
		moved := filepath.Join(t.TempDir(), "key")
		if err := os.Rename(path+".audit-key", moved); err != nil {
			t.Fatal(err)
		}
		verify(t, exitOK, "intact", "--db", path, "--audit-key-file", moved)
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), []string{"audit", "verify", "--db", path}, env(envAuditKey, string(key)), &stdout, &stderr); code != exitOK {
			t.Fatalf("with %s: exit %d, %q %q", envAuditKey, code, stdout.String(), stderr.String())
		}
		// Without the key, the keyed part cannot be vouched for.
		verify(t, exitFailure, "audit chain broken at entry 1: the chain is keyed from here on", "--db", path)
		// Another key is named as such.
		other := filepath.Join(t.TempDir(), "other")
		os.WriteFile(other, []byte("a different key of enough length"), 0o600)
		verify(t, exitFailure, "audit chain broken at entry 1: it switched the chain to another audit key", "--db", path, "--audit-key-file", other)
	})
	t.Run("rewritten and rehashed", func(t *testing.T) {
		path := keyedAuditDB(t, 5)
		tamper(t, path, `UPDATE audit_log SET params = '{"i":99}' WHERE seq = 3`)
		rehashAuditFrom(t, path, 3)
		verify(t, exitFailure, "audit chain broken at entry 3: hash does not match its contents\n", "--db", path)
	})
	t.Run("tail cut", func(t *testing.T) {
		path := keyedAuditDB(t, 5)
		_, head, _ := runCmd(t, "audit", "head", "--db", path)
		tamper(t, path, `DELETE FROM audit_log WHERE seq > 4`)
		verify(t, exitOK, "audit chain intact: 4 entries", "--db", path)
		verify(t, exitFailure, "audit chain broken at entry 6: the chain ends at entry 4", "--db", path, "--expect-head", strings.TrimSpace(head))
	})
	t.Run("job without its creation entry", func(t *testing.T) {
		path := keyedAuditDB(t, 2)
		tamper(t, path, insertJob)
		verify(t, exitFailure, "audit chain broken: job 1 has no creation entry", "--db", path)
	})
	t.Run("emptied while jobs exist", func(t *testing.T) {
		path := keyedAuditDB(t, 2)
		tamper(t, path, insertJob, `DELETE FROM audit_log`)
		os.Remove(path + ".audit-key")
		verify(t, exitFailure, "audit chain broken: it is empty while job 1 exists", "--db", path)
	})
	t.Run("key given twice", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"audit", "verify", "--audit-key-file", "k"}, env(envAuditKey, "0123456789abcdef"), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), "give the audit key one way") {
			t.Fatalf("exit %d, %q", code, stderr.String())
		}
	})
	t.Run("bad expected head", func(t *testing.T) {
		code, _, errOut := runCmd(t, "audit", "verify", "--expect-head", "12")
		if code != exitUsage || !strings.Contains(errOut, "invalid --expect-head") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
	})
}

func TestAuditHeadLoggedPeriodically(t *testing.T) {
	path := keyedAuditDB(t, 1)
	st, err := store.OpenReadOnly(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- logAuditHeads(st, logger, 5*time.Millisecond)(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "msg=\"audit head\"") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := auditHead(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("msg=\"audit head\" seq=2 hash=%s", h.Hash); strings.Count(buf.String(), want) < 2 {
		t.Fatalf("log = %q, want twice %q", buf.String(), want)
	}
}

// A database from before the key: its SHA-256 entries verify as before, up
// to the switch entry the first keyed start records; rewriting an old
// entry and rehashing everything breaks the switch.
func TestAuditKeyUpgradesAnUnkeyedChain(t *testing.T) {
	path := auditDB(t, 10)
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := openAuditLog(t.Context(), Config{DB: path}, st, nil)
	if err == nil {
		_, err = l.Append(t.Context(), audit.Record{Action: audit.ActionJobPaused})
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "audit", "verify", "--db", path)
	if code != exitOK || !strings.HasPrefix(out, "audit chain intact: 12 entries\n") {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	tamper(t, path, `UPDATE audit_log SET actor = 'mallory' WHERE seq = 4`)
	rehashAuditFrom(t, path, 4)
	code, out, _ = runCmd(t, "audit", "verify", "--db", path)
	if code != exitFailure || out != "audit chain broken at entry 11: hash does not match its contents\n" {
		t.Fatalf("after rewriting an old entry: exit %d, %q", code, out)
	}
}
