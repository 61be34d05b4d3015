package web

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/views"
)

// runningJob is a replay job part way through.
func runningJob(id int64) replay.Job {
	started := t0.Add(time.Minute)
	return replay.Job{ID: id, Action: replay.ActionReplay, Status: replay.StatusRunning, CreatedAt: t0, CreatedBy: "alice",
		Destination: "orders-retry", RatePerSecond: 50, Reason: "bug 42 fixed", Total: 20,
		Counts:  replay.Counts{Pending: 6, Sent: 2, Completed: 9, Failed: 2, Skipped: 1},
		Flagged: 1, StartedAt: &started, Filter: []byte(`{"entity":"orders"}`)}
}

var jobRowIDRe = regexp.MustCompile(`data-testid="job-row" data-id="(\d+)"`)

func TestJobsPage(t *testing.T) {
	fx := newJobsFixture(t)
	for id := int64(1); id <= 55; id++ {
		j := runningJob(id)
		if id%2 == 0 {
			j.Status, j.Action, j.Destination = replay.StatusCompleted, replay.ActionDiscard, ""
		}
		fx.jobs.add(j)
	}
	body := fx.page(t, "/jobs", 200)
	if !strings.Contains(body, `aria-current="page" data-testid="nav-jobs"`) {
		t.Error("the navigation does not mark Jobs current")
	}
	var seen []string
	target := "/jobs"
	for pages := 0; target != ""; pages++ {
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
		body := fx.page(t, html.UnescapeString(target), 200)
		for _, m := range jobRowIDRe.FindAllStringSubmatch(body, -1) {
			seen = append(seen, m[1])
		}
		target = ""
		if m := nextRe.FindStringSubmatch(body); m != nil {
			target = m[1]
		}
	}
	if len(seen) != 55 || seen[0] != "55" || seen[54] != "1" {
		t.Errorf("jobs %v: want 55 newest first", seen)
	}
	// Job 55's row: counts, status, creator, destination, progress.
	row := regexp.MustCompile(`(?s)<tr id="job-55".*?</tr>`).FindString(body)
	for _, want := range []string{`data-testid="job-row-status">running<`, `data-testid="job-row-total">20<`, "6 to do · 2 sent · 9 completed",
		"2 failed · 1 skipped", "by alice", "orders-retry", `<progress max="20" value="11"`, `href="/jobs/55"`} {
		if !strings.Contains(row, want) {
			t.Errorf("job 55's row lacks %q:\n%s", want, row)
		}
	}
	if row54 := regexp.MustCompile(`(?s)<tr id="job-54".*?</tr>`).FindString(body); !strings.Contains(row54, "discard") {
		t.Errorf("job 54's row: %s", row54)
	}
	fx.page(t, "/jobs?cursor=bogus", http.StatusBadRequest)
	fx.page(t, "/jobs?colour=red", http.StatusBadRequest)
}

