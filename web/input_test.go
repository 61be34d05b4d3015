package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/replay"
)

// An entity the catalog never saw: 404 not_found in words that name it, on
// the API and on the message list page (and its count), never an empty 200.
func TestUnknownEntityIsNotFound(t *testing.T) {
	fx := newAPIFixture(t)
	const words = "no entity 'nosuch' in the catalog"
	res, v, body := fx.get(t, "/api/v1/messages?entity=nosuch")
	e, _ := v["error"].(map[string]any)
	if res.StatusCode != http.StatusNotFound || e["code"] != "not_found" || e["message"] != words {
		t.Errorf("API: %d %s, want 404 not_found saying %q", res.StatusCode, body, words)
	}
	res, body = do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/messages?entity=nosuch", nil))
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, `Check the filter “entity”:</strong> no entity &#39;nosuch&#39; in the catalog`) {
		t.Errorf("page: %d, want 404 saying %q:\n%s", res.StatusCode, words, body)
	}
	// A deleted entity the catalog knows is still an answer.
	if res, _, body := fx.get(t, "/api/v1/messages?entity=retired"); res.StatusCode != http.StatusOK {
		t.Errorf("a deleted entity: %d %s", res.StatusCode, body)
	}
}

// "Select all matching" with no filter set is every message in the
// catalog: the confirm page counts them (its dry run says all) and asks
// for filter.all with the number; Start without it is refused as the
// engine refuses an unconditional filter, and with it submits "all".
func TestReplayEverythingAsksForConfirmation(t *testing.T) {
	fx := newJobsFixture(t)
	fx.jobs.checkOptions = func(req replay.Request) error { // as the engine
		if f := req.Selection.Filter; f != nil && f.Unconditional() && !f.All {
			return &replay.InvalidError{Param: "filter", Msg: `the filter has no condition: add "all": true`}
		}
		return nil
	}
	for _, action := range []string{"replay", "discard"} {
		selection := url.Values{"action": {action}, "all_matching": {"true"}, "filter.q": {""}}
		body := fx.postPage(t, "/replays", selection, http.StatusOK)
		subs := fx.jobs.submitted()
		if last := subs[len(subs)-1]; !last.DryRun || last.Selection.Filter == nil || !last.Selection.Filter.All {
			t.Fatalf("%s: the preview submitted %+v, want a dry run of all", action, last)
		}
		wantTestid(t, body, "plan-total", "12")
		box := regexp.MustCompile(`<input type="checkbox" name="filter.all" value="true" required data-testid="confirm-all"[^>]*>\s*([^<]*)`).FindStringSubmatch(body)
		if box == nil || !strings.Contains(box[1], action+" all 12 messages in the catalog") {
			t.Fatalf("%s: no unticked confirmation with the count:\n%s", action, body)
		}
		if hiddenInputs(body, "filter.all") != nil {
			t.Errorf("%s: filter.all is a hidden field: nobody would confirm it", action)
		}

		start := url.Values{"action": {action}, "all_matching": {"true"}, "reason": {"cleanup"}}
		body = fx.postPage(t, "/jobs", start, http.StatusBadRequest)
		if !strings.Contains(body, `data-testid="confirm-error" data-field="filter"`) || len(fx.jobs.jobs) != 0 {
			t.Fatalf("%s: Start without the confirmation was not refused:\n%s", action, body)
		}
		start.Set("filter.all", "true")
		if res, body := fx.post(t, "/jobs", start); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: Start with the confirmation: %d\n%s", action, res.StatusCode, body)
		}
		subs = fx.jobs.submitted()
		if last := subs[len(subs)-1]; last.DryRun || !last.Selection.Filter.All {
			t.Errorf("%s: the job was submitted as %+v", action, last)
		}
		clear(fx.jobs.jobs)
	}
	// A filter with a condition asks nothing more.
	body := fx.postPage(t, "/replays", url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.entity": {"orders"}}, http.StatusOK)
	if strings.Contains(body, `data-testid="confirm-all"`) {
		t.Error("a filtered selection asks to confirm every message")
	}
}
