package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// newBulkFixture: four dead letters of one failure, three JSON bodies and
// one that is not JSON.
func newBulkFixture(t *testing.T) (*jobsFixture, []int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bulk.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders", Counts: dlq.Counts{DeadLetter: 4}})
	var recs []dlq.Record
	for i := range 4 {
		body := fmt.Sprintf(`{"customer":{"id":"C-1"},"n":%d}`, i)
		if i == 3 {
			body = "customer=C-1"
		}
		recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, FirstSeenAt: t0, LastSeenAt: t0,
			Message: dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint("o-", i), EnqueuedAt: ptr(t0),
				DeadLetterReason: ptr("CustomerUnknown"), Body: []byte(body)}})
	}
	ids := storetest.Insert(t, path, recs...)
	for i := range recs {
		recs[i].ID = ids[i]
	}
	fx := &apiFixture{st: st, ids: ids, recs: recs}
	fj := newFakeJobs(recs)
	fx.h = New(Config{Catalog: st, Jobs: fj, Audit: st}).Handler()
	return &jobsFixture{apiFixture: fx, jobs: fj}, ids
}

func (fx *jobsFixture) postJob(t *testing.T, body string) (int, map[string]any) {
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

// A JSON-path set applied to each message of a selection: the dry run
// shows each message's diff and the one that cannot take it; the job gets
// each message's own edited body.
func TestAPIBulkEditAppliedPerMessage(t *testing.T) {
	fx, ids := newBulkFixture(t)
	edit := `"edit":{"json_set":{"$.customer.id":"C-42"}}`
	status, out := fx.postJob(t, `{"action":"replay","filter":{"entity":"orders"},"dry_run":true,`+edit+`}`)
	if status != http.StatusOK {
		t.Fatalf("dry run: %d %v", status, out)
	}
	e := out["edit"].(map[string]any)
	if e["changed"] != 3.0 || e["failed"] != 1.0 || e["unchanged"] != 0.0 {
		t.Errorf("edit counts %v", e)
	}
	msgs := e["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("%d messages in the dry run", len(msgs))
	}
	first := msgs[0].(map[string]any)
	if first["id"] != idStr(ids[3]) || !strings.Contains(fmt.Sprint(first["error"]), "not JSON") {
		t.Errorf("the message that cannot take it: %v", first)
	}
	for _, m := range msgs[1:] {
		mm := m.(map[string]any)
		diff := fmt.Sprint(mm["body_diff"])
		if mm["changed"] != true || !strings.Contains(diff, `kind:removed text:    "id": "C-1"`) ||
			!strings.Contains(diff, `kind:added text:    "id": "C-42"`) {
			t.Errorf("message %v: diff %s", mm["id"], diff)
		}
	}
	sub := fx.jobs.submitted()
	if len(sub) != 1 || !sub[0].DryRun || len(sub[0].Selection.IDs) != 3 || len(sub[0].Selection.Edits) != 3 {
		t.Fatalf("dry-run submission %+v", sub)
	}
	// For real: refused while a message cannot take the edit...
	status, out = fx.postJob(t, `{"action":"replay","filter":{"entity":"orders"},`+edit+`}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out), "1 of the 4 messages cannot take the edit") {
		t.Errorf("with a message that cannot take it: %d %v", status, out)
	}
	// ...and with the three that can, one job, each message its own body.
	status, out = fx.postJob(t, fmt.Sprintf(`{"action":"replay","ids":["%d","%d","%d"],%s}`, ids[0], ids[1], ids[2], edit))
	if status != http.StatusCreated {
		t.Fatalf("submit: %d %v", status, out)
	}
	sub = fx.jobs.submitted()
	got := sub[len(sub)-1]
	if got.DryRun || got.Selection.Transform == nil || len(got.Selection.Edits) != 3 {
		t.Fatalf("submission %+v", got)
	}
	for i, id := range ids[:3] {
		if b := string(got.Selection.Edits[id].Body); b != fmt.Sprintf(`{"customer":{"id":"C-42"},"n":%d}`, i) {
			t.Errorf("message %d's body %s", id, b)
		}
	}
	// Find-and-replace works on any text body.
	status, _ = fx.postJob(t, fmt.Sprintf(`{"action":"replay","ids":["%d"],"edit":{"replace":[{"find":"C-1","with":"C-42"}]}}`, ids[3]))
	if sub = fx.jobs.submitted(); status != http.StatusCreated || string(sub[len(sub)-1].Selection.Edits[ids[3]].Body) != "customer=C-42" {
		t.Errorf("replace: %d", status)
	}
	// Refusals name the field.
	for body, param := range map[string]string{
		`{"action":"replay","ids":["` + idStr(ids[0]) + `"],"edit":{"json_set":{"customer.id":1}}}`:           "edit.json_set",
		`{"action":"replay","ids":["` + idStr(ids[0]) + `"],"edit":{"replace":[{"find":"","with":"x"}]}}`:     "edit.replace",
		`{"action":"discard","reason":"x","ids":["` + idStr(ids[0]) + `"],"edit":{"replace":[{"find":"a"}]}}`: "edit",
		`{"action":"replay","ids":["` + idStr(ids[0]) + `"],"edit":{}}`:                                       "edit",
	} {
		status, out := fx.postJob(t, body)
		if e, _ := out["error"].(map[string]any); status != http.StatusBadRequest || e["parameter"] != param {
			t.Errorf("%s: %d %v, want a 400 naming %s", body, status, out, param)
		}
	}
}

// The confirm page's bulk edit: "Check again" (the dry run) shows each
// message's diff and the one that cannot take the edit; starting the job
// sends each message's own edit.
func TestConfirmPageBulkEdit(t *testing.T) {
	fx, ids := newBulkFixture(t)
	form := url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.entity": {"orders"},
		"edit_json_set": {"$.customer.id = C-42\n"}, "edit_find": {""}, "edit_with": {""}}
	body := fx.postPage(t, "/replays", form, http.StatusOK)
	for _, want := range []string{`data-testid="bulk-edit"`, `data-testid="bulk-preview"`, "3 changed · 0 unchanged · 1 cannot take the edit",
		fmt.Sprintf(`data-testid="bulk-message" data-id="%d" open`, ids[3]), `data-testid="body-diff"`,
		`&#34;id&#34;: &#34;C-42&#34;`, `$.customer.id = C-42`} {
		if !strings.Contains(body, want) {
			t.Errorf("the dry run lacks %s", want)
		}
	}
	if n := strings.Count(body, `data-testid="bulk-message"`); n != 4 {
		t.Errorf("%d messages in the dry run, want 4", n)
	}
	sub := fx.jobs.submitted()
	if len(sub) != 1 || !sub[0].DryRun || len(sub[0].Selection.Edits) != 3 {
		t.Fatalf("submissions %+v", sub)
	}
	// Started with the three that can take it: one job, each its own body.
	start := url.Values{"action": {"replay"}, "id": {idStr(ids[0]), idStr(ids[1]), idStr(ids[2])},
		"edit_json_set": {`$.customer.id = "C-42"`}, "edit_find": {"C-"}, "edit_with": {"K-"}}
	res, _ := fx.post(t, "/jobs", start)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d", res.StatusCode)
	}
	sub = fx.jobs.submitted()
	got := sub[len(sub)-1]
	for i, id := range ids[:3] {
		// The replace runs first (C-1 → K-1), then the set.
		if b := string(got.Selection.Edits[id].Body); b != fmt.Sprintf(`{"customer":{"id":"C-42"},"n":%d}`, i) {
			t.Errorf("message %d: %s", id, b)
		}
	}
	// A line that is not PATH = VALUE is refused, naming the field.
	bad := fx.postPage(t, "/replays", url.Values{"action": {"replay"}, "id": {idStr(ids[0])}, "edit_json_set": {"customer.id C-42"}}, http.StatusBadRequest)
	if !strings.Contains(bad, `data-field="edit_json_set"`) {
		t.Errorf("the refusal does not name the field:\n%.2000s", bad)
	}
}

// An edit shows and changes bodies: operators may replay but not edit.
func TestBulkEditNeedsAdmin(t *testing.T) {
	fx := newAuthFixture(t, nil)
	id := idStr(fx.recs[0].ID)
	for _, tt := range []struct {
		role auth.Role
		want int
	}{{auth.Operator, http.StatusForbidden}, {auth.Admin, http.StatusOK}} {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/jobs",
			strings.NewReader(`{"action":"replay","dry_run":true,"ids":["`+id+`"],"edit":{"replace":[{"find":"order","with":"ORDER"}]}}`))
		req.Header.Set("Content-Type", "application/json")
		if res, body := fx.as(t, tt.role, req); res.StatusCode != tt.want {
			t.Errorf("%s: %d, want %d: %s", tt.role, res.StatusCode, tt.want, body)
		}
		form := url.Values{"action": {"replay"}, "id": {id}}
		req = httptest.NewRequestWithContext(t.Context(), "POST", "/replays", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		_, page := fx.as(t, tt.role, req)
		if got := strings.Contains(page, `data-testid="bulk-edit"`); got != (tt.role == auth.Admin) {
			t.Errorf("%s: the bulk edit's fields shown = %v", tt.role, got)
		}
	}
}
