package web

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
)

// auditJobsFixture is a server whose trail holds a sign-in, job 1 (1,234
// messages replayed 100 a batch, one failure, its completion) and job 2 (3
// messages discarded in one batch) as the engine writes them.
func auditJobsFixture(t *testing.T) (*apiFixture, *store.Store) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "audit.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := audit.New(st)
	ctx := t.Context()
	must := func(r audit.Record) {
		t.Helper()
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	must(audit.Record{Actor: "oidc:alice", Action: audit.ActionLogin})
	job := func(id string, n, batch int, action string) {
		var ids []string
		for i := range n {
			ids = append(ids, strconv.Itoa(100000*len(id)+i+1))
		}
		created := audit.ActionReplayJobCreated
		if action == audit.ActionDiscard {
			created = audit.ActionDiscardJobCreated
		}
		must(audit.Record{Actor: "oidc:alice", Action: created, MessageIDs: ids, Params: map[string]any{"job_id": id, "total": n}})
		for i := 0; i < n; i += batch {
			must(audit.Record{Actor: "oidc:alice", Action: action, MessageIDs: ids[i:min(i+batch, n)], Params: map[string]any{"job_id": id}})
			if i == 0 && n > batch {
				must(audit.Record{Actor: "dlqdash", Action: audit.ActionMessageFailed, MessageIDs: []string{"999"},
					Outcome: audit.OutcomeFailed, Params: map[string]any{"job_id": id, "reason": "<b>boom</b>"}})
			}
		}
		must(audit.Record{Actor: "dlqdash", Action: audit.ActionJobCompleted, Params: map[string]any{"job_id": id}})
	}
	job("1", 1234, 100, audit.ActionReplay)
	job("22", 3, 100, audit.ActionDiscard)
	return &apiFixture{h: New(Config{Catalog: st, Audit: st}).Handler(), st: st}, st
}

type auditActionsPage struct {
	Actions []struct {
		ID           int64           `json:"id"`
		LastSeq      int64           `json:"last_seq"`
		FirstAt      string          `json:"first_at"`
		Actor        string          `json:"actor"`
		Action       string          `json:"action"`
		Outcome      string          `json:"outcome"`
		JobID        *string         `json:"job_id"`
		Namespace    *string         `json:"namespace"`
		Entries      int64           `json:"entries"`
		MessageCount int64           `json:"message_count"`
		Params       json.RawMessage `json:"params"`
		Hash         string          `json:"hash"`
	} `json:"actions"`
	NextCursor *string `json:"next_cursor"`
}

func getJSONInto(t *testing.T, h http.Handler, target string, v any) (int, string) {
	t.Helper()
	res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v: %s", target, err, body)
		}
	}
	return res.StatusCode, body
}

