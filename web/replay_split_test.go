package web

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// splitShares reads the namespace split of a confirm page: each listed
// namespace's count, and the form its button re-posts (nil without one).
func splitShares(t *testing.T, body string) (counts map[string]string, forms map[string]url.Values) {
	t.Helper()
	counts, forms = map[string]string{}, map[string]url.Values{}
	li := regexp.MustCompile(`(?s)<li data-testid="split-namespace" data-namespace="([^"]*)" data-count="([^"]*)">(.*?)</li>`)
	input := regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)"`)
	for _, m := range li.FindAllStringSubmatch(body, -1) {
		counts[m[1]] = m[2]
		if !strings.Contains(m[3], `data-testid="split-submit"`) {
			continue
		}
		v := url.Values{}
		for _, in := range input.FindAllStringSubmatch(m[3], -1) {
			v.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
		}
		forms[m[1]] = v
	}
	return counts, forms
}

// TestReplaySplitsByNamespace: a selection spanning both namespaces (a
// filter, then ids) is refused as a job, and the confirm page says so and
// offers each namespace's share, with its count and a button re-posting
// the form narrowed to it (filter.namespace, or the ids there); following
// one yields the dry run of that namespace alone, ready to start. The API
// keeps answering 400, naming each namespace's count.
func TestReplaySplitsByNamespace(t *testing.T) {
	fx := newAccessFixture(t, nil)
	post := func(form url.Values) (int, string) {
		return fx.as(t, "pat", "platform", "POST", "/replays", "application/x-www-form-urlencoded", form.Encode())
	}
	follow := func(forms map[string]url.Values, ns, total string) {
		t.Helper()
		form, ok := forms[ns]
		if !ok {
			t.Fatalf("no button for %s", ns)
		}
		code, body := post(form)
		if code != http.StatusOK || strings.Contains(body, `data-testid="confirm-error"`) || strings.Contains(body, `data-testid="namespace-split"`) {
			t.Fatalf("following %s's button (%v): %d, want the confirm page without an error:\n%s", ns, form, code, body)
		}
		if !strings.Contains(body, `data-testid="plan-total">`+total+`<`) || !strings.Contains(body, `data-testid="confirm-submit"`) {
			t.Errorf("following %s's button: the dry run is not of its %s messages, or there is no start button", ns, total)
		}
	}

	// A filter (the group's entity and reason) over both namespaces.
	code, body := post(url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.entity": {"orders"},
		"filter.reason": {"SqlTimeout"}, "rate_per_second": {"50"}})
	if code != http.StatusBadRequest || !strings.Contains(body, `data-testid="namespace-split"`) {
		t.Fatalf("a filter over both namespaces: %d, want 400 with the namespace split:\n%s", code, body)
	}
	if !strings.Contains(body, "These messages are in 2 namespaces, and a job acts on one namespace.") {
		t.Error("the split does not say why in words")
	}
	if strings.Contains(body, `data-testid="confirm-form"`) {
		t.Error("the page offers the form of the whole selection, which would be refused again")
	}
	for _, label := range []string{"Replay the 2 in prod-eu…", "Replay the 3 in prod-us…"} {
		if !strings.Contains(body, label) {
			t.Errorf("no button %q", label)
		}
	}
	counts, forms := splitShares(t, body)
	if counts["prod-eu"] != "2" || counts["prod-us"] != "3" || len(counts) != 2 {
		t.Errorf("split counts %v, want prod-eu 2, prod-us 3", counts)
	}
	for _, ns := range []string{"prod-eu", "prod-us"} {
		f := forms[ns]
		if f.Get("filter.namespace") != ns || f.Get("filter.entity") != "orders" || f.Get("filter.reason") != "SqlTimeout" ||
			f.Get("all_matching") != "true" || f.Get("action") != "replay" || f.Get("rate_per_second") != "50" {
			t.Errorf("%s's button posts %v, want the form with filter.namespace=%s", ns, f, ns)
		}
	}
	follow(forms, "prod-us", "3")

	// Ids of both namespaces: each button carries its namespace's ids.
	ids := url.Values{"action": {"replay"}, "id": {fx.id("prod-eu", 0), fx.id("prod-us", 0), fx.id("prod-us", 2)}}
	code, body = post(ids)
	if code != http.StatusBadRequest {
		t.Fatalf("ids of both namespaces: %d, want 400", code)
	}
	counts, forms = splitShares(t, body)
	if counts["prod-eu"] != "1" || counts["prod-us"] != "2" {
		t.Errorf("split counts of the ids %v, want prod-eu 1, prod-us 2", counts)
	}
	if got := forms["prod-us"]["id"]; len(got) != 2 || !strings.Contains(strings.Join(got, ","), fx.id("prod-us", 2)) ||
		strings.Contains(strings.Join(got, ","), fx.id("prod-eu", 0)) {
		t.Errorf("prod-us's button posts ids %v, want its 2", got)
	}
	if !strings.Contains(body, "Replay the 1 message in prod-eu…") {
		t.Error("no button for prod-eu's one message")
	}
	follow(forms, "prod-eu", "1")

	// One namespace's selection: the normal page, no split.
	if code, body = post(url.Values{"action": {"replay"}, "id": {fx.id("prod-eu", 1)}}); code != http.StatusOK ||
		strings.Contains(body, `data-testid="namespace-split"`) {
		t.Errorf("a selection in one namespace: %d, split shown: %v", code, strings.Contains(body, "namespace-split"))
	}

	// The API keeps its 400, naming what each namespace holds.
	code, body = fx.as(t, "pat", "platform", "POST", "/api/v1/jobs", "application/json",
		`{"action":"replay","filter":{"entity":"orders"},"dry_run":true}`)
	if _, msg := apiErr(t, body); code != http.StatusBadRequest || !strings.Contains(msg, "2 namespaces (2 in prod-eu, 3 in prod-us)") {
		t.Errorf("API over both namespaces: %d %s", code, body)
	}
}

