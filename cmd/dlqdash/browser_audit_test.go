package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestBrowserAudit drives the audit page in Chromium against the real
// program: a replay job's per-batch entries are one row, which expands to
// its first messages and links to all of them; the job filter keeps one
// job's actions; the Export link downloads the filtered entries.
func TestBrowserAudit(t *testing.T) {
	exe := chromiumPath(t)
	const n = 120
	r := newFaultRig(t)
	r.seed("audit", n)
	r.serve()
	replayed := r.replayAll(n, map[string]any{"rate_per_second": 100})
	waitForWithin(t, 30*time.Second, "the replay to complete", func() bool { return r.job(replayed.ID).Status == "completed" })
	r.seed("stale", 5)
	r.cataloged(5)
	var discarded faultJob
	if code := r.api("POST", "/api/v1/jobs", map[string]any{"action": "discard", "filter": ordersDLQ, "reason": "stale"}, &discarded); code != http.StatusCreated {
		t.Fatalf("discard: %d", code)
	}
	waitForWithin(t, 30*time.Second, "the discard to complete", func() bool { return r.job(discarded.ID).Status == "completed" })
	// The replay's per-batch entries, as the trail holds them.
	var entries struct {
		Entries []struct{ Seq int64 } `json:"entries"`
	}
	r.api("GET", "/api/v1/audit?limit=500&action=replay&job="+replayed.ID, nil, &entries)
	if len(entries.Entries) == 0 {
		t.Fatal("no replay entries for the job")
	}
	t.Logf("job %s's %d messages are %d replay entries", replayed.ID, n, len(entries.Entries))

	base := "http://" + r.s.addr
	b, dialogs := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(b, 30*time.Second)
		defer tcancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// One row for the job's replay, closed; opened, it shows 20 messages
	// and a link to all of them.
	row := fmt.Sprintf(`[...document.querySelectorAll('tr[data-testid="audit-action"][data-job="%s"]')].find(r => r.querySelector('[data-testid="audit-entry-action"]').textContent.trim() === "replay")`, replayed.ID)
	var before struct {
		Rows, Entries, Visible int
		Count                  string
		Open                   bool
	}
	run("the audit page", chromedp.Navigate(base+"/audit"),
		chromedp.WaitVisible(`[data-testid="audit-action"]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => {
			const row = `+row+`;
			const rows = [...document.querySelectorAll('tr[data-testid="audit-action"]')].filter(r => r.querySelector('[data-testid="audit-entry-action"]').textContent.trim() === "replay");
			const d = row.querySelector('details');
			return {rows: rows.length, entries: +row.dataset.entries, count: d.querySelector('summary').textContent.trim(), open: d.open,
				visible: [...d.querySelectorAll('[data-testid="audit-message-link"]')].filter(a => a.checkVisibility()).length};
		})()`, &before))
	if before.Rows != 1 || before.Entries != len(entries.Entries) || before.Count != strconv.Itoa(n)+" messages" || before.Open || before.Visible != 0 {
		t.Fatalf("before expanding: %+v; want one replay row of %d entries, %d messages, closed", before, len(entries.Entries), n)
	}
	var after struct {
		Visible int
		All     string
	}
	run("expand", chromedp.Evaluate(`(() => { `+row+`.querySelector('summary').click(); })()`, nil),
		chromedp.Evaluate(`(() => {
			const d = `+row+`.querySelector('details');
			return {visible: [...d.querySelectorAll('[data-testid="audit-message-link"]')].filter(a => a.checkVisibility()).length,
				all: d.querySelector('[data-testid="audit-action-all"]').textContent.trim()};
		})()`, &after))
	if after.Visible != 20 || after.All != fmt.Sprintf("All %d messages →", n) {
		t.Fatalf("expanded: %+v", after)
	}
	var listed int
	run("all its messages", chromedp.Evaluate(`(() => { const a = `+row+`.querySelector('[data-testid="audit-action-all"]'); setTimeout(() => a.click(), 0); })()`, nil),
		chromedp.WaitVisible(`[data-testid="audit-action-message-list"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="audit-message-link"]').length`, &listed))
	if listed != n {
		t.Errorf("the action's page lists %d messages, want %d", listed, n)
	}

	// Filter by the discard job: its three actions only.
	var jobs []string
	run("filter by job", chromedp.Navigate(base+"/audit"),
		chromedp.WaitVisible(`[data-testid="audit-filter"]`, chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`(() => {
			document.querySelector('[data-testid="audit-filter"] details').open = true;
			document.querySelector('[data-testid="audit-job"]').value = %q;
			setTimeout(() => document.querySelector('[data-testid="audit-submit"]').click(), 0);
		})()`, discarded.ID), nil),
		chromedp.WaitReady(`input[data-testid="audit-job"][value="`+discarded.ID+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="audit-action"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('tr[data-testid="audit-action"]')].map(r => r.dataset.job + ":" + r.querySelector('[data-testid="audit-entry-action"]').textContent.trim())`, &jobs))
	want := []string{discarded.ID + ":job_completed", discarded.ID + ":discard", discarded.ID + ":discard_job_created"}
	if fmt.Sprint(jobs) != fmt.Sprint(want) {
		t.Errorf("filtered by job %s: %v, want %v", discarded.ID, jobs, want)
	}

	// Export what is filtered, as the page's link downloads it.
	var export struct {
		Href, Type, Disposition, Body string
	}
	run("export", chromedp.Evaluate(`(async () => {
		const a = document.querySelector('[data-testid="audit-export-csv"]');
		const res = await fetch(a.href);
		return {href: a.getAttribute('href'), type: res.headers.get('content-type'), disposition: res.headers.get('content-disposition'), body: await res.text()};
	})()`, &export, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if !strings.Contains(export.Href, "job="+discarded.ID) || !strings.HasPrefix(export.Type, "text/csv") || !strings.Contains(export.Disposition, "attachment") {
		t.Fatalf("export link %q: %s, %s", export.Href, export.Type, export.Disposition)
	}
	recs, err := csv.NewReader(strings.NewReader(export.Body)).ReadAll()
	if err != nil {
		t.Fatalf("export: %v: %s", err, export.Body)
	}
	var jobEntries struct {
		Entries []struct{ Seq int64 } `json:"entries"`
	}
	r.api("GET", "/api/v1/audit?job="+discarded.ID, nil, &jobEntries)
	if len(recs) != 1+len(jobEntries.Entries) || recs[0][0] != "seq" {
		t.Fatalf("export: %d rows, want a header and %d entries", len(recs), len(jobEntries.Entries))
	}
	for i, rec := range recs[1:] {
		if want := jobEntries.Entries[len(jobEntries.Entries)-1-i].Seq; rec[0] != strconv.FormatInt(want, 10) {
			t.Errorf("export row %d is entry %s, want %d (seq order)", i+1, rec[0], want)
		}
		if params := rec[slices.Index(recs[0], "params")]; !strings.Contains(params, `"job_id":"`+discarded.ID+`"`) {
			t.Errorf("export row %d is not job %s's: %v", i+1, discarded.ID, rec)
		}
	}
	if dialogs.Load() > 0 {
		t.Error("a dialog opened")
	}
}
