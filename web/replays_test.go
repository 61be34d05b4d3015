package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// jobsFixture is the API fixture's store behind a server with a fake
// replay engine and the store's audit trail.
type jobsFixture struct {
	*apiFixture
	jobs *fakeJobs
}

func newJobsFixture(t *testing.T) *jobsFixture {
	t.Helper()
	fx := newAPIFixture(t)
	fj := newFakeJobs(fx.recs[:12])
	fx.h = New(Config{Catalog: fx.st, Jobs: fj, Audit: fx.st}).Handler()
	return &jobsFixture{apiFixture: fx, jobs: fj}
}

// post submits a form as a browser does (same origin).
func (fx *apiFixture) post(t *testing.T, target string, form url.Values) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), "POST", target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return do(t, fx.h, req)
}

// postPage posts a form that answers with a page, checking the status.
func (fx *apiFixture) postPage(t *testing.T, target string, form url.Values, status int) string {
	t.Helper()
	res, body := fx.post(t, target, form)
	if res.StatusCode != status {
		t.Fatalf("POST %s: status %d, want %d:\n%.4000s", target, res.StatusCode, status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("POST %s: Content-Type %q", target, ct)
	}
	if n := strings.Count(body, "<h1"); n != 1 {
		t.Errorf("POST %s: %d h1 elements, want 1", target, n)
	}
	return body
}

// testid is the text of the first element with that data-testid, if it
// holds only text.
func testid(body, id string) (string, bool) {
	m := regexp.MustCompile(`data-testid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

func wantTestid(t *testing.T, body, id, want string) {
	t.Helper()
	got, ok := testid(body, id)
	if !ok {
		t.Errorf("no element %s", id)
	} else if got != want {
		t.Errorf("%s = %q, want %q", id, got, want)
	}
}

func hiddenInputs(body, name string) []string {
	var out []string
	re := regexp.MustCompile(`<input type="hidden" name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func idStr(id int64) string { return strconv.FormatInt(id, 10) }

func TestReplaySelectionByIDs(t *testing.T) {
	fx := newJobsFixture(t)
	a, b := idStr(fx.ids[0]), idStr(fx.ids[2])
	body := fx.postPage(t, "/replays", url.Values{"action": {"replay"}, "id": {a, b}, "filter.entity": {"orders"}}, 200)

	subs := fx.jobs.submitted()
	if len(subs) != 1 {
		t.Fatalf("%d submissions, want 1 dry run", len(subs))
	}
	req := subs[0]
	if !req.DryRun || req.Action != replay.ActionReplay || req.Selection.Filter != nil ||
		!slices.Equal(req.Selection.IDs, []int64{fx.ids[0], fx.ids[2]}) {
		t.Errorf("dry run request %+v", req)
	}
	wantTestid(t, body, "plan-total", "2")
	wantTestid(t, body, "plan-gone", "1")
	wantTestid(t, body, "plan-deferred", "2")
	wantTestid(t, body, "plan-poison", "3")
	wantTestid(t, body, "plan-in-jobs", "0")
	wantTestid(t, body, "confirm-title", "Replay 2 messages")
	if n := strings.Count(body, `data-testid="sample-row"`); n != 2 {
		t.Errorf("%d sample rows, want 2", n)
	}
	if !strings.Contains(body, `data-testid="plan-warning">orders has no duplicate detection &lt;script&gt;alert(&#34;w&#34;)&lt;/script&gt;<`) {
		t.Errorf("the warning is missing or not escaped:\n%s", body)
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("markup from a warning or a message reached the page")
	}
	// The confirm form carries the same selection, and nothing of the filter.
	if got := hiddenInputs(body, "id"); !slices.Equal(got, []string{a, b}) {
		t.Errorf("hidden ids %v", got)
	}
	if hiddenInputs(body, "all_matching") != nil || hiddenInputs(body, "filter.entity") != nil {
		t.Error("a selection of ids carries a filter")
	}
	if got := hiddenInputs(body, "action"); !slices.Equal(got, []string{"replay"}) {
		t.Errorf("hidden action %v", got)
	}
	for _, id := range []string{"confirm-form", "confirm-destination", "confirm-rate", "confirm-scheduled", "confirm-allow-poison",
		"confirm-reason", "confirm-submit", "confirm-recheck", "plan-targets", "plan-sources"} {
		if !strings.Contains(body, `data-testid="`+id+`"`) {
			t.Errorf("the confirm page lacks %s", id)
		}
	}
	if !strings.Contains(body, `action="/jobs"`) || !strings.Contains(body, `formaction="/replays"`) {
		t.Error("the form does not post to /jobs, or re-check to /replays")
	}
	// No target fans out: the acknowledgement is not asked for.
	if strings.Contains(body, `data-testid="confirm-ack-fan-out"`) {
		t.Error("fan-out checkbox without a fan-out")
	}
}

func TestReplaySelectionAllMatching(t *testing.T) {
	fx := newJobsFixture(t)
	form := url.Values{
		"action": {"replay"}, "all_matching": {"true"}, "id": {idStr(fx.ids[0])},
		"filter.entity": {"orders"}, "filter.reason": {"SqlTimeout"}, "filter.since": {"2026-11-22T10:42"},
		"filter.property": {"tenant=t1", "n=3"}, "filter.q": {""}, "filter.include_gone": {"true"},
	}
	body := fx.postPage(t, "/replays", form, 200)
	subs := fx.jobs.submitted()
	if len(subs) != 1 {
		t.Fatalf("%d submissions", len(subs))
	}
	since := time.Date(2026, 11, 22, 10, 42, 0, 0, time.UTC)
	want := dlq.Filter{Entity: "orders", Reason: "SqlTimeout", Since: &since, IncludeGone: true,
		Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}, {Key: "n", Value: "3"}}}
	req := subs[0]
	if req.Selection.Filter == nil || !reflect.DeepEqual(*req.Selection.Filter, want) {
		t.Errorf("filter %+v, want %+v", req.Selection.Filter, want)
	}
	if req.Selection.IDs != nil {
		t.Errorf("ids %v with all_matching", req.Selection.IDs)
	}
	// What the job keeps of it (the engine marshals the filter).
	filterJSON, err := json.Marshal(req.Selection.Filter)
	if err != nil {
		t.Fatal(err)
	}
	var fj map[string]any
	if err := json.Unmarshal(filterJSON, &fj); err != nil {
		t.Fatalf("filter JSON %s: %v", filterJSON, err)
	}
	if fj["since"] != "2026-11-22T10:42:00.000Z" || fj["entity"] != "orders" || fj["include_gone"] != true ||
		fmt.Sprint(fj["property"]) != "[tenant=t1 n=3]" || fj["q"] != nil {
		t.Errorf("filter JSON %s", filterJSON)
	}
	wantTestid(t, body, "plan-total", "12")
	if n := strings.Count(body, `data-testid="sample-row"`); n != 10 {
		t.Errorf("%d sample rows, want 10", n)
	}
	if got := hiddenInputs(body, "all_matching"); !slices.Equal(got, []string{"true"}) {
		t.Errorf("all_matching %v", got)
	}
	if hiddenInputs(body, "id") != nil {
		t.Error("the confirm form carries ids as well as the filter")
	}
	if got := hiddenInputs(body, "filter.property"); !slices.Equal(got, []string{"tenant=t1", "n=3"}) {
		t.Errorf("filter.property %v", got)
	}
	if got := hiddenInputs(body, "filter.since"); !slices.Equal(got, []string{"2026-11-22T10:42"}) {
		t.Errorf("filter.since %v", got)
	}
	if !strings.Contains(body, `href="/messages?`) || !strings.Contains(body, "entity=orders") {
		t.Error("no way back to the filtered list")
	}

	// The confirm form, posted as it is, submits the same filter for real.
	res, _ := fx.post(t, "/jobs", url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.entity": {"orders"},
		"filter.reason": {"SqlTimeout"}, "filter.since": {"2026-11-22T10:42"}, "filter.property": {"tenant=t1", "n=3"},
		"filter.include_gone": {"true"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /jobs: %d", res.StatusCode)
	}
	subs = fx.jobs.submitted()
	if got := subs[len(subs)-1]; got.DryRun || !reflect.DeepEqual(*got.Selection.Filter, want) {
		t.Errorf("real submission %+v", got)
	}
}

func TestReplayConfirmStartsTheJob(t *testing.T) {
	fx := newJobsFixture(t)
	form := url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0]), idStr(fx.ids[1])}, "destination": {" orders-retry "},
		"rate_per_second": {"25.5"}, "scheduled_enqueue_at": {"2030-01-02T03:04"}, "acknowledge_fan_out": {"true"},
		"allow_poison": {"true"}, "reason": {"fixed the bug"}}
	res, body := fx.post(t, "/jobs", form)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/jobs/101" {
		t.Fatalf("status %d, Location %q: %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	subs := fx.jobs.submitted()
	if len(subs) != 1 {
		t.Fatalf("%d submissions", len(subs))
	}
	req := subs[0]
	at := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	if req.DryRun || req.Action != replay.ActionReplay || req.Destination != "orders-retry" || req.RatePerSecond != 25.5 ||
		req.ScheduledEnqueueAt == nil || !req.ScheduledEnqueueAt.Equal(at) || !req.AcknowledgeFanOut || !req.AllowPoison ||
		req.Reason != "fixed the bug" || !slices.Equal(req.Selection.IDs, []int64{fx.ids[0], fx.ids[1]}) {
		t.Errorf("request %+v", req)
	}
	// The job's page is where the redirect goes.
	page := fx.page(t, "/jobs/101", 200)
	wantTestid(t, page, "job-status", "queued")
	wantTestid(t, page, "job-total", "2")
}

