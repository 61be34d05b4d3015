package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
)

// appendJob records a job as the engine does: its creation (the selection),
// per-batch entries of its messages, a failure batch, its completion.
func appendJob(t testing.TB, l *audit.Log, job, ns, actor string, messages, batch int) {
	t.Helper()
	ctx := context.Background()
	var sel []string
	for i := range messages {
		sel = append(sel, job+"-"+strconv.Itoa(i))
	}
	must := func(r audit.Record) {
		t.Helper()
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	must(audit.Record{Actor: actor, Action: audit.ActionReplayJobCreated, MessageIDs: sel,
		Params: map[string]any{"job_id": job, "namespace": ns, "total": messages}})
	for i := 0; i < messages; i += batch {
		must(audit.Record{Actor: actor, Action: audit.ActionReplay, MessageIDs: sel[i:min(i+batch, messages)],
			Params: map[string]any{"job_id": job, "namespace": ns, "source": "orders/$DeadLetterQueue"}})
		if i == batch {
			// A failure between two batches: an action of its own.
			must(audit.Record{Actor: "dlqdash", Action: audit.ActionMessageFailed, MessageIDs: []string{"x" + job},
				Outcome: audit.OutcomeFailed, Params: map[string]any{"job_id": job, "namespace": ns}})
		}
	}
	must(audit.Record{Actor: "dlqdash", Action: audit.ActionJobCompleted, Params: map[string]any{"job_id": job, "namespace": ns}})
}

func TestAuditActionsGroupPerJobAction(t *testing.T) {
	ForEachEngine(t, testAuditActionsGroupPerJobAction)
}

func testAuditActionsGroupPerJobAction(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	if _, err := l.Append(ctx, audit.Record{Actor: "oidc:alice", Action: audit.ActionLogin}); err != nil {
		t.Fatal(err)
	}
	appendJob(t, l, "1", "prod", "oidc:alice", 10, 3) // entries 2..; batches 3,3,3,1
	appendJob(t, l, "2", "test", "oidc:bob", 4, 2)
	if _, err := l.Append(ctx, audit.Record{Actor: "oidc:bob", Action: audit.ActionLogout}); err != nil {
		t.Fatal(err)
	}
	// The grouping is a read-side view: the chain is intact and whole.
	if n, err := l.Verify(ctx, nil); err != nil || n != 1+7+5+1 {
		t.Fatalf("Verify = %d, %v", n, err)
	}
	rows, next, err := s.ListAuditActions(ctx, audit.Filter{}, 50, "")
	if err != nil || next != "" {
		t.Fatalf("ListAuditActions: %v, next %q", err, next)
	}
	type row struct {
		action, actor, job string
		entries, messages  int64
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Action, r.Actor, r.JobID, r.Entries, r.Messages})
	}
	want := []row{
		{audit.ActionLogout, "oidc:bob", "", 1, 0},
		{audit.ActionJobCompleted, "dlqdash", "2", 1, 0},
		{audit.ActionMessageFailed, "dlqdash", "2", 1, 1},
		{audit.ActionReplay, "oidc:bob", "2", 2, 4},
		{audit.ActionReplayJobCreated, "oidc:bob", "2", 1, 4},
		{audit.ActionJobCompleted, "dlqdash", "1", 1, 0},
		{audit.ActionMessageFailed, "dlqdash", "1", 1, 1},
		{audit.ActionReplay, "oidc:alice", "1", 4, 10},
		{audit.ActionReplayJobCreated, "oidc:alice", "1", 1, 10},
		{audit.ActionLogin, "oidc:alice", "", 1, 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("actions =\n%v\nwant\n%v", got, want)
	}
	// The grouped replay of job 1: its first entry's seq, params and hash,
	// its newest entry's seq.
	r := rows[7]
	if r.ID != 3 || r.LastSeq != 7 || r.Namespace != "prod" || r.Hash == "" || string(r.Params) != `{"job_id":"1","namespace":"prod","source":"orders/$DeadLetterQueue"}` {
		t.Fatalf("replay action = %+v", r)
	}
	one, err := s.AuditAction(ctx, r.ID)
	if err != nil || fmt.Sprint(one) != fmt.Sprint(r) {
		t.Fatalf("AuditAction = %+v, %v; want %+v", one, err, r)
	}
	if _, err := s.AuditAction(ctx, 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AuditAction(an entry grouped under another) = %v, want ErrNotFound", err)
	}
}

