package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/alert"
	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// triageFixture is a signed-in dashboard with the catalog's groups and
// the alert pages.
func triageFixture(t *testing.T) *authFixture {
	t.Helper()
	return newAuthFixture(t, func(c *Config) {
		c.Alerts = &alert.Admin{Store: c.Catalog.(*store.Store)}
	})
}

// groupByReason returns the API's group of this reason.
func groupByReason(t *testing.T, fx *authFixture, reason string) map[string]any {
	t.Helper()
	res, body := fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/groups", nil))
	if res.StatusCode != 200 {
		t.Fatalf("groups: %d %s", res.StatusCode, body)
	}
	var v struct{ Groups []map[string]any }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	for _, g := range v.Groups {
		if g["reason"] == reason {
			return g
		}
	}
	t.Fatalf("no group %s in %s", reason, body)
	return nil
}

func (fx *authFixture) patch(t *testing.T, role auth.Role, key, body string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), "PATCH", "/api/v1/groups/"+url.PathEscape(key), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return fx.as(t, role, req)
}

// TestPatchGroup: an operator renames a group, gives it an owner and notes
// and moves its status; each change is audited with from and to; the API
// and the pages show it; a viewer is refused; bad values are 400s naming
// the field.
func TestPatchGroup(t *testing.T) {
	fx := triageFixture(t)
	g := groupByReason(t, fx, "SqlTimeout")
	key := g["id"].(string)
	if g["name"] != "SqlTimeout · timed out after <n> ms" || g["status"] != "new" || g["owner"] != "" || g["status_changed_at"] != nil {
		t.Errorf("a new group: %v", g)
	}

	if res, body := fx.patch(t, auth.Viewer, key, `{"status":"known"}`); res.StatusCode != 403 || !strings.Contains(body, "permission_denied") {
		t.Errorf("viewer: %d %s", res.StatusCode, body)
	}
	for _, tc := range []struct{ body, param string }{
		{`{"status":"done"}`, "status"},
		{`{"name":"` + strings.Repeat("x", 121) + `"}`, "name"},
		{`{"owner":"a\u0007b"}`, "owner"},
		{`{"notes":"` + strings.Repeat("n", 4001) + `"}`, "notes"},
		{`{}`, "body"},
		{`{"colour":"red"}`, "colour"},
		{`{"status":3}`, "body"},
	} {
		res, body := fx.patch(t, auth.Operator, key, tc.body)
		if res.StatusCode != 400 || !strings.Contains(body, `"parameter":"`+tc.param+`"`) {
			t.Errorf("%.40s: %d %s, want 400 naming %s", tc.body, res.StatusCode, body, tc.param)
		}
	}
	if res, _ := fx.patch(t, auth.Operator, "nosuchgroup", `{"status":"known"}`); res.StatusCode != 404 {
		t.Errorf("unknown group: %d", res.StatusCode)
	}
	if n := len(fx.audited(t, audit.ActionGroupUpdated)); n != 0 {
		t.Fatalf("refused changes audited: %d", n)
	}

	res, body := fx.patch(t, auth.Operator, key, `{"name":"  DB timeouts ","status":"investigating","owner":"alice","notes":"pool too small\nraise it"}`)
	if res.StatusCode != 200 {
		t.Fatalf("patch: %d %s", res.StatusCode, body)
	}
	var got map[string]any
	json.Unmarshal([]byte(body), &got)
	if got["name"] != "DB timeouts" || got["status"] != "investigating" || got["owner"] != "alice" || got["notes"] != "pool too small\nraise it" ||
		got["status_changed_at"] == nil || got["id"] != key {
		t.Errorf("answer %v", got)
	}
	if g := groupByReason(t, fx, "SqlTimeout"); g["name"] != "DB timeouts" || g["status"] != "investigating" {
		t.Errorf("listed %v", g)
	}
	es := fx.audited(t, audit.ActionGroupUpdated)
	if len(es) != 1 || es[0].Actor != "token:operator-bot" {
		t.Fatalf("audit %+v", es)
	}
	var params map[string]any
	json.Unmarshal(es[0].Params, &params)
	if st, _ := params["status"].(map[string]any); params["group"] != key || st["from"] != "new" || st["to"] != "investigating" ||
		params["name"].(map[string]any)["to"] != "DB timeouts" {
		t.Errorf("audit params %s", es[0].Params)
	}

	// The same values again change nothing and audit nothing.
	if res, _ := fx.patch(t, auth.Operator, key, `{"status":"investigating","owner":"alice"}`); res.StatusCode != 200 {
		t.Errorf("same again: %d", res.StatusCode)
	}
	if n := len(fx.audited(t, audit.ActionGroupUpdated)); n != 1 {
		t.Errorf("an unchanged patch audited: %d entries", n)
	}
	// Through known to resolved; an empty name gives the generated one back.
	for _, st := range []string{"known", "resolved"} {
		if res, body := fx.patch(t, auth.Admin, key, `{"status":"`+st+`","name":""}`); res.StatusCode != 200 || !strings.Contains(body, `"status":"`+st+`"`) {
			t.Errorf("%s: %d %s", st, res.StatusCode, body)
		}
	}
	if g := groupByReason(t, fx, "SqlTimeout"); g["name"] != "SqlTimeout · timed out after <n> ms" || g["status"] != "resolved" {
		t.Errorf("after resolving %v", g)
	}
	if n := len(fx.audited(t, audit.ActionGroupUpdated)); n != 3 {
		t.Errorf("audited %d changes, want 3", n)
	}

	// The pages: the list shows the status and the owner; the group's page
	// a select labelled Status with the status chosen.
	_, page := fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/groups", nil))
	if !strings.Contains(page, `data-status="resolved"`) || !strings.Contains(page, `href="/groups/`+key+`"`) {
		t.Errorf("groups page lacks the triage: %s", page)
	}
	res, page = fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/groups/"+key, nil))
	if res.StatusCode != 200 || !strings.Contains(page, `<label for="group-status">Status</label>`) ||
		!strings.Contains(page, `<option value="resolved" selected>`) || !strings.Contains(page, `/messages?group=`+key) {
		t.Errorf("group page: %d %s", res.StatusCode, page)
	}
	if res, _ := fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/groups/nosuchgroup", nil)); res.StatusCode != 404 {
		t.Errorf("unknown group page: %d", res.StatusCode)
	}
}