func TestReplayConfirmOptionsRecheck(t *testing.T) {
	fx := newJobsFixture(t)
	// A subscription's messages to its topic: the plan fans out.
	fx.jobs.plan = func(req replay.Request) replay.Plan {
		return replay.Plan{Summary: replay.SelectionSummary{Total: 1},
			Targets: []replay.Target{{Source: "payments/Subscriptions/audit", Path: "payments", Kind: dlq.KindTopic, FanOut: true,
				DuplicateDetection: true, DuplicateDetectionWindow: 10 * time.Minute}}}
	}
	body := fx.postPage(t, "/replays", url.Values{"action": {"replay"}, "id": {idStr(fx.ids[1])}, "destination": {"payments"},
		"rate_per_second": {"5"}, "scheduled_enqueue_at": {"2030-01-02T03:04:05Z"}, "reason": {`<b>why</b>`}}, 200)
	if !strings.Contains(body, `data-testid="confirm-ack-fan-out"`) || !strings.Contains(body, `data-fan-out="true"`) {
		t.Error("a fan-out target does not ask for the acknowledgement")
	}
	if !strings.Contains(body, "yes, window 10m0s") {
		t.Error("duplicate detection not shown")
	}
	// The options re-render as typed (the time as a datetime-local value).
	for _, want := range []string{`name="destination" value="payments"`, `name="rate_per_second" value="5"`,
		`name="scheduled_enqueue_at" value="2030-01-02T03:04:05"`, `name="reason" value="&lt;b&gt;why&lt;/b&gt;"`} {
		if !strings.Contains(body, want) {
			t.Errorf("lacks %s", want)
		}
	}
	req := fx.jobs.submitted()[0]
	if !req.DryRun || req.Destination != "payments" || req.RatePerSecond != 5 || req.ScheduledEnqueueAt == nil {
		t.Errorf("dry run %+v", req)
	}
}

