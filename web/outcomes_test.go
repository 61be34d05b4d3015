package web

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// TestJobPagesSayWhatCameBack: the job page and the jobs list say in words
// how many copies were dead-lettered again and why, and colour it; a job
// whose copies all came back is not shown as a success; the canary options
// are on the job page.
func TestJobPagesSayWhatCameBack(t *testing.T) {
	fx := newJobsFixture(t)
	half := 0.5
	some := runningJob(7)
	some.Status, some.Total = replay.StatusCompleted, 1000
	some.Counts = replay.Counts{Completed: 1000, Redeadlettered: 987}
	some.RedeadletteredReasons = []replay.ReasonCount{{Reason: "SqlTimeout", Count: 980}, {Reason: "<b>Bad</b>", Count: 7}}
	some.Canary = replay.Canary{Count: 10, Watch: 30 * time.Second, PauseOnRedeadletter: &half, Verdict: replay.CanaryPassed}
	all := runningJob(8)
	all.Status, all.Total = replay.StatusCompleted, 20
	all.Counts = replay.Counts{Completed: 20, Redeadlettered: 20}
	all.RedeadletteredReasons = []replay.ReasonCount{{Reason: "SqlTimeout", Count: 20}}
	none := runningJob(9)
	none.Status, none.Total, none.Counts = replay.StatusCompleted, 5, replay.Counts{Completed: 5}
	fx.jobs.add(some)
	fx.jobs.add(all)
	fx.jobs.add(none)

	body := fx.page(t, "/jobs/7", 200)
	wantTestid(t, body, "job-redeadlettered", "987")
	outcome := regexp.MustCompile(`(?s)data-testid="job-outcome">(.*?)</p>`).FindStringSubmatch(body)
	if outcome == nil || !strings.Contains(html.UnescapeString(outcome[1]), "1,000 sent · 987 dead-lettered again: SqlTimeout (980), <b>Bad</b> (7)") ||
		!strings.Contains(outcome[1], "outcome-warn") || strings.Contains(outcome[1], "<b>") {
		t.Errorf("job 7's outcome: %v", outcome)
	}
	wantTestid(t, body, "job-canary", "send 10 first, watch them for 30s (passed); pause when more than 50 % of the copies come back")

	list := fx.page(t, "/jobs", 200)
	row := func(id string) string {
		return regexp.MustCompile(`(?s)<tr id="job-` + id + `".*?</tr>`).FindString(list)
	}
	r8 := row("8")
	if !strings.Contains(r8, "20 sent · all 20 dead-lettered again: SqlTimeout") || !strings.Contains(r8, `class="badge outcome-failed"`) {
		t.Errorf("job 8's row does not say that every copy came back:\n%s", r8)
	}
	if strings.Contains(r8, "status-completed") || !strings.Contains(r8, `class="badge status-failed" data-testid="job-row-status">completed<`) {
		t.Errorf("job 8's row shows a success:\n%s", r8)
	}
	if r9 := row("9"); !strings.Contains(r9, "5 sent · none dead-lettered again so far") || !strings.Contains(r9, "status-completed") {
		t.Errorf("job 9's row:\n%s", r9)
	}
}

// fakeOutcomes answers JobsOfCopies from a map of catalog id to job.
type fakeOutcomes struct {
	mu    sync.Mutex
	jobs  map[int64]replay.Job
	asked [][]int64
}

func (f *fakeOutcomes) JobsOfCopies(_ context.Context, ids []int64) ([]replay.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, slices.Clone(ids))
	var out []replay.Job
	for _, id := range ids {
		if j, ok := f.jobs[id]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}

// TestLiveRedeadlettered: new catalog messages that are copies of a job
// refresh that job's page and row, with no job change published.
func TestLiveRedeadlettered(t *testing.T) {
	back := runningJob(7)
	back.Counts.Redeadlettered = 3 // of 2 sent + 9 completed
	back.RedeadletteredReasons = []replay.ReasonCount{{Reason: "SqlTimeout", Count: 3}}
	fo := &fakeOutcomes{jobs: map[int64]replay.Job{101: back}}
	base := newLiveFixture(t, HubConfig{Outcomes: fo})
	srv := httptest.NewServer(New(Config{Catalog: base.st, Hub: base.hub, Jobs: newFakeJobs(nil)}).Handler())
	t.Cleanup(srv.Close)
	fx := &liveFixture{srv: srv, hub: base.hub, path: base.path, st: base.st}
	page := fx.dial(t, "page=job&id=7")
	list := fx.dial(t, "page=jobs")

	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{100, 101}})
	op := until(t, page, views.FragmentID("job-progress", "7"))
	if !strings.Contains(op.HTML, "11 sent · 3 dead-lettered again: SqlTimeout") || !strings.Contains(op.HTML, `data-testid="job-redeadlettered">3<`) {
		t.Errorf("the job page got %+v", op)
	}
	if op := until(t, list, "job-7"); !strings.Contains(op.HTML, "3 dead-lettered again") {
		t.Errorf("the list got %+v", op)
	}
	fo.mu.Lock()
	defer fo.mu.Unlock()
	if len(fo.asked) != 1 || !slices.Equal(fo.asked[0], []int64{100, 101}) {
		t.Errorf("asked for the jobs of %v, want [[100 101]] once", fo.asked)
	}
}