func TestJobPage(t *testing.T) {
	fx := newJobsFixture(t)
	j := runningJob(7)
	j.Reason = `<script>alert("reason")</script>`
	var items []replay.Item
	for i := range 130 {
		it := replay.Item{JobID: 7, MessageID: int64(i + 1), Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, SequenceNumber: int64(500 + i),
			OriginalMessageID: fmt.Sprint("m-", i), State: replay.ItemCompleted, CopyMessageID: fmt.Sprint("m-", i, "/dlqdash-7")}
		if i%10 == 0 {
			it.State, it.Error, it.CopyMessageID = replay.ItemFailed, `lock lost <img src=x onerror=alert(1)>`, ""
		}
		if i == 3 {
			it.Flagged = true
		}
		items = append(items, it)
	}
	fx.jobs.add(j, items...)

	body := fx.page(t, "/jobs/7", 200)
	for id, want := range map[string]string{"job-status": "running", "job-total": "20", "job-pending": "6", "job-sent": "2",
		"job-completed": "9", "job-failed": "2", "job-skipped": "1", "job-flagged": "1", "job-action": "replay",
		"job-destination": "orders-retry", "job-rate": "50 messages per second", "job-title": "Replay job 7",
		"job-progress-text": "11 of 20 sent (55%)"} {
		wantTestid(t, body, id, want)
	}
	for _, want := range []string{`id="job-progress-7"`, `<progress max="20" value="11" data-testid="job-progress-bar"`,
		`action="/jobs/7/pause"`, `action="/jobs/7/cancel"`, `data-testid="job-pause"`, `data-testid="job-cancel"`,
		`href="/messages/4" data-testid="job-item-link"`, `data-testid="job-item-flagged"`, `data-testid="job-filter">{&#34;entity&#34;:&#34;orders&#34;}<`,
		`lock lost &lt;img src=x onerror=alert(1)&gt;`, `&lt;script&gt;alert(&#34;reason&#34;)&lt;/script&gt;`, `data-testid="nav-jobs"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the job page lacks %s", want)
		}
	}
	for _, bad := range []string{`data-testid="job-resume"`, "<script>alert", "<img src"} {
		if strings.Contains(body, bad) {
			t.Errorf("the job page has %s", bad)
		}
	}
	if n := strings.Count(body, `data-testid="job-item"`); n != jobItemsPageSize {
		t.Errorf("%d item rows, want %d", n, jobItemsPageSize)
	}
	next := nextRe.FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no next page of items")
	}
	body = fx.page(t, html.UnescapeString(next[1]), 200)
	if n := strings.Count(body, `data-testid="job-item"`); n != 130-jobItemsPageSize || !strings.Contains(body, `data-testid="first-page"`) {
		t.Errorf("second page: %d rows", n)
	}

	// The state filter reaches the engine, and the pages keep it.
	body = fx.page(t, "/jobs/7?state=failed", 200)
	if n := strings.Count(body, `data-testid="job-item"`); n != 13 {
		t.Errorf("failed: %d rows, want 13", n)
	}
	if !strings.Contains(body, `<option value="failed" selected>`) {
		t.Error("the state select does not keep the filter")
	}
	if calls := fx.jobs.listCalls; calls[len(calls)-1] != "7 failed " {
		t.Errorf("ListItems calls %v", calls)
	}
	fx.page(t, "/jobs/7?state=sleeping", http.StatusBadRequest)
	fx.page(t, "/jobs/7?cursor=bogus", http.StatusBadRequest)
	fx.page(t, "/jobs/999", http.StatusNotFound)
	fx.page(t, "/jobs/abc", http.StatusNotFound)
	fx.page(t, "/jobs/007", http.StatusNotFound)

	// The buttons follow the status.
	for _, tt := range []struct {
		status replay.Status
		want   []string
	}{
		{replay.StatusQueued, []string{"job-pause", "job-cancel"}},
		{replay.StatusPaused, []string{"job-resume", "job-cancel"}},
		{replay.StatusCancelling, nil},
		{replay.StatusCompleted, nil},
		{replay.StatusFailed, nil},
	} {
		j := runningJob(8)
		j.Status, j.PausedReason = tt.status, "destination keeps failing: <b>busy</b>"
		fx.jobs.add(j)
		body := fx.page(t, "/jobs/8", 200)
		var got []string
		for _, b := range []string{"job-pause", "job-resume", "job-cancel"} {
			if strings.Contains(body, `data-testid="`+b+`"`) {
				got = append(got, b)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: buttons %v, want %v", tt.status, got, tt.want)
		}
		if !strings.Contains(body, "destination keeps failing: &lt;b&gt;busy&lt;/b&gt;") {
			t.Errorf("%s: the paused reason is not shown escaped", tt.status)
		}
	}
}

func TestJobControls(t *testing.T) {
	fx := newJobsFixture(t)
	fx.jobs.add(runningJob(7))
	for _, action := range []string{"pause", "resume", "cancel"} {
		res, _ := fx.post(t, "/jobs/7/"+action, nil)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/jobs/7" {
			t.Errorf("%s: status %d, Location %q", action, res.StatusCode, res.Header.Get("Location"))
		}
	}
	if got := fx.jobs.controlled(); !slices.Equal(got, []string{"pause 7", "resume 7", "cancel 7"}) {
		t.Errorf("engine calls %v", got)
	}
	wantTestid(t, fx.page(t, "/jobs/7", 200), "job-status", "cancelling")

	// A refusal shows on the job's page, with the engine's words.
	fx.jobs.controlErr = &replay.PreconditionError{Msg: "job 7 is already <i>completed</i>"}
	body := fx.postPage(t, "/jobs/7/pause", nil, http.StatusUnprocessableEntity)
	if !strings.Contains(body, `role="alert" data-testid="job-alert">job 7 is already &lt;i&gt;completed&lt;/i&gt;<`) {
		t.Errorf("the refusal is not shown:\n%.3000s", body)
	}
	wantTestid(t, body, "job-total", "20")
	fx.postPage(t, "/jobs/999/cancel", nil, http.StatusNotFound)
	fx.postPage(t, "/jobs/x/cancel", nil, http.StatusNotFound)
	// GET does not control anything.
	res, _ := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/jobs/7/cancel", nil))
	if res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /jobs/7/cancel: %d", res.StatusCode)
	}
	// Another site's form is refused before the engine sees it.
	before := len(fx.jobs.controlled())
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/jobs/7/cancel", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if res, _ := do(t, fx.h, req); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site cancel: %d", res.StatusCode)
	}
	if len(fx.jobs.controlled()) != before {
		t.Error("a cross-site cancel reached the engine")
	}
}

func TestMessagePageReplayHistory(t *testing.T) {
	fx := newJobsFixture(t)
	id := fx.ids[0]
	fx.jobs.add(replay.Job{ID: 3, Action: replay.ActionReplay, Status: replay.StatusCompleted})
	fx.jobs.add(replay.Job{ID: 4, Action: replay.ActionReplay, Status: replay.StatusCompleted})
	fx.jobs.add(replay.Job{ID: 5, Action: replay.ActionDiscard, Status: replay.StatusFailed})
	fx.jobs.history[id] = []replay.Item{
		{JobID: 5, MessageID: id, State: replay.ItemFailed, Error: `<script>alert("err")</script>`},
		{JobID: 4, MessageID: id, State: replay.ItemCompleted, CopyMessageID: "m-00/dlqdash-4", Flagged: true},
		{JobID: 3, MessageID: id, State: replay.ItemCompleted, CopyMessageID: "m-00/dlqdash-3"},
	}
	again := fx.recs[1]
	again.MessageID, again.Entity, again.SequenceNumber = "m-00/dlqdash-3", "orders", 555
	fx.jobs.copies = []dlq.Record{again}

	body := fx.page(t, "/messages/"+idStr(id), 200)
	rows := regexp.MustCompile(`(?s)<tr data-testid="replay-history-row" data-job="(\d+)">.*?</tr>`).FindAllStringSubmatch(body, -1)
	if len(rows) != 3 || rows[0][1] != "5" || rows[1][1] != "4" || rows[2][1] != "3" {
		t.Fatalf("history rows %d:\n%s", len(rows), body)
	}
	for i, want := range [][]string{
		{`href="/jobs/5"`, "discard", `data-testid="replay-state">failed<`, "no copy sent", "&lt;script&gt;alert(&#34;err&#34;)&lt;/script&gt;"},
		{`href="/jobs/4"`, "replay", `data-testid="replay-flagged"`, "m-00/dlqdash-4", "not seen in a dead-letter queue"},
		{`href="/jobs/3"`, `<a href="/messages/` + idStr(fx.recs[1].ID) + `" data-testid="replay-copy-link">dead-lettered again in orders (seq 555)</a>`},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i][0], w) {
				t.Errorf("row %d lacks %q:\n%s", i, w, rows[i][0])
			}
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("an error's markup reached the page")
	}
	for _, want := range []string{`data-testid="message-replay-form"`, `<input type="hidden" name="id" value="` + idStr(id) + `">`,
		`data-testid="message-replay"`, `data-testid="message-discard"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the message page lacks %s", want)
		}
	}
	// A message no job touched.
	body = fx.page(t, "/messages/"+idStr(fx.ids[2]), 200)
	if !strings.Contains(body, `data-testid="replays-empty"`) {
		t.Error("no empty history")
	}
}

