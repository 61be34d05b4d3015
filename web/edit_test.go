package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// newEditFixture is a catalog of one dead letter as Service Bus leaves it
// (its DeadLetterReason and DeadLetterErrorDescription among its
// application properties), behind a server with a fake replay engine.
func newEditFixture(t *testing.T) (*jobsFixture, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edit.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders", Counts: dlq.Counts{DeadLetter: 1}})
	rec := dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, FirstSeenAt: t0, LastSeenAt: t0,
		Message: dlq.Message{SequenceNumber: 7, State: dlq.StateActive, MessageID: "order-7", EnqueuedAt: ptr(t0),
			DeadLetterReason: ptr("MaxDeliveryCountExceeded"), DeadLetterErrorDescription: ptr("customer C-1 unknown"),
			ContentType: ptr("application/json"),
			Body:        []byte(`{"customer":{"id":"C-1","name":"Ann"},"total":5}`),
			ApplicationProperties: dlq.EncodeProperties(map[string]any{"tenant": "t1", "keep": int64(3),
				"DeadLetterReason": "MaxDeliveryCountExceeded", "DeadLetterErrorDescription": "customer C-1 unknown"})}}
	ids := storetest.Insert(t, path, rec)
	rec.ID = ids[0]
	fx := &apiFixture{st: st, ids: ids, recs: []dlq.Record{rec}}
	fj := newFakeJobs(fx.recs)
	fx.h = New(Config{Catalog: st, Jobs: fj, Audit: st}).Handler()
	return &jobsFixture{apiFixture: fx, jobs: fj}, rec.ID
}

// The edit page starts from the stored properties without the broker's
// dead-letter ones; its dry run shows the diff of body and properties and
// the plan, and starts nothing; the real submission then starts the job.
func TestEditDryRunShowsDiffAndSendsNothing(t *testing.T) {
	fx, id := newEditFixture(t)
	page := fx.page(t, "/messages/"+idStr(id)+"/edit", 200)
	props := regexp.MustCompile(`(?s)data-testid="edit-properties"[^>]*>(.*?)</textarea>`).FindStringSubmatch(page)
	if props == nil || !strings.Contains(props[1], "tenant") || strings.Contains(props[1], "DeadLetter") {
		t.Fatalf("the form's properties: %q", props)
	}
	for _, want := range []string{`<button type="submit" name="dry_run" value="true" class="secondary" data-testid="edit-dry-run">Dry run</button>`,
		`data-testid="edit-submit"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the edit page lacks %s", want)
		}
	}

	form := url.Values{"dry_run": {"true"}, "body": {`{"customer":{"id":"C-42","name":"Ann"},"total":5}`},
		"application_properties": {`{"tenant":"t2","keep":3,"added":true,"DeadLetterReason":"typed back in"}`}, "reason": {"fix the id"}}
	body := fx.postPage(t, "/messages/"+idStr(id)+"/edit", form, http.StatusOK)
	subs := fx.jobs.submitted()
	if len(subs) != 1 || !subs[0].DryRun || subs[0].Selection.Edit == nil {
		t.Fatalf("submissions %+v, want one dry run with the edit", subs)
	}
	if len(fx.jobs.jobs) != 0 {
		t.Fatalf("a dry run created a job: %v", fx.jobs.jobs)
	}
	if !strings.Contains(body, `data-testid="edit-review"`) || !strings.Contains(body, `data-testid="plan"`) {
		t.Fatalf("no review and plan:\n%.3000s", body)
	}
	// The body: JSON indented on both sides, one line changed.
	lines := regexp.MustCompile(`data-kind="(added|removed)"><td class="num">\d*</td><td class="num">\d*</td><td class="diff-mark"[^>]*>[^<]*</td><td class="diff-text"><code>([^<]*)</code>`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, l := range lines {
		got = append(got, l[1]+" "+strings.TrimSpace(l[2]))
	}
	if want := []string{`removed &#34;id&#34;: &#34;C-1&#34;,`, `added &#34;id&#34;: &#34;C-42&#34;,`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("body diff %q, want %q", got, want)
	}
	// The properties: the edit's changes, the broker's dead-letter ones
	// removed even though typed back in, dlqdash's added.
	kinds := map[string]string{}
	for _, m := range regexp.MustCompile(`data-testid="property-change" data-key="([^"]*)" data-kind="([a-z]*)"`).FindAllStringSubmatch(body, -1) {
		kinds[m[1]] = m[2]
	}
	for k, want := range map[string]string{"tenant": "changed", "added": "added", "DeadLetterReason": "removed",
		"DeadLetterErrorDescription": "removed", "dlqdash.replay_count": "added", "dlqdash.original_message_id": "added"} {
		if kinds[k] != want {
			t.Errorf("property %s: %q, want %q (all: %v)", k, kinds[k], want, kinds)
		}
	}
	if _, ok := kinds["keep"]; ok {
		t.Errorf("an unchanged property is listed as a change: %v", kinds)
	}
	if !strings.Contains(body, "fix the id") || !strings.Contains(body, "C-42") {
		t.Error("the dry run does not keep the form as typed")
	}

	// Sent for real: one job, its page.
	delete(form, "dry_run")
	res, _ := fx.post(t, "/messages/"+idStr(id)+"/edit", form)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/jobs/") || len(fx.jobs.jobs) != 1 {
		t.Fatalf("submit: %d %q, %d jobs", res.StatusCode, res.Header.Get("Location"), len(fx.jobs.jobs))
	}
	// A refusal re-renders the form as typed, naming the field.
	bad := fx.postPage(t, "/messages/"+idStr(id)+"/edit", url.Values{"dry_run": {"true"}, "application_properties": {`{"a":[1]}`}}, http.StatusBadRequest)
	if !strings.Contains(bad, `data-field="application_properties"`) || !strings.Contains(bad, `{&#34;a&#34;:[1]}`) {
		t.Errorf("the refusal:\n%.3000s", bad)
	}
}

