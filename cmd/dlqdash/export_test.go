package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
	"github.com/dlqdash/dlqdash/web/apijson"
)

func TestParseExport(t *testing.T) {
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	until := time.Date(2026, 11, 22, 12, 0, 0, 0, time.FixedZone("", 3600))
	tests := []struct {
		name string
		args []string
		env  func(string) string
		db   string
		want ExportConfig
	}{
		{"defaults", []string{"export"}, env(), "./dlqdash.db", ExportConfig{Format: "jsonl"}},
		{"db from the environment", []string{"export"}, env(envDB, "/data/x.db"), "/data/x.db", ExportConfig{Format: "jsonl"}},
		{"flag wins", []string{"export", "--db", "flag.db"}, env(envDB, "/data/x.db"), "flag.db", ExportConfig{Format: "jsonl"}},
		{"every filter", []string{"export", "--db=a.db", "--format", "csv", "--entity", "payments/Subscriptions/audit",
			"--subqueue", "transfer_dead_letter", "--state", "deferred", "--reason", " Sql Timeout ", "--since", "2026-11-22T10:00:00Z",
			"--until", "2026-11-22T12:00:00+01:00", "--include-gone"}, env(), "a.db",
			ExportConfig{Format: "csv", Filter: dlq.Filter{Entity: "payments/Subscriptions/audit", SubQueue: dlq.SubQueueTransferDeadLetter,
				State: dlq.StateDeferred, Reason: " Sql Timeout ", Since: &since, Until: &until, IncludeGone: true}}},
		{"the message list's other keys", []string{"export", "--group", "g1", "--search", "tenant 42", "--property", "a=1", "--property", "b=2"}, env(), "./dlqdash.db",
			ExportConfig{Format: "jsonl", Filter: dlq.Filter{Group: "g1", Query: "tenant 42",
				Properties: []dlq.PropertyMatch{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}}}},
		{"include-gone=false", []string{"export", "--include-gone=false", "--format=JSONL"}, env(), "./dlqdash.db", ExportConfig{Format: "jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.Command != "export" || c.DB != tt.db {
				t.Errorf("command %q db %q", c.Command, c.DB)
			}
			got, want := c.Export, tt.want
			if (got.Filter.Since == nil) != (want.Filter.Since == nil) || (got.Filter.Since != nil && !got.Filter.Since.Equal(*want.Filter.Since)) ||
				(got.Filter.Until == nil) != (want.Filter.Until == nil) || (got.Filter.Until != nil && !got.Filter.Until.Equal(*want.Filter.Until)) {
				t.Errorf("times %v %v, want %v %v", got.Filter.Since, got.Filter.Until, want.Filter.Since, want.Filter.Until)
			}
			got.Filter.Since, got.Filter.Until, want.Filter.Since, want.Filter.Until = nil, nil, nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestExportUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"export", "--format", "xml"}, "--format"},
		{[]string{"export", "--subqueue", "dlq"}, "--subqueue"},
		{[]string{"export", "--state", "asleep"}, "--state"},
		{[]string{"export", "--since", "yesterday"}, "--since"},
		{[]string{"export", "--until", "2026-11-22"}, "--until"},
		{[]string{"export", "--property", "tenant"}, "--property"},
		{[]string{"export", "--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T09:00:00Z"}, "--until"},
		{[]string{"export", "--db", " "}, "database path"},
		{[]string{"export", "--q", "x"}, "unknown flag --q"},
		{[]string{"export", "extra"}, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, env(), &stdout, &stderr)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, stderr.String())
			}
			if n := strings.Count(stderr.String(), "\n"); n != 1 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q: want one line mentioning %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}

func TestExportHelp(t *testing.T) {
	var stdout bytes.Buffer
	if code := run(t.Context(), []string{"export", "-h"}, env(), &stdout, &bytes.Buffer{}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"dlqdash export", "--db", "env DLQDASH_DB, default ./dlqdash.db", "--format", "default jsonl",
		"--entity", "--subqueue", "--state", "--reason", "--group", "--search", "--property", "--since", "--until", "--include-gone"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "env ,") || strings.Contains(stdout.String(), "env \n") {
		t.Errorf("help shows an empty environment variable:\n%s", stdout.String())
	}
	var top bytes.Buffer
	run(t.Context(), []string{"-h"}, env(), &top, &bytes.Buffer{})
	if !strings.Contains(top.String(), "export") {
		t.Errorf("top help lacks export:\n%s", top.String())
	}
}