// auditPageFixture is a server over an audit trail of 60 entries, one a
// minute from t0 (every third by bob, even ones discards), and one more by
// mallory naming 8 messages, with markup in its parameters.
func auditPageFixture(t *testing.T) *apiFixture {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "audit.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := audit.New(st)
	for i := range 61 {
		l.Now = func() time.Time { return t0.Add(time.Duration(i) * time.Minute) }
		ctx := t.Context()
		r := audit.Record{Action: audit.ActionReplay, Params: map[string]any{"i": i}, MessageIDs: []string{fmt.Sprint(i + 1)}}
		switch {
		case i == 60:
			ctx = audit.WithActor(ctx, `mallory<script>`)
			r = audit.Record{Action: audit.ActionDiscardJobCreated, Params: map[string]any{"reason": `<script>alert("p")</script>`},
				MessageIDs: []string{"1", "2", "3", "4", "5", "6", "7", "not-an-id"}, Outcome: audit.OutcomeDenied}
		case i%3 == 0:
			ctx = audit.WithActor(ctx, "bob")
		}
		if i%2 == 0 && i != 60 {
			r.Action = audit.ActionDiscard
		}
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return &apiFixture{h: New(Config{Catalog: st, Audit: st}).Handler(), st: st}
}

var auditSeqRe = regexp.MustCompile(`data-testid="audit-action" data-id="(\d+)"`)

func TestAuditPage(t *testing.T) {
	fx := auditPageFixture(t)
	body := fx.page(t, "/audit", 200)
	if !strings.Contains(body, `aria-current="page" data-testid="nav-audit"`) {
		t.Error("the navigation does not mark Audit current")
	}
	seqs := auditSeqRe.FindAllStringSubmatch(body, -1)
	if len(seqs) != 50 || seqs[0][1] != "61" {
		t.Fatalf("%d entries, first %v", len(seqs), seqs[0])
	}
	newest := regexp.MustCompile(`(?s)<tr data-testid="audit-action" data-id="61"[^>]*>.*?</tr>`).FindString(body)
	for _, want := range []string{`href="/messages/1" data-testid="audit-message-link">1<`, `href="/messages/7"`,
		`<li>not-an-id</li>`, `data-testid="audit-action-count">8 messages<`, `data-testid="audit-entry-outcome">denied<`, "mallory&lt;script&gt;",
		`\u003cscript\u003ealert(\&#34;p\&#34;)\u003c/script\u003e`} {
		if !strings.Contains(newest, want) {
			t.Errorf("the newest entry lacks %s:\n%s", want, newest)
		}
	}
	if strings.Contains(newest, `data-testid="audit-action-all"`) || strings.Contains(body, "<script>") {
		t.Error("an All link for 8 messages, or markup on the page")
	}
	// Every action of the vocabulary is offered.
	for _, a := range audit.Actions() {
		if !strings.Contains(body, `<option value="`+a+`"`) {
			t.Errorf("no option %s", a)
		}
	}

	walk := func(query string) []string {
		var out []string
		target := "/audit?" + query
		for pages := 0; target != ""; pages++ {
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			body := fx.page(t, html.UnescapeString(target), 200)
			for _, m := range auditSeqRe.FindAllStringSubmatch(body, -1) {
				out = append(out, m[1])
			}
			target = ""
			if m := nextRe.FindStringSubmatch(body); m != nil {
				target = m[1]
				if query != "" && !strings.Contains(target, strings.Split(query, "=")[0]+"=") {
					t.Errorf("the next page link %s lost the filter %s", target, query)
				}
			}
		}
		return out
	}
	if got := walk(""); len(got) != 61 {
		t.Errorf("all: %d entries", len(got))
	}
	if got := walk("actor=bob"); len(got) != 20 || got[0] != "58" {
		t.Errorf("bob: %v", got)
	}
	// datetime-local values in UTC, and the action select, as the API reads them.
	got := walk("action=discard&since=" + url.QueryEscape("2026-11-22T10:52:07.123") + "&until=" + url.QueryEscape("2026-11-22T10:58"))
	if fmt.Sprint(got) != "[15 13 11]" {
		t.Errorf("discards between 10:52 and 10:58: %v", got)
	}
	body = fx.page(t, "/audit?action=discard&actor=bob", 200)
	if !strings.Contains(body, `<option value="discard" selected>`) || !strings.Contains(body, `name="actor" value="bob"`) {
		t.Error("the form does not keep the filter")
	}

	for _, tt := range []struct{ query, field string }{
		{"action=replayed", "action"}, {"since=yesterday", "since"}, {"since=2026-11-22T10:00&until=2026-11-22T09:00", "until"},
		{"cursor=bogus", "cursor"}, {"user=bob", "user"}, {"job=abc", "job"}, {"job=007", "job"},
	} {
		body := fx.page(t, "/audit?"+tt.query, http.StatusBadRequest)
		if !strings.Contains(body, `role="alert" data-testid="filter-error" data-field="`+tt.field+`"`) {
			t.Errorf("%s: the error does not name %s", tt.query, tt.field)
		}
		if !strings.Contains(body, `data-testid="audit-filter"`) {
			t.Errorf("%s: no form", tt.query)
		}
	}
}

// jobsLiveFixture is a server with a hub and a fake engine.
func jobsLiveFixture(t *testing.T, run bool) (*liveFixture, *fakeJobs) {
	t.Helper()
	fx := newLiveFixture(t, HubConfig{})
	fj := newFakeJobs(nil)
	hub := fx.hub
	if !run {
		// A hub that is not running yet: what is published waits.
		hub = NewHub(HubConfig{Catalog: fx.st})
	}
	srv := httptest.NewServer(New(Config{Catalog: fx.st, Hub: hub, Jobs: fj}).Handler())
	t.Cleanup(srv.Close)
	return &liveFixture{srv: srv, hub: hub, path: fx.path, st: fx.st}, fj
}

func TestLiveJobProgress(t *testing.T) {
	fx, _ := jobsLiveFixture(t, true)
	page := fx.dial(t, "page=job&id=7")
	other := fx.dial(t, "page=job&id=8")
	list := fx.dial(t, "page=jobs&first=1&after=6")
	older := fx.dial(t, "page=jobs&first=1&after=9") // job 7 is not new here
	later := fx.dial(t, "page=jobs")                 // a later page

	j := runningJob(7)
	fx.hub.PublishJob(j)
	op := next(t, page)
	if op.Op != "replace" || op.ID != views.FragmentID("job-progress", "7") || !strings.Contains(op.HTML, `id="job-progress-7"`) ||
		!strings.Contains(op.HTML, `data-testid="job-completed">9<`) || !strings.Contains(op.HTML, `data-testid="job-pause"`) {
		t.Fatalf("job page got %+v", op)
	}
	for name, conn := range map[string]*websocket.Conn{"first page": list, "older first page": older, "later page": later} {
		op := next(t, conn)
		if op.Op != "replace" || op.ID != "job-7" || !strings.Contains(op.HTML, `<tr id="job-7"`) ||
			!strings.Contains(op.HTML, `data-testid="job-row-status">running<`) {
			t.Errorf("%s got %+v", name, op)
		}
	}
	op = next(t, list)
	if op.Op != "prepend" || op.ID != views.FragmentID("job-rows", "") || !strings.Contains(op.HTML, `<tr id="job-7"`) {
		t.Errorf("the first page did not get the new job prepended: %+v", op)
	}

	// Finished: the job's page refetches (its message table too); the
	// list's row shows the final status; a stale running state published
	// after it is not sent.
	done := j
	done.Status, done.Counts = replay.StatusCompleted, replay.Counts{Completed: 17, Failed: 2, Skipped: 1}
	fx.hub.PublishJob(done)
	if op := next(t, page); op.Op != "resync" {
		t.Errorf("the finished job's page got %+v", op)
	}
	if op := until(t, later, "job-7"); !strings.Contains(op.HTML, `data-testid="job-row-status">completed<`) {
		t.Errorf("the list got %+v", op)
	}
	fx.hub.PublishJob(j) // stale
	fx.hub.Publish(freshness(true, ""))
	for op := next(t, older); op.ID != "freshness"; op = next(t, older) {
		if op.Op == "prepend" {
			t.Errorf("a first page showing newer jobs got job 7 prepended: %+v", op)
		}
	}
	for name, conn := range map[string]*websocket.Conn{"job page": page, "other job's page": other, "later page": later} {
		if op := next(t, conn); op.ID != "freshness" {
			t.Errorf("%s got %+v before the freshness", name, op)
		}
	}
}

func TestLiveJobCoalesces(t *testing.T) {
	fx, _ := jobsLiveFixture(t, false)
	conn := fx.dial(t, "page=job&id=7")
	// Nothing runs the hub yet: PublishJob must not block, and the states
	// wait, the latest per job.
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range 1000 {
			j := runningJob(7)
			j.Counts.Completed = i
			fx.hub.PublishJob(j)
		}
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("PublishJob blocked")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go fx.hub.Run(ctx)
	op := next(t, conn)
	if op.Op != "replace" || !strings.Contains(op.HTML, `data-testid="job-completed">999<`) {
		t.Fatalf("got %+v, want the latest state", op)
	}
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, conn); op.ID != "freshness" {
		t.Errorf("more job frames after the coalesced one: %+v", op)
	}
}

