package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
)

// TestBrowserReplay drives the replay journey in Chromium against the real
// program: select messages on the list, see the dry run, start the job,
// watch it finish on its page without reloading, find the replay in the
// message's history; then discard everything matching a filter.
func TestBrowserReplay(t *testing.T) {
	exe := chromiumPath(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, adminAddr := startTestEmulator(t, "")

	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	s, err := client.NewSender("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		id := fmt.Sprintf("order-%d", i)
		if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(`{"order":` + fmt.Sprint(i) + `}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Close(ctx)
	r, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 6; {
		ms, err := r.ReceiveMessages(ctx, 6-got, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			reason := "SqlTimeout"
			if (got+i)%2 == 1 {
				reason = "Validation"
			}
			if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason}); err != nil {
				t.Fatal(err)
			}
		}
		got += len(ms)
	}
	r.Close(ctx)

	db := filepath.Join(t.TempDir(), "catalog.db")
	srv := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-endpoint", "http://" + adminAddr, "--log-level", "debug"},
		env(envConnectionString, conn))
	defer srv.stop(t)
	defer func() {
		if t.Failed() {
			for _, l := range strings.Split(srv.stderr.String(), "\n") {
				if strings.Contains(l, `"component":"replay"`) || strings.Contains(l, "ERROR") || strings.Contains(l, "WARN") {
					t.Log(l)
				}
			}
		}
	}()
	base := "http://" + srv.addr

	b, dialogs := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(b, 30*time.Second)
		defer tcancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		var s string
		run("read "+sel, liveText(sel, &s))
		return strings.TrimSpace(s)
	}

	// Select the SqlTimeout ones on the list and ask for a replay.
	run("the list", chromedp.Navigate(base+"/messages?entity=queue.1&reason=SqlTimeout"),
		chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 3`, nil))
	// The clicks go in one script turn: the live script may refetch the
	// page (a resync) at any moment, replacing the nodes a step-by-step
	// click would hold.
	run("select two", chromedp.Evaluate(`(() => {
			const rows = document.querySelectorAll('[data-testid="select-row"]');
			rows[0].click(); rows[1].click();
			document.querySelector('[data-testid="replay-button"]').click();
		})()`, nil),
		chromedp.WaitVisible(`[data-testid="plan-total"]`, chromedp.ByQuery))
	if got := text(`[data-testid="plan-total"]`); got != "2" {
		t.Fatalf("the dry run selects %q messages, want 2", got)
	}
	if !strings.Contains(text(`[data-testid="plan-warnings"]`), "duplicate detection") {
		t.Errorf("the dry run's warnings do not mention the target's duplicate detection")
	}
	// Start it, and watch it finish on the job page without a reload.
	run("start", chromedp.Evaluate(`document.querySelector('[data-testid="confirm-submit"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="job-progress"]`, chromedp.ByQuery),
		chromedp.Evaluate(`window.__noReload = 1`, nil),
		chromedp.Poll(`document.querySelector('[data-testid="job-status"]').textContent.trim() === "completed"`, nil,
			chromedp.WithPollingTimeout(25*time.Second)))
	var kept bool
	run("no reload", chromedp.Evaluate(`window.__noReload === 1`, &kept))
	if got := text(`[data-testid="job-completed"]`); got != "2" || !kept {
		t.Errorf("job page: %s completed (reloaded: %v), want 2 live", got, !kept)
	}
	run("the job's messages", chromedp.Navigate(base+strings.TrimPrefix(mustLocation(t, b), base)),
		chromedp.Poll(`document.querySelectorAll('[data-testid="job-item"][data-state="completed"]').length === 2`, nil))

	// The message's page tells what became of it.
	run("a replayed message", chromedp.Evaluate(`document.querySelector('[data-testid="job-item-link"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="replay-history-row"]`, chromedp.ByQuery))
	if got := text(`[data-testid="replay-state"]`); got != "completed" {
		t.Errorf("the message's replay history says %q", got)
	}

	// Everything matching Validation, discarded in one go with a reason.
	run("the Validation list", chromedp.Navigate(base+"/messages?entity=queue.1&reason=Validation"),
		chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 3`, nil),
		chromedp.Evaluate(`(() => {
			document.querySelector('[data-testid="select-matching"]').click();
			document.querySelector('[data-testid="discard-button"]').click();
		})()`, nil),
		chromedp.WaitVisible(`[data-testid="confirm-reason"]`, chromedp.ByQuery))
	if got := text(`[data-testid="plan-total"]`); got != "3" {
		t.Fatalf("discard dry run selects %q, want 3", got)
	}
	run("discard", chromedp.SendKeys(`[data-testid="confirm-reason"]`, "bad input, fixed upstream", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('[data-testid="confirm-submit"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="job-progress"]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('[data-testid="job-status"]').textContent.trim() === "completed"`, nil,
			chromedp.WithPollingTimeout(25*time.Second)))
	if got := text(`[data-testid="job-completed"]`); got != "3" {
		t.Errorf("discard job completed %s, want 3", got)
	}
	// The audit page shows who did it.
	run("audit", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(`[data-testid="audit-action"]`, chromedp.ByQuery))
	var actions string
	run("audit actions", chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="audit-entry-action"]')).map(e => e.textContent.trim()).join(",")`, &actions))
	for _, a := range []string{"replay_job_created", "replay", "discard_job_created", "discard", "job_completed"} {
		if !strings.Contains(","+actions+",", ","+a+",") {
			t.Errorf("the audit page lacks %s: %s", a, actions)
		}
	}
	if dialogs.Load() > 0 {
		t.Error("a dialog opened")
	}
	// The broker agrees: two copies in queue.1, one SqlTimeout left.
	dl, _ := client.NewReceiverForQueue("queue.1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	left, err := dl.PeekMessages(ctx, 10, nil)
	dl.Close(ctx)
	if err != nil || len(left) != 1 {
		t.Errorf("%d messages left in the DLQ (%v), want 1", len(left), err)
	}
}

func mustLocation(t *testing.T, b context.Context) string {
	t.Helper()
	var loc string
	if err := chromedp.Run(b, chromedp.Location(&loc)); err != nil {
		t.Fatal(err)
	}
	return loc
}