// exportDB makes a catalog with known messages and returns its path and the
// records (IDs set).
func exportDB(t *testing.T) (string, []dlq.Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "export.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var recs []dlq.Record
	for i := range 40 {
		at := base.Add(time.Duration(i) * time.Minute)
		r := dlq.Record{
			Entity:   []string{"orders", "payments/Subscriptions/audit"}[i%2],
			SubQueue: dlq.SubQueueDeadLetter,
			Message: dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprintf("m%d", i),
				EnqueuedAt: &at, DeadLetterReason: ptrTo([]string{"SqlTimeout", "Bad,\"quoted\"\nreason"}[i%2]),
				ApplicationProperties: dlq.EncodeProperties(map[string]any{"i": i, "big": uint64(1<<64 - 1)}),
				Body:                  []byte(fmt.Sprintf("{\"i\":%d, \"text\":\"line1\\nline2 <b>\"}", i))},
			FirstSeenAt: at.Add(time.Second), LastSeenAt: at.Add(time.Minute),
		}
		switch {
		case i == 5:
			r.Body = []byte{0, 0xff, 1}
		case i == 6:
			r.GoneAt = ptrTo(at.Add(time.Hour))
		case i%10 == 9:
			r.SubQueue, r.State, r.DeadLetterReason = dlq.SubQueueMain, dlq.StateDeferred, nil
		}
		recs = append(recs, r)
	}
	ids := storetest.Insert(t, path, recs...)
	for i := range recs {
		recs[i].ID = ids[i]
	}
	return path, recs
}

func ptrTo[T any](v T) *T { return &v }

func TestExportJSONL(t *testing.T) {
	path, recs := exportDB(t)
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"export", "--db", path}, env(), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q", stderr.String())
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	var want []dlq.Record
	for _, r := range recs {
		if r.GoneAt == nil {
			want = append(want, r)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i, m := range lines {
		r := want[i]
		if m["id"] != strconv.FormatInt(r.ID, 10) {
			t.Fatalf("line %d: id %v, want %d (id order)", i, m["id"], r.ID)
		}
		body, err := base64.StdEncoding.DecodeString(m["body_base64"].(string))
		if err != nil || !bytes.Equal(body, r.Body) {
			t.Errorf("message %d: body %q, want %q", r.ID, body, r.Body)
		}
		if m["entity"] != r.Entity || m["message_id"] != r.MessageID {
			t.Errorf("message %d: %v", r.ID, m)
		}
		props := m["application_properties"].(map[string]any)
		if props["big"] != json.Number("18446744073709551615") {
			t.Errorf("big property %v", props["big"])
		}
	}
	// The keys are the API's message object's, body_base64 included.
	apiKeys := jsonKeys(t, apijson.NewMessage(recs[0], true))
	lineKeys := slices.Sorted(mapKeys(lines[0]))
	if !slices.Equal(apiKeys, lineKeys) {
		t.Errorf("keys %v, want %v", lineKeys, apiKeys)
	}
	// Markup in message data is escaped in the JSON text.
	if strings.Contains(stdout.String(), "<b>") {
		t.Error("raw markup in the export")
	}
}

func jsonKeys(t *testing.T, v any) []string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return slices.Sorted(mapKeys(m))
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestExportCSV(t *testing.T) {
	path, recs := exportDB(t)
	var stdout, stderr bytes.Buffer
	args := []string{"export", "--db", path, "--format", "csv", "--include-gone"}
	if code := run(t.Context(), args, env(), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rows, err := csv.NewReader(&stdout).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := rows[0]
	// The columns are the message object's keys, in order, without the body
	// and the properties.
	var want []string
	mt := reflect.TypeOf(apijson.Message{})
	for i := range mt.NumField() {
		name, _, _ := strings.Cut(mt.Field(i).Tag.Get("json"), ",")
		if name != "body_base64" && name != "application_properties" {
			want = append(want, name)
		}
	}
	if !slices.Equal(header, want) {
		t.Fatalf("header %v, want %v", header, want)
	}
	if len(rows)-1 != len(recs) {
		t.Fatalf("%d rows, want %d", len(rows)-1, len(recs))
	}
	col := func(name string) int { return slices.Index(header, name) }
	for i, row := range rows[1:] {
		r := recs[i]
		if len(row) != len(header) {
			t.Fatalf("row %d has %d fields", i, len(row))
		}
		reason := ""
		if r.DeadLetterReason != nil {
			reason = *r.DeadLetterReason
		}
		if row[col("id")] != strconv.FormatInt(r.ID, 10) || row[col("dead_letter_reason")] != reason ||
			row[col("enqueued_at")] != r.EnqueuedAt.Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("row %d = %v", i, row)
		}
		if (r.GoneAt == nil) != (row[col("gone_at")] == "") || row[col("correlation_id")] != "" {
			t.Errorf("row %d nulls: %v", i, row)
		}
	}
}

func TestExportFilters(t *testing.T) {
	path, recs := exportDB(t)
	count := func(args ...string) int {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), append([]string{"export", "--db", path}, args...), env(), &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		return strings.Count(stdout.String(), "\n")
	}
	want := func(keep func(dlq.Record) bool) int {
		n := 0
		for _, r := range recs {
			if keep(r) {
				n++
			}
		}
		return n
	}
	present := func(r dlq.Record) bool { return r.GoneAt == nil }
	tests := []struct {
		args []string
		keep func(dlq.Record) bool
	}{
		{nil, present},
		{[]string{"--include-gone"}, func(dlq.Record) bool { return true }},
		{[]string{"--entity", "orders"}, func(r dlq.Record) bool { return present(r) && r.Entity == "orders" }},
		{[]string{"--subqueue", "main"}, func(r dlq.Record) bool { return present(r) && r.SubQueue == dlq.SubQueueMain }},
		{[]string{"--state", "deferred"}, func(r dlq.Record) bool { return present(r) && r.State == dlq.StateDeferred }},
		{[]string{"--reason", "SqlTimeout"}, func(r dlq.Record) bool {
			return present(r) && r.DeadLetterReason != nil && *r.DeadLetterReason == "SqlTimeout"
		}},
		{[]string{"--since", "2026-11-22T10:10:00Z", "--until", "2026-11-22T10:20:00Z"}, func(r dlq.Record) bool {
			return present(r) && r.EnqueuedAt.Minute() >= 10 && r.EnqueuedAt.Minute() < 20
		}},
		{[]string{"--entity", "orders", "--reason", "NoSuchReason"}, func(dlq.Record) bool { return false }},
		// The message list's other keys, from dlq's one table of them.
		{[]string{"--property", "i=12"}, func(r dlq.Record) bool { return present(r) && r.SequenceNumber == 13 }},
		{[]string{"--search", "SqlTimeout", "--entity", "orders"}, func(r dlq.Record) bool {
			return present(r) && r.Entity == "orders" && r.DeadLetterReason != nil && *r.DeadLetterReason == "SqlTimeout"
		}},
	}
	for _, tt := range tests {
		if got, w := count(tt.args...), want(tt.keep); got != w {
			t.Errorf("%v: %d messages, want %d", tt.args, got, w)
		}
	}
}