// The job pages' data-live are subscriptions /live accepts.
func TestLiveJobPagesSubscribe(t *testing.T) {
	fx, fj := jobsLiveFixture(t, true)
	fj.add(runningJob(3))
	fj.add(runningJob(12))
	liveRe := regexp.MustCompile(`data-live="([^"]*)"`)
	for _, tt := range []struct{ target, want string }{
		{"/jobs", "after=12&first=1&page=jobs"},
		{"/jobs?cursor=j12", "page=jobs"},
		{"/jobs/3", "page=job&id=3&first=1"},
		{"/jobs/3?state=failed", "page=job&id=3"},
	} {
		res, err := http.Get(fx.srv.URL + tt.target)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		m := liveRe.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s: no data-live", tt.target)
			continue
		}
		q := html.UnescapeString(string(m[1]))
		if q != tt.want {
			t.Errorf("%s: data-live %q, want %q", tt.target, q, tt.want)
		}
		conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, q), nil)
		if err != nil {
			t.Errorf("%s: /live?%s: %v (%v)", tt.target, q, err, resp)
			continue
		}
		conn.Close()
	}
	for _, q := range []string{"page=job", "page=job&id=x", "page=jobs&after=-1", "page=jobs&first=maybe", "page=jobs&id=3"} {
		_, resp, _ := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, q), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %v, want 400", q, resp)
		}
	}
}

