package views

import (
	"strings"
	"testing"
	"time"
)

// The job fragments carry their live ids and show every text as text.
func TestJobFragments(t *testing.T) {
	xss := `<script>alert(1)</script>`
	j := Job{ID: 42, Action: "replay", Status: "paused", CreatedAt: time.Date(2026, 11, 22, 10, 42, 7, 0, time.UTC), CreatedBy: xss,
		Destination: xss, Reason: xss, PausedReason: xss, Total: 10, Pending: 4, Completed: 5, Failed: 1, CanResume: true, CanCancel: true}
	var b strings.Builder
	if err := JobRow(j).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	row := b.String()
	b.Reset()
	if err := JobProgress(j).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	progress := b.String()
	for _, tt := range []struct {
		name, html string
		want       []string
	}{
		{"row", row, []string{`<tr id="job-42"`, `data-status="paused"`, `<progress max="10" value="5"`, "by &lt;script&gt;"}},
		{"progress", progress, []string{`<section id="job-progress-42"`, `data-testid="job-resume"`, `data-testid="job-cancel"`,
			`action="/jobs/42/resume"`, "Paused: &lt;script&gt;", `data-testid="job-progress-text">5 of 10 sent (50%)<`}},
	} {
		for _, w := range tt.want {
			if !strings.Contains(tt.html, w) {
				t.Errorf("%s lacks %q:\n%s", tt.name, w, tt.html)
			}
		}
		if strings.Contains(tt.html, "<script>") {
			t.Errorf("%s: markup not escaped", tt.name)
		}
	}
	if strings.Contains(progress, `data-testid="job-pause"`) {
		t.Error("a paused job offers Pause")
	}
	if FragmentID("job", "42") == FragmentID("job-progress", "42") || FragmentID("job-rows", "") != "job-rows" {
		t.Error("job fragment ids collide or changed")
	}
}

// A cancelled job shows what it sent, never 100 %, and its cancelled
// count; a retrying job says what keeps failing.
func TestJobFragmentsCancelledAndRetrying(t *testing.T) {
	render := func(j Job) (row, progress string) {
		var b strings.Builder
		if err := JobRow(j).Render(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		row = b.String()
		b.Reset()
		if err := JobProgress(j).Render(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		return row, b.String()
	}
	row, progress := render(Job{ID: 3, Action: "replay", Status: "cancelled", Total: 1000, Completed: 999, Cancelled: 1})
	for _, w := range []string{"999 of 1000 sent (99%), 1 cancelled", `data-testid="job-cancelled">1<`} {
		if !strings.Contains(progress, w) {
			t.Errorf("cancelled job's progress lacks %q:\n%s", w, progress)
		}
	}
	if !strings.Contains(row, "· 1 cancelled") || strings.Contains(row, "100%") || !strings.Contains(row, `data-testid="job-row-progress">999 sent / 1 cancelled<`) {
		t.Errorf("cancelled job's row:\n%s", row)
	}
	row, progress = render(Job{ID: 4, Action: "discard", Status: "retrying", Total: 10, Completed: 4,
		LastError: "receive from orders/$DeadLetterQueue failed 3 times"})
	for _, html := range []string{row, progress} {
		if !strings.Contains(html, "Retrying: receive from orders/$DeadLetterQueue failed 3 times") {
			t.Errorf("retrying job lacks its last error:\n%s", html)
		}
	}
	if !strings.Contains(progress, "4 of 10 discarded (40%)") {
		t.Errorf("discard job's progress:\n%s", progress)
	}
}

// Counts of one take the singular.
func TestSingulars(t *testing.T) {
	if got := (Job{RatePerSecond: 1}).rateText(); got != "1 message per second" {
		t.Errorf("rate 1: %q", got)
	}
	if got := (Job{RatePerSecond: 2.5}).rateText(); got != "2.5 messages per second" {
		t.Errorf("rate 2.5: %q", got)
	}
	c := ReplayConfirm{Form: ReplayForm{Action: "replay"}, Plan: &ReplayPlan{Total: 1}}
	for _, got := range []string{c.title(), c.submitLabel(), c.everythingText()} {
		if strings.Contains(got, "1 messages") {
			t.Errorf("%q", got)
		}
	}
	j := Job{Status: "completed", Sent: 1, Outcome: Outcome{Redeadlettered: 1, CanaryCount: 1, CanaryWatch: "30s"}}
	if got := j.outcomeText(); strings.Contains(got, "all 1") {
		t.Errorf("outcome %q", got)
	}
	if got := j.canaryText(); !strings.Contains(got, "send 1 first, watch it for 30s") {
		t.Errorf("canary %q", got)
	}
	l := MessageList{Matching: 1}
	var b strings.Builder
	if err := selectionBar(l).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "message matches.") || strings.Contains(b.String(), "messages match") {
		t.Errorf("one match: %s", b.String())
	}
}