func TestDiscardNeedsAReason(t *testing.T) {
	fx := newJobsFixture(t)
	// From the selection: the confirm page asks for the reason; the dry run
	// goes through without one.
	body := fx.postPage(t, "/replays", url.Values{"action": {"discard"}, "id": {idStr(fx.ids[0])}}, 200)
	wantTestid(t, body, "confirm-title", "Discard 1 message")
	if !regexp.MustCompile(`name="reason" value="" required`).MatchString(body) {
		t.Error("the reason is not required on a discard's form")
	}
	if strings.Contains(body, `data-testid="confirm-destination"`) || strings.Contains(body, `data-testid="plan-targets"`) {
		t.Error("a discard shows replay options")
	}
	if got := fx.jobs.submitted(); len(got) != 1 || !got[0].DryRun {
		t.Fatalf("submissions %+v", got)
	}

	// Confirmed without a reason: refused, shown, nothing started.
	body = fx.postPage(t, "/jobs", url.Values{"action": {"discard"}, "id": {idStr(fx.ids[0])}, "reason": {"  "}}, http.StatusBadRequest)
	if !strings.Contains(body, `role="alert" data-testid="confirm-error" data-field="reason"`) ||
		!strings.Contains(body, "a discard needs a reason") {
		t.Errorf("the refusal is not shown:\n%s", body)
	}
	wantTestid(t, body, "plan-total", "1")
	if len(fx.jobs.jobs) != 0 {
		t.Error("a job was created")
	}
	if !regexp.MustCompile(`aria-invalid="true"`).MatchString(body) {
		t.Error("the reason field is not marked invalid")
	}

	// With a reason it starts.
	res, _ := fx.post(t, "/jobs", url.Values{"action": {"discard"}, "id": {idStr(fx.ids[0])}, "reason": {"test data"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d", res.StatusCode)
	}
	subs := fx.jobs.submitted()
	if last := subs[len(subs)-1]; last.DryRun || last.Action != replay.ActionDiscard || last.Reason != "test data" {
		t.Errorf("submission %+v", last)
	}
}

func TestReplayRefusals(t *testing.T) {
	xss := `<script>alert("e")</script>`
	for _, tt := range []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{"conflict", &replay.ConflictError{MessageIDs: []int64{1}, Jobs: []int64{7}, Count: 1}, http.StatusConflict, "already in an active job (job [7])"},
		{"fan-out", &replay.PreconditionError{Msg: "replaying audit's dead letters to its topic " + xss}, http.StatusUnprocessableEntity,
			"replaying audit&#39;s dead letters to its topic &lt;script&gt;"},
		{"destination", &replay.InvalidError{Param: "destination", Msg: "nope does not exist"}, http.StatusBadRequest, "nope does not exist"},
		// The page has a checkbox where the API has a key: its words say so.
		{"fan-out in words", &replay.PreconditionError{Msg: "replaying s's dead letters to its topic t delivers a copy to every subscription " +
			"of the topic, not only to s: set acknowledge_fan_out to do it anyway, or choose a queue as the destination"},
			http.StatusUnprocessableEntity, "not only to s: tick “I understand …” below (it names who receives the copies) to do it anyway"},
		{"unreachable", fmt.Errorf("check orders: %w", dlq.ErrUnreachable), http.StatusServiceUnavailable, "check orders"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newJobsFixture(t)
			fx.jobs.submitErr = tt.err
			body := fx.postPage(t, "/jobs", url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, "reason": {xss}}, tt.status)
			if !strings.Contains(body, `role="alert" data-testid="confirm-error"`) || !strings.Contains(body, tt.want) {
				t.Errorf("the refusal is not shown:\n%s", body)
			}
			if strings.Contains(body, "<script>alert") {
				t.Error("markup reached the page")
			}
			if strings.Contains(body, "set acknowledge_fan_out") {
				t.Error("the page tells people to set an API key")
			}
			if !strings.Contains(body, `value="&lt;script&gt;alert(&#34;e&#34;)&lt;/script&gt;"`) {
				t.Error("the typed reason is not kept (escaped)")
			}
			// The form can be submitted again: the selection is still there.
			if got := hiddenInputs(body, "id"); !slices.Equal(got, []string{idStr(fx.ids[0])}) {
				t.Errorf("hidden ids %v", got)
			}
			if len(fx.jobs.jobs) != 0 {
				t.Error("a job was created")
			}
		})
	}
	t.Run("internal", func(t *testing.T) {
		fx := newJobsFixture(t)
		fx.jobs.submitErr = errors.New("disk on fire")
		body := fx.postPage(t, "/jobs", url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}}, http.StatusInternalServerError)
		if strings.Contains(body, "disk on fire") {
			t.Error("an internal error's text reached the page")
		}
	})
}