// TestGroupPageForm: the group page's form changes only what was edited.
func TestGroupPageForm(t *testing.T) {
	fx := triageFixture(t)
	key := groupByReason(t, fx, "ValidationFailed")["id"].(string)
	form := url.Values{"name": {"ValidationFailed · timed out after <n> ms"}, "status": {"known"}, "owner": {"bob"}, "notes": {""}}
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/groups/"+key, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, body := fx.as(t, auth.Operator, req)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/groups/"+key {
		t.Fatalf("post: %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	es := fx.audited(t, audit.ActionGroupUpdated)
	if len(es) != 1 {
		t.Fatalf("audit %+v", es)
	}
	var params map[string]any
	json.Unmarshal(es[0].Params, &params)
	if _, renamed := params["name"].(map[string]any); renamed || params["owner"] == nil || params["status"] == nil || params["notes"] != nil {
		t.Errorf("changed %s: want status and owner only", es[0].Params)
	}
	req = httptest.NewRequestWithContext(t.Context(), "POST", "/groups/"+key, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res, _ := fx.as(t, auth.Viewer, req); res.StatusCode != 403 {
		t.Errorf("viewer's form: %d", res.StatusCode)
	}
}

// TestAlertWebhooksPages: an admin adds a webhook; its URL is never shown
// again (the page, the API and the audit show only its host); only http(s)
// URLs; operators may not add one.
func TestAlertWebhooksPages(t *testing.T) {
	fx := triageFixture(t)
	const secretURL = "https://hooks.slack.example/services/T0/B0/XXXXsecretXXXX"
	post := func(role auth.Role, form url.Values) (*http.Response, string) {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/alerts", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return fx.as(t, role, req)
	}
	form := url.Values{"name": {"ops"}, "url": {secretURL}, "format": {"slack"}, "events": {"new_group", "untriaged"}, "untriaged_after": {"30m"}}
	if res, _ := post(auth.Operator, form); res.StatusCode != 403 {
		t.Errorf("operator: %d", res.StatusCode)
	}
	bad := url.Values{"name": {"ops"}, "url": {"ftp://hooks.example/XXXXsecretXXXX"}, "format": {"slack"}, "events": {"new_group"}}
	res, body := post(auth.Admin, bad)
	if res.StatusCode != 400 || strings.Contains(body, "XXXXsecretXXXX") || !strings.Contains(body, "https://") {
		t.Errorf("ftp: %d %s", res.StatusCode, body)
	}
	res, body = post(auth.Admin, form)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("add: %d %s", res.StatusCode, body)
	}
	_, page := fx.as(t, auth.Admin, httptest.NewRequestWithContext(t.Context(), "GET", res.Header.Get("Location"), nil))
	if strings.Contains(page, "XXXXsecretXXXX") || !strings.Contains(page, "hooks.slack.example") || !strings.Contains(page, `data-testid="webhook-added"`) ||
		!strings.Contains(page, `<label for="webhook-url">Webhook URL</label>`) || !strings.Contains(page, `<label for="webhook-format">Format</label>`) {
		t.Errorf("alerts page: %s", page)
	}
	_, api := fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/alerts/webhooks", nil))
	if strings.Contains(api, "XXXXsecretXXXX") || !strings.Contains(api, `"host":"hooks.slack.example"`) || !strings.Contains(api, `"untriaged_after":"30m0s"`) {
		t.Errorf("API: %s", api)
	}
	es := fx.audited(t, audit.ActionAlertWebhookAdded)
	if len(es) != 1 || strings.Contains(string(es[0].Params), "XXXXsecretXXXX") || !strings.Contains(string(es[0].Params), "hooks.slack.example") {
		t.Errorf("audit %+v", es)
	}
	if strings.Contains(fx.logs.String(), "XXXXsecretXXXX") {
		t.Error("the URL is in the log")
	}
	// The API refuses other schemes with a 400 naming url.
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/alerts/webhooks",
		strings.NewReader(`{"name":"x","url":"gopher://h/XXXXsecretXXXX","format":"generic","events":["new_group"]}`))
	req.Header.Set("Content-Type", "application/json")
	if res, body := fx.as(t, auth.Admin, req); res.StatusCode != 400 || !strings.Contains(body, `"parameter":"url"`) || strings.Contains(body, "XXXXsecretXXXX") {
		t.Errorf("gopher: %d %s", res.StatusCode, body)
	}
	// Removed by an admin.
	var list struct{ Webhooks []struct{ ID int64 } }
	json.Unmarshal([]byte(api), &list)
	req = httptest.NewRequestWithContext(t.Context(), "DELETE", "/api/v1/alerts/webhooks/"+itoa(list.Webhooks[0].ID), nil)
	if res, body := fx.as(t, auth.Admin, req); res.StatusCode != 204 {
		t.Errorf("delete: %d %s", res.StatusCode, body)
	}
	if len(fx.audited(t, audit.ActionAlertWebhookRemoved)) != 1 {
		t.Error("removal not audited")
	}
	if res, page := fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/alerts/history", nil)); res.StatusCode != 200 ||
		!strings.Contains(page, "No alert has been sent") {
		t.Errorf("history: %d %s", res.StatusCode, page)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// okPoster takes every alert.
type okPoster struct{}

func (okPoster) Post(context.Context, string, []byte) (int, error) { return 200, nil }

// TestResolvedGroupComesBack: a resolved group that receives a new dead
// letter is new again, its page says so, and the alert loop records the
// reopening in the audit (the status history: group_updated to resolved,
// then group_reopened back to new).
func TestResolvedGroupComesBack(t *testing.T) {
	fx := triageFixture(t)
	key := groupByReason(t, fx, "SqlTimeout")["id"].(string)
	if res, body := fx.patch(t, auth.Operator, key, `{"status":"resolved"}`); res.StatusCode != 200 {
		t.Fatalf("resolve: %d %s", res.StatusCode, body)
	}
	reason, desc := "SqlTimeout", "timed out after 99 ms"
	enq := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	if _, err := fx.st.ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 5000, Through: 5000,
		SeenAt: enq, Messages: []dlq.Message{{SequenceNumber: 5000, State: dlq.StateActive, MessageID: "again", EnqueuedAt: &enq,
			DeadLetterReason: &reason, DeadLetterErrorDescription: &desc}}}); err != nil {
		t.Fatal(err)
	}
	if g := groupByReason(t, fx, "SqlTimeout"); g["status"] != "new" {
		t.Errorf("after a new dead letter: %v", g)
	}
	_, page := fx.as(t, auth.Viewer, httptest.NewRequestWithContext(t.Context(), "GET", "/groups/"+key, nil))
	if !strings.Contains(page, `data-testid="group-reopened"`) || !strings.Contains(page, "so it is new again") {
		t.Errorf("the group page does not say it came back: %s", page)
	}
	a := alert.New(alert.Config{Store: fx.st, Poster: okPoster{}, Audit: fx.log})
	a.Evaluate(t.Context())
	a.Evaluate(t.Context())
	es := fx.audited(t, audit.ActionGroupReopened)
	if len(es) != 1 || es[0].Actor != audit.ActorSystem {
		t.Fatalf("reopened entries %+v", es)
	}
	var params map[string]any
	json.Unmarshal(es[0].Params, &params)
	if params["group"] != key || params["from"] != "resolved" || params["to"] != "new" || params["added"] != 1.0 {
		t.Errorf("params %s", es[0].Params)
	}
}