func TestAuditActionsFiltersAndPages(t *testing.T) { ForEachEngine(t, testAuditActionsFiltersAndPages) }

func testAuditActionsFiltersAndPages(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := base
	l.Now = func() time.Time { now = now.Add(time.Minute); return now }
	appendJob(t, l, "1", "prod", "oidc:alice", 10, 3) // 10:01..10:07
	appendJob(t, l, "2", "test", "oidc:bob", 4, 2)    // 10:08..10:12
	if _, err := l.Append(ctx, audit.Record{Actor: "oidc:bob", Action: audit.ActionLogout}); err != nil {
		t.Fatal(err)
	}
	since, until := base.Add(5*time.Minute), base.Add(9*time.Minute)
	tests := []struct {
		name string
		f    audit.Filter
		want []string // action@job, newest first
	}{
		{"job", audit.Filter{Job: "1"}, []string{"job_completed@1", "message_failed@1", "replay@1", "replay_job_created@1"}},
		{"actor", audit.Filter{Actor: "oidc:bob"}, []string{"logout@", "replay@2", "replay_job_created@2"}},
		{"action", audit.Filter{Action: audit.ActionReplay}, []string{"replay@2", "replay@1"}},
		{"namespace", audit.Filter{Namespace: "test"}, []string{"job_completed@2", "message_failed@2", "replay@2", "replay_job_created@2"}},
		{"visible", audit.Filter{Visible: []string{"test"}}, []string{"logout@", "job_completed@2", "message_failed@2", "replay@2", "replay_job_created@2"}},
		// Actions with an entry in [10:05, 10:09): job 1's replay
		// (10:02-10:06), its completion (10:07), job 2's creation
		// (10:08); not its replay, from 10:09, nor job 1's failure at
		// 10:04.
		{"time", audit.Filter{Since: &since, Until: &until}, []string{"replay_job_created@2", "job_completed@1", "replay@1"}},
		{"job and action", audit.Filter{Job: "2", Action: audit.ActionMessageFailed}, []string{"message_failed@2"}},
		{"none", audit.Filter{Job: "3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				rows, next, err := s.ListAuditActions(ctx, tt.f, 2, cursor)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > 2 || pages > 10 {
					t.Fatalf("page of %d rows, %d pages", len(rows), pages)
				}
				for _, r := range rows {
					got = append(got, r.Action+"@"+r.JobID)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("actions = %v, want %v", got, tt.want)
			}
		})
	}
	// The entries' own list and the export take the job filter too.
	es, _, err := s.ListAudit(ctx, audit.Filter{Job: "2", Action: audit.ActionReplay}, 50, "")
	if err != nil || len(es) != 2 || es[0].Seq != 10 || es[1].Seq != 9 {
		t.Fatalf("ListAudit(job 2 replays) = %d entries, %v", len(es), err)
	}
	var seqs []int64
	if err := s.ScanAudit(ctx, audit.Filter{Job: "1"}, func(e audit.Entry) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("ScanAudit(job 1) = %v", seqs)
	}
	var ia interface{ InvalidParameter() string }
	if _, _, err := s.ListAuditActions(ctx, audit.Filter{}, 10, "bogus"); !errors.As(err, &ia) || ia.InvalidParameter() != "cursor" {
		t.Fatalf("bad cursor: %v", err)
	}
}

// TestAuditActionMessagesPages reads a grouped action's ids across entries
// and a single entry's across pages, in the order recorded.
func TestAuditActionMessagesPages(t *testing.T) { ForEachEngine(t, testAuditActionMessagesPages) }