// A running job's first page of messages is kept current: its table body
// is replaced, at most once a second, by what the engine has recorded.
func TestLiveJobItems(t *testing.T) {
	fj := newFakeJobs(nil)
	fx := newLiveFixture(t, HubConfig{JobItems: fj})
	j := runningJob(7)
	fj.mu.Lock()
	fj.jobs[7] = j
	fj.items[7] = []replay.Item{{JobID: 7, MessageID: 41, Entity: "orders", SequenceNumber: 5, OriginalMessageID: "o-5",
		State: replay.ItemCompleted, CopyMessageID: "o-5/dlqdash-7"},
		{JobID: 7, MessageID: 42, Entity: "orders", SequenceNumber: 6, OriginalMessageID: "o-6",
			State: replay.ItemFailed, Error: `<script>alert(1)</script> refused`}}
	fj.mu.Unlock()
	first := fx.dial(t, "page=job&id=7&first=1")
	filtered := fx.dial(t, "page=job&id=7")

	fx.hub.PublishJob(j)
	if op := next(t, first); op.ID != views.FragmentID("job-progress", "7") {
		t.Fatalf("first op %+v", op)
	}
	op := next(t, first)
	if op.Op != "replace" || op.ID != views.FragmentID("job-items", "7") || !strings.Contains(op.HTML, `<tbody id="job-items-7"`) ||
		strings.Count(op.HTML, `data-testid="job-item"`) != 2 || !strings.Contains(op.HTML, `data-state="failed"`) ||
		strings.Contains(op.HTML, "<script>") {
		t.Fatalf("the message table: %+v", op)
	}
	// A filtered page keeps its own table; a second change within the
	// second updates the progress only.
	fx.hub.PublishJob(j)
	fx.hub.Publish(freshness(true, ""))
	for _, c := range []*websocket.Conn{first, filtered} {
		for op := next(t, c); op.ID != "freshness"; op = next(t, c) {
			if op.ID == views.FragmentID("job-items", "7") {
				t.Errorf("an extra table update: %+v", op)
			}
		}
	}
}