// The API's edit-and-replay dry run answers with the diff too, and starts
// nothing.
func TestAPIEditDryRunDiff(t *testing.T) {
	fx, id := newEditFixture(t)
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/messages/"+idStr(id)+"/replay",
		strings.NewReader(`{"dry_run":true,"body":"{\"customer\":{\"id\":\"C-42\",\"name\":\"Ann\"},\"total\":5}","application_properties":{"tenant":"t2","keep":3}}`))
	req.Header.Set("Content-Type", "application/json")
	res, text := do(t, fx.h, req)
	var out struct {
		DryRun bool `json:"dry_run"`
		Edit   struct {
			Changed  int `json:"changed"`
			Messages []struct {
				ID         string                         `json:"id"`
				BodyDiff   []struct{ Kind, Text string }  `json:"body_diff"`
				Properties []struct{ Key, Change string } `json:"properties"`
			} `json:"messages"`
		} `json:"edit"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil || res.StatusCode != 200 || !out.DryRun {
		t.Fatalf("%d %s %v", res.StatusCode, text, err)
	}
	if out.Edit.Changed != 1 || len(out.Edit.Messages) != 1 || out.Edit.Messages[0].ID != idStr(id) {
		t.Fatalf("edit %+v", out.Edit)
	}
	m := out.Edit.Messages[0]
	if len(m.BodyDiff) != 2 || m.BodyDiff[0].Kind != "removed" || !strings.Contains(m.BodyDiff[1].Text, "C-42") {
		t.Errorf("body diff %+v", m.BodyDiff)
	}
	changes := map[string]string{}
	for _, p := range m.Properties {
		changes[p.Key] = p.Change
	}
	if changes["tenant"] != "changed" || changes["DeadLetterReason"] != "removed" || changes["keep"] != "" {
		t.Errorf("property changes %v", changes)
	}
	if len(fx.jobs.jobs) != 0 {
		t.Error("a dry run created a job")
	}
}