// An entity the catalog never saw is a mistake to say, not an empty
// export: exit 1 with the API's words, nothing on stdout.
func TestExportUnknownEntity(t *testing.T) {
	path, _ := exportDB(t)
	for _, format := range []string{"jsonl", "csv"} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"export", "--db", path, "--format", format, "--entity", "nosuch"}, env(), &stdout, &stderr)
		if code != exitFailure || !strings.Contains(stderr.String(), "no entity 'nosuch' in the catalog") {
			t.Errorf("%s: exit %d, stderr %q; want %d and the entity named", format, code, stderr.String(), exitFailure)
		}
		if format == "jsonl" && stdout.Len() != 0 {
			t.Errorf("%s: stdout %q, want nothing", format, stdout.String())
		}
	}
}

func TestExportDatabaseProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"export", "--db", missing}, env(), &stdout, &stderr); code != exitFailure ||
		!strings.Contains(stderr.String(), "does not exist") {
		t.Errorf("missing database: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("export created the database file")
	}

	// A database at an older schema: export says so and changes nothing.
	old := filepath.Join(dir, "old.db")
	st, err := store.Open(t.Context(), old, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := storetest.OpenSQL(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `DELETE FROM schema_migrations WHERE version = ?`, store.SchemaVersion()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	stderr.Reset()
	if code := run(t.Context(), []string{"export", "--db", old}, env(), &stdout, &stderr); code != exitFailure ||
		!strings.Contains(stderr.String(), fmt.Sprintf("schema version %d", store.SchemaVersion()-1)) {
		t.Errorf("old schema: exit %d, %q", code, stderr.String())
	}
	db, _ = storetest.OpenSQL(old)
	defer db.Close()
	var v int
	db.QueryRowContext(t.Context(), `SELECT max(version) FROM schema_migrations`).Scan(&v)
	if v != store.SchemaVersion()-1 {
		t.Errorf("export migrated the database to %d", v)
	}
}

// Export runs beside a serving dlqdash: a writer holding the write lock, in
// the middle of a transaction, neither blocks nor is blocked by it.
func TestExportWhileServing(t *testing.T) {
	path, recs := exportDB(t)
	srv, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	db, err := storetest.OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `UPDATE messages SET replay_count = 9`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"export", "--db", path, "--include-gone"}, env(), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != len(recs) {
		t.Errorf("%d lines, want %d", n, len(recs))
	}
	if strings.Contains(stdout.String(), `"replay_count":9`) {
		t.Error("export saw an uncommitted write")
	}
	if _, err := conn.ExecContext(t.Context(), `COMMIT`); err != nil {
		t.Fatalf("the writer could not commit after the export: %v", err)
	}
	if err := srv.SetMeta(t.Context(), "k", "v"); err != nil {
		t.Fatalf("serve's writer blocked: %v", err)
	}
}
