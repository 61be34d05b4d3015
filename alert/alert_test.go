package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// fakeStore is the catalog and history the Alerter reads, in memory.
type fakeStore struct {
	mu         sync.Mutex
	groups     []dlq.GroupSummary
	fresh      []string
	oldest     map[string]time.Time
	reopenings []Reopening
	audited    []int64
	hooks      []Webhook
	deliveries []Delivery
	// copies: catalog id of a copy dead-lettered again → its job as the
	// store reads it; asked records the ids JobsOfCopies was asked about.
	copies map[int64]replay.Job
	asked  []int64
}

func (f *fakeStore) JobsOfCopies(_ context.Context, ids []int64) ([]replay.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ids...)
	seen := map[int64]bool{}
	var out []replay.Job
	for _, id := range ids {
		if j, ok := f.copies[id]; ok && !seen[j.ID] {
			seen[j.ID] = true
			out = append(out, j)
		}
	}
	return out, nil
}

func (f *fakeStore) ListGroups(context.Context) ([]dlq.GroupSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]dlq.GroupSummary(nil), f.groups...), nil
}

func (f *fakeStore) TakeNewGroups(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.fresh
	f.fresh = nil
	return out, nil
}

func (f *fakeStore) OldestPresent(_ context.Context, keys []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, k := range keys {
		if t, ok := f.oldest[k]; ok {
			out[k] = t
		}
	}
	return out, nil
}

