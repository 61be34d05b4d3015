package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserLayout drives the demo (dlqdash demo: its two seeded
// namespaces and live, failing traffic) in Chromium at a phone's, a tablet's, a laptop's
// and a wide screen's width (issue 19): no page scrolls sideways, a message
// row is one line, the message page's actions are in the first screen, the
// density switch is remembered, paused live updates keep the rows still,
// and at 390 px a person opens a group, reads a message and starts a
// replay of the group.
func TestBrowserLayout(t *testing.T) {
	exe := chromiumPath(t)
	srv := start(t, []string{"demo", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "demo.db")}, env())
	defer srv.stop(t)
	base := "http://" + srv.addr

	// The demo's catalog fills once its first read succeeds. A message of
	// orders' (a queue: its replay does not fan out), and two jobs: one
	// that finishes, one cancelled half-way (a paced one).
	api := func(method, path, body string, out any) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		if out != nil {
			if err := json.NewDecoder(res.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
		return res.StatusCode
	}
	var list struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	// Both namespaces' bursts are sent at once: under -race on a loaded
	// machine the first dead letters take more than waitFor's 10 s.
	waitForWithin(t, time.Minute, "the demo's dead letters in the catalog", func() bool {
		api("GET", "/api/v1/messages?entity=orders&subqueue=dead_letter&limit=3", "", &list)
		return len(list.Messages) == 3
	})
	msgPath := "/messages/" + list.Messages[0].ID
	var job struct {
		ID string `json:"id"`
	}
	if code := api("POST", "/api/v1/jobs", `{"action":"replay","ids":["`+list.Messages[1].ID+`"]}`, &job); code != http.StatusCreated && code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("create a job: %d", code)
	}
	jobPath := "/jobs/" + job.ID
	var paced struct {
		ID string `json:"id"`
	}
	// The catalog may not have read inventory-sync's dead letters yet (a
	// selection of nothing is a 422): ask again until it has.
	waitForWithin(t, time.Minute, "a paced job of inventory-sync's dead letters", func() bool {
		api("POST", "/api/v1/jobs", `{"action":"replay","filter":{"namespace":"prod-eu","entity":"inventory-sync","subqueue":"dead_letter"},"rate_per_second":2}`, &paced)
		return paced.ID != ""
	})
	api("POST", "/api/v1/jobs/"+paced.ID+"/cancel", "", nil)

	b, dialogs := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(b, 30*time.Second)
		defer tcancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// noSideScroll: the page is no wider than the window (wide tables
	// scroll inside their own box).
	noSideScroll := func(width int64, where string) {
		t.Helper()
		var sizes []float64
		run("measure "+where, chromedp.Evaluate(`[document.documentElement.scrollWidth, window.innerWidth]`, &sizes))
		if len(sizes) != 2 || sizes[0] > sizes[1] {
			t.Errorf("%d px: %s scrolls sideways (scrollWidth, innerWidth = %v)", width, where, sizes)
		}
	}
	// inFirstScreen: the message page's actions are above the fold.
	actionsTop := func() float64 {
		t.Helper()
		var top float64
		run("the actions", chromedp.Evaluate(`(() => {
			const tops = ['message-replay', 'message-discard', 'edit-replay'].map(id => {
				const e = document.querySelector('[data-testid="' + id + '"]');
				return e ? e.getBoundingClientRect().bottom : Infinity;
			});
			return Math.max(...tops);
		})()`, &top))
		return top
	}

	pages := []string{"/", "/groups", "/messages", msgPath, "/inventory", "/jobs", jobPath, "/jobs/" + paced.ID, "/audit"}
	for _, width := range []int64{390, 768, 1280, 1920} {
		run(fmt.Sprintf("%d px", width), chromedp.EmulateViewport(width, 844))
		for _, path := range pages {
			run(fmt.Sprintf("%d px %s", width, path), chromedp.Navigate(base+path), chromedp.WaitReady(`#main`, chromedp.ByQuery))
			noSideScroll(width, path)
			if path == msgPath && (width == 390 || width == 1280) {
				var inner float64
				run("the window's height", chromedp.Evaluate(`window.innerHeight`, &inner))
				if top := actionsTop(); top >= inner {
					t.Errorf("%d px: the message page's actions end at %.0f px, below the first screen (%.0f px)", width, top, inner)
				}
			}
		}
	}

	// At 1280 px a row of the message list is one line: at most 48 px in
	// the compact density (the default); the density switch is a button
	// that the browser remembers across a reload.
	run("a laptop", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/messages"),
		chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery),
		chromedp.Evaluate(`localStorage.clear()`, nil), chromedp.Reload(), chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery))
	rowHeights := func() (tallest float64) {
		t.Helper()
		run("row heights", chromedp.Evaluate(`Math.max(...Array.from(document.querySelectorAll('[data-testid="message-row"]')).map(r => r.getBoundingClientRect().height))`, &tallest))
		return tallest
	}
	if h := rowHeights(); h > 48 {
		t.Errorf("a compact message row is %.1f px tall at 1280 px, want at most 48", h)
	}
	var state []string
	density := func() []string {
		t.Helper()
		run("the density", chromedp.Evaluate(`[document.documentElement.dataset.density, document.querySelector('[data-testid="density-toggle"]').getAttribute('aria-pressed'), document.querySelector('[data-testid="density-toggle"]').textContent.trim()]`, &state))
		return state
	}
	if got := density(); strings.Join(got, ",") != "compact,true,Compact rows" {
		t.Errorf("the default density: %v, want compact, pressed, named Compact rows", got)
	}
	run("switch to comfortable", chromedp.Evaluate(`document.querySelector('[data-testid="density-toggle"]').click()`, nil))
	run("reload", chromedp.Reload(), chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery))
	if got := density(); strings.Join(got, ",") != "comfortable,false,Compact rows" {
		t.Errorf("after a reload: %v, want comfortable remembered", got)
	}
	if h := rowHeights(); h <= 48 {
		t.Errorf("comfortable rows are %.1f px at most: the switch changed nothing", h)
	}
	run("back to compact", chromedp.Evaluate(`document.querySelector('[data-testid="density-toggle"]').click()`, nil),
		chromedp.Reload(), chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery))
	if got := density(); got[0] != "compact" {
		t.Errorf("after switching back: %v", got)
	}

	// "Pause live updates" keeps the rows still while dead letters keep
	// arriving (the demo's traffic); the line beside it counts them, and
	// "Resume live updates" puts them in.
	run("the live list", chromedp.Navigate(base+"/messages?subqueue=dead_letter"),
		chromedp.WaitVisible(`[data-testid="live-status"][data-state="live"]`, chromedp.ByQuery),
		chromedp.Evaluate(`window.__noReload = 1`, nil))
	firstRow := func() string {
		t.Helper()
		var id string
		run("the first row", chromedp.Evaluate(`document.querySelector('[data-testid="message-row"]').id`, &id))
		return id
	}
	var label string
	run("pause", chromedp.Evaluate(`(() => { const b = document.querySelector('[data-testid="live-pause"]'); const before = b.textContent; b.click(); return before; })()`, &label))
	if label != "Pause live updates" {
		t.Errorf("the pause button is named %q", label)
	}
	top := firstRow()
	var rowCount int
	run("count the rows", chromedp.Evaluate(`document.querySelectorAll('[data-testid="message-row"]').length`, &rowCount))
	run("new dead letters arrive", chromedp.Poll(`/paused: \d+ new messages? waiting/.test(document.querySelector('[data-testid="live-waiting"]').textContent)`, nil,
		chromedp.WithPollingTimeout(25*time.Second)), chromedp.Sleep(time.Second))
	var n int
	run("count the rows again", chromedp.Evaluate(`document.querySelectorAll('[data-testid="message-row"]').length`, &n))
	if got := firstRow(); got != top || n != rowCount {
		t.Errorf("while paused the list moved: first row %s → %s, %d → %d rows", top, got, rowCount, n)
	}
	run("resume", chromedp.Evaluate(`(() => { const b = document.querySelector('[data-testid="live-pause"]'); const before = b.textContent; b.click(); return before; })()`, &label),
		// The held rows go in where the list's order puts them: at the top,
		// or, for dead letters that expired (enqueued long ago), lower down
		// (marked new), or the page is refetched with them.
		chromedp.Poll(fmt.Sprintf(`(() => {
			const rows = document.querySelectorAll('[data-testid="message-row"]');
			return rows[0].id !== %q || rows.length !== %d || document.querySelector('[data-testid="message-row"].row-new') !== null;
		})()`, top, rowCount), nil, chromedp.WithPollingTimeout(5*time.Second)))
	if label != "Resume live updates" {
		t.Errorf("the paused button is named %q", label)
	}
	var kept bool
	run("no reload", chromedp.Evaluate(`window.__noReload === 1 && document.querySelector('[data-testid="live-waiting"]').textContent === ""`, &kept))
	if !kept {
		t.Error("resuming reloaded the page or left the waiting line")
	}

	// Replay… and Discard… wait for a selection; the active filters are
	// chips, each removing its filter.
	run("a filtered list", chromedp.Navigate(base+"/messages?entity=orders&subqueue=dead_letter"),
		chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery))
	var disabled []bool
	run("the buttons", chromedp.Evaluate(`['replay-button', 'discard-button'].map(id => document.querySelector('[data-testid="' + id + '"]').disabled)`, &disabled))
	if len(disabled) != 2 || !disabled[0] || !disabled[1] {
		t.Errorf("with nothing selected, Replay… and Discard… disabled = %v, want both", disabled)
	}
	var hint string
	run("the hint", chromedp.Evaluate(`document.querySelector('[data-testid="selection-hint"]').textContent`, &hint))
	if !strings.Contains(hint, "Select messages (or all matching) first") {
		t.Errorf("the hint says %q", hint)
	}
	run("select one", chromedp.Evaluate(`document.querySelector('[data-testid="select-row"]').click()`, nil),
		chromedp.Evaluate(`['replay-button', 'discard-button'].map(id => document.querySelector('[data-testid="' + id + '"]').disabled)`, &disabled))
	if disabled[0] || disabled[1] {
		t.Errorf("with a message selected, disabled = %v", disabled)
	}
	var chips []string
	run("the chips", chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="filter-chip"]')).map(c => c.getAttribute('aria-label'))`, &chips))
	if strings.Join(chips, "|") != "Remove the filter Entity: orders|Remove the filter Subqueue: dead-letter" {
		t.Errorf("chips %q", chips)
	}
	var href string
	run("the entity's chip", chromedp.Evaluate(`document.querySelector('[data-testid="filter-chip"][data-field="entity"]').getAttribute('href')`, &href))
	if href != "/messages?subqueue=dead_letter" {
		t.Errorf("the entity's chip leads to %q, want the list without it", href)
	}
	run("follow it", chromedp.Navigate(base+href), chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="filter-chip"]')).map(c => c.getAttribute('aria-label'))`, &chips))
	if strings.Join(chips, "|") != "Remove the filter Subqueue: dead-letter" {
		t.Errorf("chips after removing the entity: %q", chips)
	}
	var loc string

	// At 390 px: open a group from the overview, read one of its
	// messages, then replay the whole group (after its dry run). Clicks
	// are script clicks: the live script may replace a node at any time.
	run("a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`[data-testid="group-row"]`, chromedp.ByQuery))
	var group string
	run("open the largest group of orders", chromedp.Evaluate(`(() => {
			const row = Array.from(document.querySelectorAll('[data-testid="group-row"]')).find(r => r.querySelector('.entities').textContent.trim() === 'orders');
			const a = row.querySelector('a'); a.click(); return a.getAttribute('href');
		})()`, &group),
		chromedp.WaitVisible(`[data-testid="message-row"]`, chromedp.ByQuery))
	noSideScroll(390, group)
	var body string
	run("read a message", chromedp.Evaluate(`document.querySelector('[data-testid="message-link"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="body-text"]`, chromedp.ByQuery), liveText(`[data-testid="body-text"]`, &body))
	if strings.TrimSpace(body) == "" {
		t.Error("the message's body is empty")
	}
	noSideScroll(390, "a message of the group")
	// The demo's two namespaces fail alike, so the group holds messages of
	// both: its dry run says a job acts on one namespace, and offers each
	// namespace's share. Following prod-eu's button, the group in that
	// namespace replays.
	replayAll := chromedp.Evaluate(`(() => {
			document.querySelector('[data-testid="select-matching"]').click();
			document.querySelector('[data-testid="replay-button"]').click();
		})()`, nil)
	var refusal string
	run("back to the group", chromedp.Navigate(base+group), chromedp.WaitVisible(`[data-testid="select-matching"]`, chromedp.ByQuery),
		replayAll, chromedp.WaitVisible(`[data-testid="confirm-error"]`, chromedp.ByQuery),
		liveText(`[data-testid="confirm-error"]`, &refusal))
	if !strings.Contains(refusal, "2 namespaces") || !strings.Contains(refusal, "a job acts on one namespace") {
		t.Errorf("the dry run of a group in both namespaces says %q", refusal)
	}
	var shares int
	run("each namespace's share", chromedp.Evaluate(`document.querySelectorAll('[data-testid="split-submit"]').length`, &shares))
	if shares != 2 {
		t.Errorf("the confirm page of a group in both namespaces offers %d namespaces' shares, want 2", shares)
	}
	noSideScroll(390, "the namespace split")
	run("the group in prod-eu", chromedp.Evaluate(`document.querySelector('[data-testid="split-namespace"][data-namespace="prod-eu"] [data-testid="split-submit"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="confirm-submit"]`, chromedp.ByQuery))
	// The confirm page (the dry run and the form) fits each width too.
	for _, width := range []int64{390, 768, 1280, 1920} {
		run(fmt.Sprintf("%d px", width), chromedp.EmulateViewport(width, 844))
		noSideScroll(width, "the replay form")
	}
	run("a phone again", chromedp.EmulateViewport(390, 844))
	var ackFanOut bool
	run("fan-out?", chromedp.Evaluate(`!!document.querySelector('[data-testid="confirm-ack-fan-out"]')`, &ackFanOut))
	if ackFanOut {
		t.Error("a replay of an orders group asks to acknowledge a fan-out")
	}
	run("start the replay", chromedp.Evaluate(`document.querySelector('[data-testid="confirm-submit"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="job-progress"]`, chromedp.ByQuery), chromedp.Location(&loc))
	if !strings.Contains(loc, "/jobs/") {
		t.Errorf("the replay landed on %s, want its job's page", loc)
	}
	noSideScroll(390, "the new job")
	if dialogs.Load() > 0 {
		t.Error("a dialog opened")
	}
}