func TestAuditActionsAPI(t *testing.T) {
	fx, _ := auditJobsFixture(t)
	var p auditActionsPage
	code, body := getJSONInto(t, fx.h, "/api/v1/audit/actions", &p)
	if code != http.StatusOK || p.NextCursor != nil {
		t.Fatalf("%d %s", code, body)
	}
	var got []string
	for _, a := range p.Actions {
		job := ""
		if a.JobID != nil {
			job = *a.JobID
		}
		got = append(got, fmt.Sprintf("%s@%s:%d/%d", a.Action, job, a.Entries, a.MessageCount))
	}
	want := []string{"job_completed@22:1/0", "discard@22:1/3", "discard_job_created@22:1/3",
		"job_completed@1:1/0", "message_failed@1:1/1", "replay@1:13/1234", "replay_job_created@1:1/1234", "login@:1/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("actions %v\nwant %v", got, want)
	}
	var keys map[string][]map[string]json.RawMessage
	json.Unmarshal([]byte(body), &keys)
	var names []string
	for k := range keys["actions"][0] {
		names = append(names, k)
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[action actor destination_namespace entries first_at hash id job_id last_at last_seq message_count namespace outcome params]" {
		t.Fatalf("action keys %v", names)
	}

	// The job filter, and pages.
	var ids []int64
	cursor := ""
	for range 10 {
		var p auditActionsPage
		target := "/api/v1/audit/actions?job=1&limit=2"
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		if code, body := getJSONInto(t, fx.h, target, &p); code != http.StatusOK {
			t.Fatalf("%s: %d %s", target, code, body)
		}
		for _, a := range p.Actions {
			ids = append(ids, a.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if fmt.Sprint(ids) != "[17 4 3 2]" {
		t.Fatalf("job 1's actions %v, want [17 4 3 2]", ids)
	}

	// The replay's 1,234 ids, 500 a page, in order.
	var all []string
	cursor = ""
	pages := 0
	for ; pages < 10; pages++ {
		var m struct {
			MessageIDs []string `json:"message_ids"`
			NextCursor *string  `json:"next_cursor"`
		}
		target := "/api/v1/audit/actions/3/messages"
		if cursor != "" {
			target += "?cursor=" + url.QueryEscape(cursor)
		}
		if code, body := getJSONInto(t, fx.h, target, &m); code != http.StatusOK || len(m.MessageIDs) > 500 {
			t.Fatalf("%s: %d %s", target, code, body)
		}
		all = append(all, m.MessageIDs...)
		if m.NextCursor == nil {
			break
		}
		cursor = *m.NextCursor
	}
	if len(all) != 1234 || all[0] != "100001" || all[1233] != "101234" || pages != 2 {
		t.Fatalf("%d ids in %d pages, %v...", len(all), pages+1, all[:3])
	}

	// The entries' list takes the job filter too.
	code, ap, body := getAudit(t, fx.h, "/api/v1/audit?job=22")
	if code != http.StatusOK || len(ap.Entries) != 3 || ap.Entries[0].Seq != 20 || ap.Entries[2].Seq != 18 {
		t.Fatalf("job 22's entries: %d %s", code, body)
	}

	for _, tt := range []struct{ target, param string }{
		{"/api/v1/audit/actions?job=x", "job"},
		{"/api/v1/audit/actions?job=0", "job"},
		{"/api/v1/audit/actions?cursor=bogus", "cursor"},
		{"/api/v1/audit/actions?limit=501", "limit"},
		{"/api/v1/audit/actions/3/messages?limit=5001", "limit"},
		{"/api/v1/audit/actions/3/messages?cursor=bogus", "cursor"},
		{"/api/v1/audit/actions/3/messages?job=1", "job"},
		{"/api/v1/audit?job=-1", "job"},
		{"/api/v1/audit/export?format=xml", "format"},
		{"/api/v1/audit/export?job=abc", "job"},
		{"/api/v1/audit/export?user=bob", "user"},
	} {
		res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", tt.target, nil))
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"`+tt.param+`"`) {
			t.Errorf("%s: %d %s; want 400 naming %s", tt.target, res.StatusCode, body, tt.param)
		}
	}
	for _, target := range []string{"/api/v1/audit/actions/5/messages", "/api/v1/audit/actions/999/messages", "/api/v1/audit/actions/03/messages"} {
		res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d %s; want 404", target, res.StatusCode, body)
		}
	}
}

func TestAuditExport(t *testing.T) {
	fx, st := auditJobsFixture(t)
	// CSV of job 1's entries: a header, then every entry of the job in seq
	// order, as the trail holds them.
	res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/audit/export?format=csv&job=1&actor=", nil))
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") ||
		res.Header.Get("Content-Disposition") != `attachment; filename="dlqdash-audit.csv"` {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var want []audit.Entry
	if err := st.ScanAudit(t.Context(), audit.Filter{}, func(e audit.Entry) error {
		if strings.Contains(string(e.Params), `"job_id":"1"`) {
			want = append(want, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(want) || len(want) != 16 {
		t.Fatalf("%d CSV rows, want 1+%d", len(recs), len(want))
	}
	hashCol := slices.Index(recs[0], "hash")
	for i, e := range want {
		if recs[i+1][0] != strconv.FormatInt(e.Seq, 10) || recs[i+1][hashCol] != e.Hash {
			t.Fatalf("row %d = %v, want entry %d", i+1, recs[i+1][:2], e.Seq)
		}
	}
	// JSON lines of the failures, each an entry whose hash recomputes.
	res, body = do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/audit/export?action=message_failed", nil))
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	lines := bytes.Split(bytes.TrimSpace([]byte(body)), []byte("\n"))
	if len(lines) != 1 {
		t.Fatalf("%d lines: %s", len(lines), body)
	}
	var e struct {
		Seq        int64           `json:"seq"`
		Params     json.RawMessage `json:"params"`
		MessageIDs []string        `json:"message_ids"`
		Hash       string          `json:"hash"`
	}
	if err := json.Unmarshal(lines[0], &e); err != nil || e.Seq != 4 || e.MessageIDs[0] != "999" || len(e.Hash) != 64 {
		t.Fatalf("%v %s", err, lines[0])
	}
}

var auditActionRowRe = regexp.MustCompile(`(?s)<tr data-testid="audit-action" data-id="(\d+)" data-job="(\d*)" data-entries="(\d+)">.*?</tr>`)

func TestAuditActionsPage(t *testing.T) {
	fx, _ := auditJobsFixture(t)
	body := fx.page(t, "/audit", 200)
	rows := auditActionRowRe.FindAllStringSubmatch(body, -1)
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8 (one per action)", len(rows))
	}
	replay := rows[5]
	if replay[1] != "3" || replay[2] != "1" || replay[3] != "13" {
		t.Fatalf("the replay row %v", replay[1:])
	}
	for _, want := range []string{`<summary data-testid="audit-action-count">1,234 messages</summary>`,
		`href="/messages/100001" data-testid="audit-message-link">100001<`, `href="/messages/100020"`,
		`href="/audit/actions/3" data-testid="audit-action-all">All 1,234 messages →<`, `href="/jobs/1" data-testid="audit-action-job">job 1<`,
		`#3–#16 · 13 entries`} {
		if !strings.Contains(replay[0], want) {
			t.Errorf("the replay row lacks %s:\n%s", want, replay[0])
		}
	}
	if strings.Contains(replay[0], `href="/messages/100021"`) {
		t.Error("the row lists more than 20 messages")
	}
	if !strings.Contains(body, `href="/api/v1/audit/export?format=csv" download data-testid="audit-export-csv"`) {
		t.Error("no CSV export link")
	}
	// Filtered by job: its rows only, and the export link keeps the filter.
	body = fx.page(t, "/audit?job=22&actor=", 200)
	rows = auditActionRowRe.FindAllStringSubmatch(body, -1)
	if len(rows) != 3 || rows[0][2] != "22" || rows[2][2] != "22" {
		t.Fatalf("job 22: %d rows", len(rows))
	}
	if !strings.Contains(body, `href="/api/v1/audit/export?format=jsonl&amp;job=22"`) || !strings.Contains(body, `name="job" value="22"`) {
		t.Error("the export link or the form lost the job filter")
	}
	// All of the replay's messages, 500 a page.
	var ids []string
	target := "/audit/actions/3"
	for pages := 0; target != ""; pages++ {
		if pages > 3 {
			t.Fatal("the pages do not end")
		}
		body := fx.page(t, html.UnescapeString(target), 200)
		for _, m := range regexp.MustCompile(`data-testid="audit-message-link">(\d+)<`).FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		if pages == 1 && !strings.Contains(body, "Messages 501–1,000 of 1,234") {
			t.Error("the second page does not say where it is")
		}
		target = ""
		if m := nextRe.FindStringSubmatch(body); m != nil {
			target = m[1]
		}
	}
	if len(ids) != 1234 || ids[0] != "100001" || ids[1233] != "101234" {
		t.Fatalf("%d ids", len(ids))
	}
	fx.page(t, "/audit/actions/5", http.StatusNotFound)
	fx.page(t, "/audit/actions/3?cursor=bogus", http.StatusBadRequest)
}