func testAuditActionMessagesPages(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	appendJob(t, l, "7", "", "local", 23, 5) // creation (23 ids) seq 1; replays 2,3,(failed 4),5,6,7
	var all []string
	for i := range 23 {
		all = append(all, "7-"+strconv.Itoa(i))
	}
	for _, tc := range []struct {
		id    int64
		limit int
	}{{1, 4}, {1, 23}, {1, 100}, {2, 5}, {2, 4}, {2, 7}, {2, 1}, {2, 23}} {
		var got []string
		cursor := ""
		pages := 0
		for {
			ids, next, err := s.AuditActionMessages(ctx, tc.id, tc.limit, cursor)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(ids) > tc.limit || pages > 30 {
				t.Fatalf("action %d limit %d: page of %d ids, page %d", tc.id, tc.limit, len(ids), pages)
			}
			if next != "" && len(ids) != tc.limit {
				t.Fatalf("action %d limit %d: a short page (%d) with a next cursor", tc.id, tc.limit, len(ids))
			}
			got = append(got, ids...)
			if next == "" {
				break
			}
			cursor = next
		}
		if fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("action %d limit %d: ids = %v, want %v", tc.id, tc.limit, got, all)
		}
		if wantPages := (23 + tc.limit - 1) / tc.limit; pages > wantPages+1 {
			t.Fatalf("action %d limit %d: %d pages, want at most %d", tc.id, tc.limit, pages, wantPages+1)
		}
	}
	ids, next, err := s.AuditActionMessages(ctx, 9999, 10, "")
	if err != nil || len(ids) != 0 || next != "" {
		t.Fatalf("no such action: %v %q %v", ids, next, err)
	}
}

// TestAuditActionsBackfill: a trail kept before 0016 is indexed by the
// migration as the trigger indexes new entries.
func TestAuditActionsBackfill(t *testing.T) { ForEachEngine(t, testAuditActionsBackfill) }

func testAuditActionsBackfill(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	appendJob(t, l, "1", "prod", "oidc:alice", 10, 3)
	before, _, err := s.ListAuditActions(ctx, audit.Filter{}, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	// Forget the index, then run the migration's backfill again.
	for _, q := range []string{`DELETE FROM audit_actions`, `DELETE FROM audit_action_entries`} {
		if _, err := s.writer.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := loadMigrationsIn(migrationFiles, s.eng.migrationDir())
	if err != nil {
		t.Fatal(err)
	}
	sqlText := ms[15].sql
	i := indexOf(sqlText, "CREATE VIEW audit_log_index")
	if i < 0 {
		t.Fatal("0016 has no backfill")
	}
	if _, err := s.writer.Exec(sqlText[i:]); err != nil {
		t.Fatal(err)
	}
	after, _, err := s.ListAuditActions(ctx, audit.Filter{}, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 4 {
		t.Fatalf("backfilled actions =\n%v\nwant\n%v", after, before)
	}
	ids, _, err := s.AuditActionMessages(ctx, 2, 100, "")
	if err != nil || len(ids) != 10 {
		t.Fatalf("backfilled replay action's ids = %v, %v", ids, err)
	}
}

// TestAuditGroupedActionsMatchSQL: the actions the migration groups are
// audit.GroupedAction's.
func TestAuditGroupedActionsMatchSQL(t *testing.T) { ForEachEngine(t, testAuditGroupedActionsMatchSQL) }

func testAuditGroupedActionsMatchSQL(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	for _, a := range audit.Actions() {
		for range 2 {
			if _, err := l.Append(ctx, audit.Record{Actor: "x", Action: a, Params: map[string]any{"job_id": "9"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows, _, err := s.ListAuditActions(ctx, audit.Filter{}, MaxAuditLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if want := int64(1) + map[bool]int64{true: 1}[audit.GroupedAction(r.Action)]; r.Entries != want {
			t.Errorf("%s: %d entries in one action, want %d", r.Action, r.Entries, want)
		}
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