func TestReplayFormErrors(t *testing.T) {
	fx := newJobsFixture(t)
	for _, tt := range []struct {
		name   string
		form   url.Values
		field  string
		submit bool // whether a dry run still shows the selection
	}{
		{"nothing selected", url.Values{"action": {"replay"}, "filter.entity": {"orders"}}, "id", false},
		{"bad id", url.Values{"action": {"replay"}, "id": {"12", "x"}}, "id", false},
		{"bad filter", url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.state": {"sleeping"}}, "filter.state", false},
		{"unknown filter", url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.colour": {"red"}}, "filter.colour", false},
		{"bad rate", url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, "rate_per_second": {"fast"}}, "rate_per_second", true},
		{"bad time", url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, "scheduled_enqueue_at": {"tomorrow"}}, "scheduled_enqueue_at", true},
		{"unknown field", url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, "priority": {"high"}}, "priority", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fx.jobs.submitted())
			for _, target := range []string{"/replays", "/jobs"} {
				body := fx.postPage(t, target, tt.form, http.StatusBadRequest)
				if !strings.Contains(body, `data-testid="confirm-error" data-field="`+tt.field+`"`) {
					t.Errorf("%s: the error does not name %s:\n%.3000s", target, tt.field, body)
				}
				if strings.Contains(body, `data-testid="plan"`) != tt.submit {
					t.Errorf("%s: plan shown: %v, want %v", target, !tt.submit, tt.submit)
				}
			}
			for _, req := range fx.jobs.submitted()[before:] {
				if !req.DryRun {
					t.Errorf("a refused form was submitted for real: %+v", req)
				}
			}
		})
	}
}