func (f *fakeStore) UnauditedReopenings(context.Context) ([]Reopening, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Reopening
	for _, r := range f.reopenings {
		done := false
		for _, id := range f.audited {
			done = done || id == r.ID
		}
		if !done {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeStore) MarkReopeningAudited(_ context.Context, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audited = append(f.audited, id)
	return nil
}

func (f *fakeStore) AlertWebhooks(context.Context) ([]Webhook, error) { return f.hooks, nil }

func (f *fakeStore) AddAlertDelivery(_ context.Context, d Delivery) (Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d.ID = int64(len(f.deliveries) + 1)
	f.deliveries = append(f.deliveries, d)
	return d, nil
}

func (f *fakeStore) AlertDeliveriesSince(_ context.Context, since time.Time) ([]Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Delivery
	for _, d := range f.deliveries {
		if !d.At.Before(since) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeStore) sent() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Delivery(nil), f.deliveries...)
}

// fakePoster answers with the statuses given, in turn (the last one
// repeats), and keeps the bodies.
type fakePoster struct {
	mu       sync.Mutex
	statuses []int
	err      error
	bodies   [][]byte
	urls     []string
}

func (p *fakePoster) Post(_ context.Context, url string, body []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bodies = append(p.bodies, body)
	p.urls = append(p.urls, url)
	if p.err != nil {
		return 0, p.err
	}
	st := 200
	if len(p.statuses) > 0 {
		st = p.statuses[0]
		if len(p.statuses) > 1 {
			p.statuses = p.statuses[1:]
		}
	}
	return st, nil
}

type fakeAudit struct{ records []audit.Record }

func (a *fakeAudit) Append(_ context.Context, r audit.Record) (audit.Entry, error) {
	a.records = append(a.records, r)
	return audit.Entry{}, nil
}

var t0 = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func group(key, reason string, status dlq.GroupStatus, total int64) dlq.GroupSummary {
	return dlq.GroupSummary{Group: dlq.Group{ID: key, Reason: reason, DescriptionPattern: "Order <n> not found"},
		Entities: []string{"orders"}, Present: total, Total: total, Triage: dlq.GroupTriage{Status: status}}
}

// harness is an Alerter on fakes, its clock set by now.
type harness struct {
	a     *Alerter
	st    *fakeStore
	post  *fakePoster
	audit *fakeAudit
	now   time.Time
}

func newHarness(t *testing.T, hooks ...Webhook) *harness {
	t.Helper()
	h := &harness{st: &fakeStore{oldest: map[string]time.Time{}}, post: &fakePoster{}, audit: &fakeAudit{}, now: t0}
	h.a = New(Config{Store: h.st, Poster: h.post, Audit: h.audit, Webhooks: hooks, PublicURL: "https://dlq.example/",
		Backoff: time.Millisecond, Now: func() time.Time { return h.now }})
	return h
}

func (h *harness) evaluate(t *testing.T) []Delivery {
	t.Helper()
	h.a.Evaluate(t.Context())
	h.a.deliverWG.Wait()
	return h.st.sent()
}

var slackHook = Webhook{Name: "ops", URL: "https://hooks.slack.example/services/T0/B0/secret", Host: "hooks.slack.example",
	Format: FormatSlack, Events: []Event{EventNewGroup, EventGroupGrowth, EventUntriaged, EventJobPaused, EventJobRedeadlettered},
	GrowthPerMinute: 100, UntriagedAfter: 30 * time.Minute, FromConfig: true}

// TestNewGroupAlert: a new group is told once, as Slack's JSON, linking to
// its page under the public URL; known and resolved new groups are silent.
func TestNewGroupAlert(t *testing.T) {
	h := newHarness(t, slackHook)
	h.st.groups = []dlq.GroupSummary{group("g1", "MaxDeliveryCountExceeded", dlq.StatusNew, 3),
		group("g2", "Known", dlq.StatusKnown, 5), group("g3", "Done", dlq.StatusResolved, 1)}
	h.st.fresh = []string{"g1", "g2", "g3"}
	ds := h.evaluate(t)
	if len(ds) != 1 {
		t.Fatalf("deliveries %+v: want one, for g1", ds)
	}
	d := ds[0]
	if d.Event != EventNewGroup || d.Subject != "g1" || d.Link != "https://dlq.example/groups/g1" || !d.OK() || d.Webhook != "config:ops" {
		t.Errorf("delivery %+v", d)
	}
	var body struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type string `json:"type"`
			Text struct {
				Type, Text string
			} `json:"text"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(h.post.bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	if body.Text != "New failure group: MaxDeliveryCountExceeded · Order <n> not found" {
		t.Errorf("slack text %q", body.Text)
	}
	if len(body.Blocks) == 0 || body.Blocks[0].Type != "section" || body.Blocks[0].Text.Type != "mrkdwn" ||
		!strings.HasPrefix(body.Blocks[0].Text.Text, "*<https://dlq.example/groups/g1|New failure group: MaxDeliveryCountExceeded · Order &lt;n&gt; not found>*\n") {
		t.Errorf("slack blocks %+v", body.Blocks)
	}
	if h.post.urls[0] != slackHook.URL {
		t.Errorf("posted to %q", h.post.urls[0])
	}
	// Evaluated again: nothing new.
	if ds := h.evaluate(t); len(ds) != 1 {
		t.Errorf("a second evaluation sent %d", len(ds)-1)
	}
}

// TestFormats: the three formats' JSON bodies.
func TestFormats(t *testing.T) {
	a := Alert{Event: EventJobPaused, Subject: "7", Title: "Replay job 7 paused itself", Text: "canary failed: 2 of 10 copies <dead-lettered> again",
		Path: "/jobs/7", At: t0, Job: &JobFacts{ID: 7, Status: "paused", PausedReason: "canary failed", Total: 100, Sent: 10, Redeadlettered: 2}}
	link := "https://dlq.example/jobs/7"

	b, err := Body(FormatTeams, a, link)
	if err != nil {
		t.Fatal(err)
	}
	var teams struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Type    string `json:"type"`
				Version string `json:"version"`
				Body    []struct {
					Type, Text string
				} `json:"body"`
				Actions []struct {
					Type, Title, URL string
				} `json:"actions"`
			} `json:"content"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(b, &teams); err != nil {
		t.Fatal(err)
	}
	if teams.Type != "message" || len(teams.Attachments) != 1 || teams.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" {
		t.Fatalf("teams %s", b)
	}
	card := teams.Attachments[0].Content
	if card.Type != "AdaptiveCard" || card.Body[0].Text != a.Title || card.Body[1].Text != a.Text ||
		len(card.Actions) != 1 || card.Actions[0].Type != "Action.OpenUrl" || card.Actions[0].URL != link {
		t.Errorf("teams card %s", b)
	}

	b, err = Body(FormatGeneric, a, link)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	job, _ := generic["job"].(map[string]any)
	if generic["event"] != "job_paused" || generic["link"] != link || generic["subject"] != "7" || generic["at"] != "2026-11-26T09:00:00Z" ||
		job["paused_reason"] != "canary failed" || job["redeadlettered"] != 2.0 || generic["group"] != nil {
		t.Errorf("generic %s", b)
	}

	b, _ = Body(FormatSlack, a, "")
	if !strings.Contains(string(b), `"text":"*Replay job 7 paused itself*\ncanary failed: 2 of 10 copies &lt;dead-lettered&gt; again"`) {
		t.Errorf("slack without a link: %s", b)
	}
	if _, err := Body("xml", a, link); err == nil {
		t.Error("an unknown format made a body")
	}
}