// TestReplayFormProposesACanary: the confirm page of a replay of more than
// 100 messages proposes a canary of 10 and pause_on_redeadletter 0.5, once
// (an emptied field stays empty); a small replay or a discard proposes
// none; the fields reach the engine, and bad ones are refused naming them.
func TestReplayFormProposesACanary(t *testing.T) {
	fx := newJobsFixture(t)
	total := 101
	fx.jobs.plan = func(req replay.Request) replay.Plan {
		return replay.Plan{Summary: replay.SelectionSummary{Total: total}}
	}
	first := url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}}
	body := fx.postPage(t, "/replays", first, 200)
	for _, want := range []string{`name="canary_count" value="10"`, `name="pause_on_redeadletter" value="0.5"`,
		`<input type="hidden" name="canary_offered" value="true"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the confirm page of 101 messages lacks %s", want)
		}
	}
	// Checked again with the canary emptied: it stays empty.
	again := url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, "canary_offered": {"true"}, "canary_count": {""}}
	if body := fx.postPage(t, "/replays", again, 200); !strings.Contains(body, `name="canary_count" value=""`) {
		t.Error("an emptied canary was proposed again")
	}
	total = 100
	if body := fx.postPage(t, "/replays", first, 200); !strings.Contains(body, `name="canary_count" value=""`) {
		t.Error("a canary was proposed for 100 messages")
	}
	total = 500
	if body := fx.postPage(t, "/replays", url.Values{"action": {"discard"}, "id": {idStr(fx.ids[0])}}, 200); strings.Contains(body, `name="canary_count"`) {
		t.Error("a discard's form offers a canary")
	}

	start := url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, "canary_offered": {"true"}, "canary_count": {"10"},
		"canary_watch": {"45s"}, "pause_on_redeadletter": {"0.5"}, "ramp": {"2m"}, "rate_per_second": {"100"}}
	if res, body := fx.post(t, "/jobs", start); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d: %.2000s", res.StatusCode, body)
	}
	subs := fx.jobs.submitted()
	c := subs[len(subs)-1].Canary
	if c.Count != 10 || c.Watch != 45*time.Second || c.PauseOnRedeadletter == nil || *c.PauseOnRedeadletter != 0.5 || c.Ramp != 2*time.Minute {
		t.Errorf("submitted canary %+v", c)
	}
	for field, bad := range map[string]string{"canary_count": "ten", "canary_watch": "soon", "ramp": "5", "pause_on_redeadletter": "half"} {
		form := url.Values{"action": {"replay"}, "id": {idStr(fx.ids[0])}, field: {bad}}
		body := fx.postPage(t, "/replays", form, http.StatusBadRequest)
		if !strings.Contains(body, `name="`+field+`" value="`+bad+`"`) || !strings.Contains(body, `aria-invalid="true"`) {
			t.Errorf("%s=%s: the field is not re-rendered as invalid", field, bad)
		}
	}
}

// TestAPIJobCanaryOptions: POST /api/v1/jobs reads the canary and ramp
// options (bad durations are 400s naming them), the dry run's answer has
// the plan's canary, and the job object has the outcome keys.
func TestAPIJobCanaryOptions(t *testing.T) {
	fx := newJobsFixture(t)
	fx.jobs.plan = func(req replay.Request) replay.Plan {
		return replay.Plan{Summary: replay.SelectionSummary{Total: 3}, Canary: req.Canary}
	}
	post := func(body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, text := do(t, fx.h, req)
		var out map[string]any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return res.StatusCode, out
	}
	id := idStr(fx.ids[0])
	for field, body := range map[string]string{
		"canary_watch": `{"action":"replay","ids":["` + id + `"],"canary_count":5,"canary_watch":"soon"}`,
		"ramp":         `{"action":"replay","ids":["` + id + `"],"rate_per_second":5,"ramp":"10"}`,
	} {
		status, out := post(body)
		e, _ := out["error"].(map[string]any)
		if status != http.StatusBadRequest || e["parameter"] != field {
			t.Errorf("%s: %d %v", field, status, out)
		}
	}
	status, out := post(`{"action":"replay","ids":["` + id + `"],"canary_count":5,"canary_watch":"45s","pause_on_redeadletter":0.25,"dry_run":true}`)
	c, _ := out["canary"].(map[string]any)
	if status != http.StatusOK || c["canary_count"] != 5.0 || c["canary_watch"] != "45s" || c["pause_on_redeadletter"] != 0.25 || c["ramp"] != nil {
		t.Errorf("dry run: %d %v", status, out)
	}
	status, out = post(`{"action":"replay","ids":["` + id + `"],"canary_count":5}`)
	counts, _ := out["counts"].(map[string]any)
	if status != http.StatusCreated || counts["redeadlettered"] != 0.0 || out["canary_verdict"] != nil {
		t.Errorf("job: %d %v", status, out)
	}
	if rs, ok := out["redeadlettered_reasons"].([]any); !ok || len(rs) != 0 {
		t.Errorf("redeadlettered_reasons %#v, want []", out["redeadlettered_reasons"])
	}
}