func TestReplayWithoutEngine(t *testing.T) {
	fx := newAPIFixture(t) // no Jobs
	var typedNil *fakeJobs
	for name, h := range map[string]http.Handler{"nil": fx.h, "typed nil": New(Config{Catalog: fx.st, Jobs: typedNil}).Handler()} {
		t.Run(name, func(t *testing.T) {
			fx := &apiFixture{h: h, st: fx.st, ids: fx.ids}
			for _, target := range []string{"/jobs", "/jobs/1", "/audit"} {
				fx.page(t, target, http.StatusNotFound)
			}
			for _, target := range []string{"/replays", "/jobs", "/jobs/1/pause", "/jobs/1/resume", "/jobs/1/cancel"} {
				fx.postPage(t, target, url.Values{"action": {"replay"}, "id": {"1"}}, http.StatusNotFound)
			}
			body := fx.page(t, "/messages", 200)
			if !strings.Contains(body, `<button type="submit" disabled data-testid="replay-button"`) ||
				!strings.Contains(body, "Replay arrives with the replay engine") || strings.Contains(body, `data-testid="discard-button"`) {
				t.Error("without an engine the selection's buttons are not disabled with the note")
			}
			if strings.Contains(body, `data-testid="nav-jobs"`) || strings.Contains(body, `data-testid="nav-audit"`) {
				t.Error("the navigation links to pages that do not exist")
			}
			if strings.Contains(fx.page(t, "/messages/"+idStr(fx.ids[0]), 200), `data-testid="replays"`) {
				t.Error("the message page shows replays without an engine")
			}
		})
	}
}