// A job that starts retrying shows it live, with what fails, on its page
// and in the jobs list; back to running, the words go.
func TestLiveJobRetrying(t *testing.T) {
	fx, _ := jobsLiveFixture(t, true)
	page := fx.dial(t, "page=job&id=7")
	list := fx.dial(t, "page=jobs")
	j := runningJob(7)
	j.Status, j.LastError, j.RetryAttempts = replay.StatusRetrying, "send to orders-retry failed 3 times: the broker did not answer", 3
	fx.hub.PublishJob(j)
	op := next(t, page)
	if op.ID != views.FragmentID("job-progress", "7") || !strings.Contains(op.HTML, `data-testid="job-status">retrying<`) ||
		!strings.Contains(op.HTML, "Retrying: send to orders-retry failed 3 times") || !strings.Contains(op.HTML, `data-testid="job-pause"`) {
		t.Fatalf("job page got %+v", op)
	}
	if op := next(t, list); op.ID != "job-7" || !strings.Contains(op.HTML, `data-testid="job-row-status">retrying<`) ||
		!strings.Contains(op.HTML, "Retrying: send to orders-retry failed 3 times") {
		t.Fatalf("jobs page got %+v", op)
	}
	j.Status, j.RetryAttempts = replay.StatusRunning, 0
	fx.hub.PublishJob(j)
	if op := next(t, page); !strings.Contains(op.HTML, `data-testid="job-status">running<`) || strings.Contains(op.HTML, "Retrying:") {
		t.Fatalf("job page got %+v", op)
	}
}