// TestRepeatsAreRateLimited: an untriaged group is told once per
// RepeatEvery (15 minutes by default), not on every evaluation; marked
// known, it is silent.
func TestRepeatsAreRateLimited(t *testing.T) {
	h := newHarness(t, slackHook)
	h.st.groups = []dlq.GroupSummary{group("g1", "Timeout", dlq.StatusNew, 3)}
	h.st.oldest["g1"] = t0.Add(-20 * time.Minute)
	if ds := h.evaluate(t); len(ds) != 0 {
		t.Fatalf("20 minutes old, threshold 30: sent %+v", ds)
	}
	h.now = t0.Add(11 * time.Minute)
	if ds := h.evaluate(t); len(ds) != 1 || ds[0].Event != EventUntriaged || !strings.HasPrefix(ds[0].Title, "Untriaged for 31m0s") {
		t.Fatalf("31 minutes old: %+v", ds)
	}
	h.now = t0.Add(20 * time.Minute)
	if ds := h.evaluate(t); len(ds) != 1 {
		t.Fatalf("9 minutes later: %d sent, want still 1", len(ds))
	}
	h.now = t0.Add(27 * time.Minute)
	if ds := h.evaluate(t); len(ds) != 2 {
		t.Fatalf("16 minutes later: %d sent, want 2", len(ds))
	}
	// Known: silent, however old.
	h.st.groups[0].Triage.Status = dlq.StatusKnown
	h.now = t0.Add(60 * time.Minute)
	if ds := h.evaluate(t); len(ds) != 2 {
		t.Fatalf("known: %d sent, want still 2", len(ds))
	}
	// A restart remembers what was sent (from the history).
	h.st.groups[0].Triage.Status = dlq.StatusNew
	h.now = t0.Add(30 * time.Minute)
	h2 := &harness{st: h.st, post: h.post, now: h.now}
	h2.a = New(Config{Store: h.st, Poster: h.post, Webhooks: []Webhook{slackHook}, Now: func() time.Time { return h2.now }})
	if err := h2.a.loadSent(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ds := h2.evaluate(t); len(ds) != 2 {
		t.Fatalf("after a restart 3 minutes after the last: %d sent, want still 2", len(ds))
	}
}

// TestGrowth: a group growing past the threshold per minute is told; one
// growing slower, or known, is not.
func TestGrowth(t *testing.T) {
	h := newHarness(t, slackHook)
	h.st.groups = []dlq.GroupSummary{group("fast", "A", dlq.StatusInvestigating, 10), group("slow", "B", dlq.StatusNew, 10),
		group("known", "C", dlq.StatusKnown, 10)}
	h.evaluate(t)
	h.now = t0.Add(30 * time.Second)
	h.evaluate(t)
	h.now = t0.Add(61 * time.Second)
	h.st.groups[0].Total, h.st.groups[1].Total, h.st.groups[2].Total = 210, 60, 1000
	ds := h.evaluate(t)
	if len(ds) != 1 || ds[0].Event != EventGroupGrowth || ds[0].Subject != "fast" {
		t.Fatalf("deliveries %+v: want growth of fast only", ds)
	}
}

// TestJobAlerts: a job that paused itself is told, one paused by a person
// is not; copies dead-lettered again are told when the count grows.
func TestJobAlerts(t *testing.T) {
	h := newHarness(t, slackHook)
	h.a.JobChanged(replay.Job{ID: 1, Status: replay.StatusPaused, PausedReason: "paused by alice"})
	h.a.JobChanged(replay.Job{ID: 2, Status: replay.StatusPaused, PausedReason: "canary failed: 3 of 10 copies dead-lettered again",
		Counts: replay.Counts{Sent: 10, Redeadlettered: 3}})
	ds := h.evaluate(t)
	events := map[Event]string{}
	for _, d := range ds {
		events[d.Event] = d.Subject
	}
	if len(ds) != 2 || events[EventJobPaused] != "2" || events[EventJobRedeadlettered] != "2" || ds[0].Link != "https://dlq.example/jobs/2" {
		t.Fatalf("deliveries %+v", ds)
	}
	// The same count again: nothing.
	h.a.JobChanged(replay.Job{ID: 2, Status: replay.StatusCancelled, Counts: replay.Counts{Sent: 10, Redeadlettered: 3}})
	if ds := h.evaluate(t); len(ds) != 2 {
		t.Errorf("unchanged count: %d sent", len(ds))
	}
}

// TestJobAlertsOfCopiesAfterTheJob: copies dead-lettered again after their
// job ended (the engine tells nothing then) are told from the catalog's new
// dead letters; ordinary dead letters and active messages are not jobs'.
func TestJobAlertsOfCopiesAfterTheJob(t *testing.T) {
	h := newHarness(t, slackHook)
	h.a.JobChanged(replay.Job{ID: 5, Status: replay.StatusCompleted, Counts: replay.Counts{Completed: 4}})
	if ds := h.evaluate(t); len(ds) != 0 {
		t.Fatalf("a completed job alerted: %+v", ds)
	}
	h.st.copies = map[int64]replay.Job{
		101: {ID: 5, Status: replay.StatusCompleted, Counts: replay.Counts{Completed: 4, Redeadlettered: 2}},
		102: {ID: 5, Status: replay.StatusCompleted, Counts: replay.Counts{Completed: 4, Redeadlettered: 2}},
	}
	h.a.CatalogChanged(dlq.Change{Kind: dlq.ChangeNew, SubQueue: dlq.SubQueueMain, IDs: []int64{99}})
	h.a.CatalogChanged(dlq.Change{Kind: dlq.ChangeNew, SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{100, 101, 102}})
	ds := h.evaluate(t)
	if len(ds) != 1 || ds[0].Event != EventJobRedeadlettered || ds[0].Subject != "5" || ds[0].Link != "https://dlq.example/jobs/5" {
		t.Fatalf("deliveries %+v: want job 5's copies dead-lettered again", ds)
	}
	if fmt.Sprint(h.st.asked) != "[100 101 102]" {
		t.Errorf("asked about %v, want the dead letters [100 101 102]", h.st.asked)
	}
	// Asked once: the next evaluation has no new dead letters to look at.
	if ds := h.evaluate(t); len(ds) != 1 || len(h.st.asked) != 3 {
		t.Errorf("a second evaluation: %d deliveries, asked %v", len(ds), h.st.asked)
	}
}

// TestDeliveryRetriesAndRecords: a 503 is retried with backoff, a 400 is
// not, and an unreachable webhook is tried Attempts times; each ends in
// the history with its answer.
func TestDeliveryRetriesAndRecords(t *testing.T) {
	h := newHarness(t, slackHook)
	h.post.statuses = []int{503, 200}
	h.st.groups = []dlq.GroupSummary{group("g1", "A", dlq.StatusNew, 1)}
	h.st.fresh = []string{"g1"}
	ds := h.evaluate(t)
	if len(ds) != 1 || !ds[0].OK() || ds[0].Attempts != 2 || ds[0].StatusCode != 200 {
		t.Fatalf("503 then 200: %+v", ds)
	}
	h.post.statuses = []int{400}
	h.st.groups = append(h.st.groups, group("g2", "B", dlq.StatusNew, 1))
	h.st.fresh = []string{"g2"}
	ds = h.evaluate(t)
	if len(ds) != 2 || ds[1].OK() || ds[1].Attempts != 1 || ds[1].StatusCode != 400 || ds[1].Error != "the webhook answered 400" {
		t.Fatalf("400: %+v", ds[1:])
	}
	h.post.err = errors.New("could not reach the webhook: dial tcp: connection refused")
	h.st.groups = append(h.st.groups, group("g3", "C", dlq.StatusNew, 1))
	h.st.fresh = []string{"g3"}
	ds = h.evaluate(t)
	if len(ds) != 3 || ds[2].OK() || ds[2].Attempts != DefaultAttempts || !strings.Contains(ds[2].Error, "connection refused") {
		t.Fatalf("unreachable: %+v", ds[2:])
	}
}

// TestReopenedGroup: a reopening is audited as group_reopened by the
// system, once, and told as a new group.
func TestReopenedGroup(t *testing.T) {
	h := newHarness(t, slackHook)
	h.st.groups = []dlq.GroupSummary{group("g1", "A", dlq.StatusNew, 5)}
	h.st.reopenings = []Reopening{{ID: 4, GroupKey: "g1", Name: "A · x", At: t0, Added: 2}}
	ds := h.evaluate(t)
	if len(ds) != 1 || !strings.HasPrefix(ds[0].Title, "Resolved group failing again") {
		t.Fatalf("deliveries %+v", ds)
	}
	if len(h.audit.records) != 1 || h.audit.records[0].Action != audit.ActionGroupReopened || h.audit.records[0].Actor != audit.ActorSystem {
		t.Fatalf("audit %+v", h.audit.records)
	}
	h.evaluate(t)
	if len(h.audit.records) != 1 {
		t.Errorf("audited %d times", len(h.audit.records))
	}
}

// TestCheck: only http(s) URLs with a host; errors never repeat the URL.
func TestCheck(t *testing.T) {
	for _, u := range []string{"ftp://hooks.example/x", "javascript:alert(1)", "file:///etc/passwd", "https://", "hooks.example/secret", ""} {
		w := Webhook{Name: "x", URL: u, Format: FormatSlack, Events: []Event{EventNewGroup}}
		err := w.Check()
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Param != "url" {
			t.Errorf("%q: %v, want an invalid url", u, err)
		} else if u != "" && strings.Contains(err.Error(), u) {
			t.Errorf("%q: the error repeats the URL: %v", u, err)
		}
	}
	w := Webhook{Name: "ops", URL: " https://hooks.example:8443/services/T/B/s ", Format: FormatTeams, Events: []Event{EventNewGroup}}
	if err := w.Check(); err != nil || w.Host != "hooks.example:8443" {
		t.Errorf("https: %v, host %q", err, w.Host)
	}
	bad := []struct {
		w     Webhook
		param string
	}{
		{Webhook{Name: "", URL: "https://h/x", Format: FormatSlack, Events: []Event{EventNewGroup}}, "name"},
		{Webhook{Name: "a", URL: "https://h/x", Format: "xml", Events: []Event{EventNewGroup}}, "format"},
		{Webhook{Name: "a", URL: "https://h/x", Format: FormatSlack}, "events"},
		{Webhook{Name: "a", URL: "https://h/x", Format: FormatSlack, Events: []Event{"everything"}}, "events"},
		{Webhook{Name: "a", URL: "https://h/x", Format: FormatSlack, Events: []Event{EventGroupGrowth}}, "growth_per_minute"},
		{Webhook{Name: "a", URL: "https://h/x", Format: FormatSlack, Events: []Event{EventUntriaged}}, "untriaged_after"},
	}
	for _, b := range bad {
		var ie *InvalidError
		if err := b.w.Check(); !errors.As(err, &ie) || ie.Param != b.param {
			t.Errorf("%+v: %v, want %s refused", b.w, err, b.param)
		}
	}
}

// TestManyNewGroups: past five new groups at once, the rest are told in
// one alert linking to the groups page, not one each.
func TestManyNewGroups(t *testing.T) {
	h := newHarness(t, slackHook)
	for i := range 9 {
		key := "g" + string(rune('1'+i))
		h.st.groups = append(h.st.groups, group(key, "Reason"+key, dlq.StatusNew, 1))
		h.st.fresh = append(h.st.fresh, key)
	}
	ds := h.evaluate(t)
	if len(ds) != maxNewGroups+1 {
		t.Fatalf("%d deliveries, want %d", len(ds), maxNewGroups+1)
	}
	var summary *Delivery
	for i := range ds {
		if strings.HasPrefix(ds[i].Subject, "more:") {
			summary = &ds[i]
		}
	}
	if summary == nil || summary.Title != "4 more new failure groups" || summary.Link != "https://dlq.example/groups" {
		t.Fatalf("summary %+v", summary)
	}
	var body struct{ Text string }
	for i, b := range h.post.bodies {
		json.Unmarshal(b, &body)
		if body.Text == "4 more new failure groups" && !strings.Contains(string(h.post.bodies[i]), "; and 1 more.") {
			t.Errorf("summary body %s", h.post.bodies[i])
		}
	}
}