// TestReplaySplitFollowsAccessRules: an operator of prod-eu who is a
// viewer of prod-us is offered prod-eu's share only (prod-us's is named,
// without a button); a viewer of prod-eu alone gets the refusal alone.
func TestReplaySplitFollowsAccessRules(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	form := url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.entity": {"orders"}}.Encode()
	code, body := fx.as(t, "sam", "sre-eu", "POST", "/replays", "application/x-www-form-urlencoded", form)
	if code != http.StatusForbidden || !strings.Contains(body, `data-testid="namespace-split"`) {
		t.Fatalf("an operator of prod-eu over both namespaces: %d, want 403 with the split:\n%s", code, body)
	}
	counts, forms := splitShares(t, body)
	if counts["prod-eu"] != "2" || counts["prod-us"] != "3" {
		t.Errorf("split counts %v, want both (sam views both)", counts)
	}
	if len(forms) != 1 || forms["prod-eu"].Get("filter.namespace") != "prod-eu" {
		t.Errorf("buttons %v, want prod-eu's only", forms)
	}
	if !strings.Contains(body, "These messages are in 2 namespaces") ||
		!strings.Contains(body, `data-testid="split-refused">3 in prod-us: your role there does not allow it.`) {
		t.Error("prod-us's share is not named as refused")
	}
	code, body = fx.as(t, "sam", "sre-eu", "POST", "/replays", "application/x-www-form-urlencoded", forms["prod-eu"].Encode())
	if code != http.StatusOK || !strings.Contains(body, `data-testid="plan-total">2<`) {
		t.Errorf("following prod-eu's button: %d", code)
	}

	// A viewer of prod-eu only has nothing to be offered: the refusal alone.
	code, body = fx.as(t, "eve", "eu-readers", "POST", "/replays", "application/x-www-form-urlencoded", form)
	if code != http.StatusForbidden || strings.Contains(body, `data-testid="namespace-split"`) || strings.Contains(body, "prod-us-") {
		t.Errorf("a viewer of prod-eu: %d, split shown: %v; want 403 without a split", code, strings.Contains(body, "namespace-split"))
	}
}