func TestMessagesPageReplayButtons(t *testing.T) {
	fx := newJobsFixture(t)
	body := fx.page(t, "/messages?entity=orders", 200)
	for _, want := range []string{
		`<form id="selection" method="post" action="/replays"`,
		`<button type="submit" name="action" value="replay" data-testid="replay-button" aria-describedby="selection-hint">`,
		`<button type="submit" name="action" value="discard" class="secondary" data-testid="discard-button" aria-describedby="selection-hint">`,
		`id="selection-hint"`,
		`<input type="hidden" name="filter.entity" value="orders">`,
		`data-testid="nav-jobs"`, `data-testid="nav-audit"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the message list lacks %s", want)
		}
	}
	if strings.Contains(body, "Replay arrives with the replay engine") {
		t.Error("the note is still there")
	}
}

// The message page's edit form: the body as text and the properties as
// JSON go to the engine as an edit of that one message, then to its job.
func TestEditAndReplayForm(t *testing.T) {
	fx := newJobsFixture(t)
	var textID int64
	for _, r := range fx.recs {
		if len(r.Body) > 0 && utf8.Valid(r.Body) && !strings.ContainsRune(string(r.Body), 0) {
			textID = r.ID
			break
		}
	}
	if body := fx.page(t, "/messages/"+idStr(textID), 200); !strings.Contains(body, `data-testid="edit-replay-open">Edit and replay…</button>`) {
		t.Fatal("the message page has no edit-and-replay button")
	}
	body := fx.page(t, "/messages/"+idStr(textID)+"/edit", 200)
	if !strings.Contains(body, `data-testid="edit-body"`) || !strings.Contains(body, `data-testid="edit-properties"`) {
		t.Fatal("the edit page has no edit form")
	}
	res, _ := fx.post(t, "/messages/"+idStr(textID)+"/edit", url.Values{"body": {`{"fixed":true}`},
		"application_properties": {`{"tenant":"t2","n":7}`}, "destination": {"orders-retry"}})
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/jobs/") {
		t.Fatalf("edit: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	subs := fx.jobs.submitted()
	got := subs[len(subs)-1]
	if got.DryRun || got.Action != replay.ActionReplay || len(got.Selection.IDs) != 1 || got.Selection.IDs[0] != textID ||
		got.Selection.Edit == nil || string(got.Selection.Edit.Body) != `{"fixed":true}` ||
		string(got.Selection.Edit.ApplicationProperties) != `{"tenant":"t2","n":7}` || got.Destination != "orders-retry" {
		t.Fatalf("submitted %+v", got)
	}
	// Properties that are not an object of plain values: refused, said.
	body = fx.postPage(t, "/messages/"+idStr(textID)+"/edit", url.Values{"application_properties": {`{"a":[1,2]}`}}, http.StatusBadRequest)
	if !strings.Contains(body, "application_properties") {
		t.Errorf("the refusal does not name the field:\n%.2000s", body)
	}
	fx.postPage(t, "/messages/"+idStr(textID)+"/edit", url.Values{"application_properties": {`not json`}}, http.StatusBadRequest)
}

// A refusal makes at most one more submission: the dry run whose plan the
// page shows (of the selection alone when the options were what was refused).
func TestReplayRefusalSubmitsOnce(t *testing.T) {
	for _, target := range []string{"/replays", "/jobs"} {
		t.Run(target, func(t *testing.T) {
			fx := newJobsFixture(t)
			fx.jobs.checkOptions = func(req replay.Request) error {
				if req.RatePerSecond > 100 {
					return &replay.InvalidError{Param: "rate_per_second", Msg: "too fast for this test"}
				}
				return nil
			}
			form := url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0]), idStr(fx.ids[1])}, "rate_per_second": {"500"}}
			body := fx.postPage(t, target, form, http.StatusBadRequest)
			if !strings.Contains(body, `data-field="rate_per_second"`) || !strings.Contains(body, "too fast for this test") {
				t.Errorf("the refusal is not shown:\n%.3000s", body)
			}
			subs := fx.jobs.submitted()
			if len(subs) > 2 {
				t.Fatalf("%d submissions for one refused form, want at most 2: %+v", len(subs), subs)
			}
			last := subs[len(subs)-1]
			if target == "/replays" && (len(subs) != 2 || !last.DryRun || last.RatePerSecond != 0 || len(last.Selection.IDs) != 2) {
				t.Errorf("the refusal's dry run %+v, want the selection alone", last)
			}
			if target == "/replays" {
				wantTestid(t, body, "plan-total", "2")
				if !strings.Contains(body, `data-testid="plan-selection-only"`) {
					t.Error("the plan is not marked as the selection's alone")
				}
			}
			if len(fx.jobs.jobs) != 0 {
				t.Error("a job was created")
			}
		})
	}
}
