package main

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
)

// auditDB makes a database whose audit trail holds n entries, one a minute
// from 2026-11-22T10:00:00Z.
func auditDB(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dlqdash.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := audit.New(st)
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range n {
		l.Now = func() time.Time { return base.Add(time.Duration(i) * time.Minute) }
		if _, err := l.Append(t.Context(), audit.Record{Action: audit.ActionReplay,
			Params: map[string]any{"job_id": "j1", "note": "a,\"quoted\"\nline <b>"}, MessageIDs: []string{strconv.Itoa(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, env(), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// tamper runs SQL on the file as an attacker with file access would: with
// the append-only triggers dropped.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range append([]string{"DROP TRIGGER audit_log_no_update", "DROP TRIGGER audit_log_no_delete"}, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestAuditVerifyCommand(t *testing.T) {
	t.Run("intact", func(t *testing.T) {
		path := auditDB(t, 60)
		code, out, errOut := runCmd(t, "audit", "verify", "--db", path)
		if code != exitOK || !strings.HasPrefix(out, "audit chain intact: 60 entries\nhead 60:") || errOut != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("empty", func(t *testing.T) {
		path := auditDB(t, 0)
		if code, out, _ := runCmd(t, "audit", "verify", "--db", path); code != exitOK || out != "audit chain intact: 0 entries\nhead 0:"+audit.GenesisHash+" (no audit key found: checked as unkeyed SHA-256)\n" {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})
	for _, tt := range []struct {
		name string
		sql  string
		want string
	}{
		{"params changed", `UPDATE audit_log SET params = '{"job_id":"j2"}' WHERE seq = 42`,
			"audit chain broken at entry 42: hash does not match its contents\n"},
		{"prev link changed", `UPDATE audit_log SET prev_hash = hash WHERE seq = 10`,
			"audit chain broken at entry 10: prev_hash does not match the hash of the entry before it\n"},
		{"entry deleted", `DELETE FROM audit_log WHERE seq = 30`,
			"audit chain broken at entry 31: entries from 30 are missing before it\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := auditDB(t, 60)
			tamper(t, path, tt.sql)
			code, out, errOut := runCmd(t, "audit", "verify", "--db", path)
			if code != exitFailure || out != tt.want || errOut != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1, %q", code, out, errOut, tt.want)
			}
		})
	}
	t.Run("no database", func(t *testing.T) {
		code, out, errOut := runCmd(t, "audit", "verify", "--db", filepath.Join(t.TempDir(), "none.db"))
		if code != exitFailure || out != "" || !strings.Contains(errOut, "does not exist") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

func TestAuditCommandUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"audit"}, "missing audit subcommand: want dlqdash audit <verify|export|head> [flags]; run 'dlqdash audit -h' for help"},
		{[]string{"audit", "check"}, `unknown audit subcommand "check": want verify, export or head; run 'dlqdash audit -h' for help`},
		{[]string{"audit", "--db", "x.db", "verify"}, "flag --db given before the audit subcommand: want dlqdash audit <verify|export|head> [flags]; run 'dlqdash audit -h' for help"},
		{[]string{"audit", "verify", "extra"}, "audit verify takes no arguments, got 1"},
		{[]string{"audit", "verify", "--format", "csv"}, "unknown flag --format; run 'dlqdash audit verify -h' for help"},
		{[]string{"audit", "export", "--format", "xml"}, `invalid --format "xml": want jsonl or csv; run 'dlqdash audit export -h' for help`},
		{[]string{"audit", "export", "--since", "yesterday"}, `invalid --since "yesterday"`},
		{[]string{"audit", "export", "--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T09:00:00Z"}, "--until must be after --since"},
		{[]string{"audit", "verify", "--db", " "}, "empty database path from --db"},
	} {
		code, out, errOut := runCmd(t, tt.args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, "dlqdash: ") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "-h"}, "Usage:\n  dlqdash audit <verify|export|head> [flags]"},
		{[]string{"help", "audit"}, "dlqdash audit <verify|export|head>"},
		{[]string{"audit", "verify", "-h"}, "Usage:\n  dlqdash audit verify [flags]"},
		{[]string{"help", "audit", "export"}, "--format"},
		{[]string{"-h"}, "  audit export  write the audit trail"},
	} {
		code, out, errOut := runCmd(t, tt.args...)
		if code != exitOK || !strings.Contains(out, tt.want) || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

func TestAuditExportCommand(t *testing.T) {
	path := auditDB(t, 10)
	t.Run("jsonl", func(t *testing.T) {
		code, out, errOut := runCmd(t, "audit", "export", "--db", path)
		if code != exitOK || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 10 {
			t.Fatalf("%d lines", len(lines))
		}
		var first map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
			t.Fatal(err)
		}
		keys := []string{"action", "actor", "at", "hash", "message_ids", "outcome", "params", "prev_hash", "seq"}
		if got := slices.Sorted(maps.Keys(first)); !reflect.DeepEqual(got, keys) {
			t.Fatalf("keys %v, want %v", got, keys)
		}
		if first["seq"] != 1.0 || first["at"] != "2026-11-22T10:00:00.000Z" || first["actor"] != "local" ||
			first["prev_hash"] != audit.GenesisHash || !reflect.DeepEqual(first["message_ids"], []any{"1"}) {
			t.Fatalf("first entry %v", first)
		}
		// The exported entries verify on their own: the params are the
		// bytes that were hashed.
		prev := audit.GenesisHash
		for i, line := range lines {
			var e struct {
				Seq        int64           `json:"seq"`
				At         time.Time       `json:"at"`
				Actor      string          `json:"actor"`
				Action     string          `json:"action"`
				Params     json.RawMessage `json:"params"`
				MessageIDs []string        `json:"message_ids"`
				Outcome    string          `json:"outcome"`
				PrevHash   string          `json:"prev_hash"`
				Hash       string          `json:"hash"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			ae := audit.Entry{Seq: e.Seq, At: e.At, Actor: e.Actor, Action: e.Action, Params: e.Params,
				MessageIDs: e.MessageIDs, Outcome: e.Outcome, PrevHash: e.PrevHash}
			if e.Seq != int64(i+1) || e.PrevHash != prev || ae.ComputeHash() != e.Hash {
				t.Fatalf("line %d does not verify: %s", i, line)
			}
			prev = e.Hash
		}
	})
	t.Run("csv with a window", func(t *testing.T) {
		code, out, errOut := runCmd(t, "audit", "export", "--db", path, "--format", "csv",
			"--since", "2026-11-22T10:03:00Z", "--until", "2026-11-22T10:06:00Z")
		if code != exitOK || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"seq", "at", "actor", "action", "params", "message_ids", "outcome", "prev_hash", "hash"}; !reflect.DeepEqual(recs[0], want) {
			t.Fatalf("header %v", recs[0])
		}
		if len(recs) != 4 || recs[1][0] != "4" || recs[3][0] != "6" || recs[1][1] != "2026-11-22T10:03:00.000Z" ||
			recs[1][5] != `["4"]` || !strings.Contains(recs[1][4], `"note":"a,\"quoted\"\nline \u003cb\u003e"`) || recs[1][6] != "succeeded" {
			t.Fatalf("rows %q", recs[1:])
		}
	})
}

// audit verify reports a job whose status (completed, cancelled, paused)
// no entry records: a gap made by hand, as a crash between a status and
// its entry left one before they were one transaction. With the entry
// appended, the same database verifies.
func TestAuditVerifyJobStatusEntries(t *testing.T) {
	for _, tt := range []struct {
		status, action string
	}{
		{"completed", audit.ActionJobCompleted},
		{"cancelled", audit.ActionJobCancelled},
		{"cancelling", audit.ActionJobCancelled},
		{"paused", audit.ActionJobPaused},
	} {
		t.Run(tt.status, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dlqdash.db")
			st, err := store.Open(t.Context(), path, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			l := audit.New(st)
			appendEntry := func(action string) {
				t.Helper()
				if _, err := l.Append(t.Context(), audit.Record{Action: action, Params: map[string]any{"job_id": "1"}}); err != nil {
					t.Fatal(err)
				}
			}
			appendEntry(audit.ActionReplayJobCreated)
			// Another job's end does not count for job 1.
			if _, err := l.Append(t.Context(), audit.Record{Action: tt.action, Params: map[string]any{"job_id": "2"}}); err != nil {
				t.Fatal(err)
			}
			tamper(t, path, `INSERT INTO jobs (action, status, created_at, created_by) VALUES ('replay', '`+tt.status+`', 0, 'local')`)
			code, out, errOut := runCmd(t, "audit", "verify", "--db", path)
			want := "audit chain broken: job 1 is " + tt.status + ", but no " + tt.action + " entry records it"
			if code != exitFailure || !strings.HasPrefix(out, want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
			}
			appendEntry(tt.action)
			if code, out, errOut := runCmd(t, "audit", "verify", "--db", path); code != exitOK || !strings.HasPrefix(out, "audit chain intact: 3 entries") {
				t.Fatalf("with the entry: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}
