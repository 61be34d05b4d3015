package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBrowserInventoryActions drives the inventory's actions in Chromium
// against the real program (dlqdash serve behind a trusted proxy, with the
// emulator): an operator resolves a deferred message by replaying it from
// the inventory page (its copy arrives once on its queue, and it leaves the
// deferred inventory); an operator is refused the cancel of a scheduled
// message (no link on the page, 403 on the form's POST and on the API); an
// admin cancels it from the page, with a reason: it is gone from the broker
// and the inventory, and the audit trail says who did it.
func TestBrowserInventoryActions(t *testing.T) {
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
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: ptr("stock-1"), Body: []byte(`{"sku":"A-1","delta":-3}`)}, nil); err != nil {
		t.Fatal(err)
	}
	scheduled, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: ptr("remind-1"), Body: []byte("review reminder")}},
		time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	r, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v (%d)", err, len(ms))
	}
	deferredSeq := *ms[0].SequenceNumber
	if err := r.DeferMessage(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}

	db := filepath.Join(t.TempDir(), "catalog.db")
	srv := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-endpoint", "http://" + adminAddr, "--poll", "100ms",
		"--auth", "proxy", "--trusted-proxies", "127.0.0.1", "--admin-groups", "admins", "--operator-groups", "ops", "--viewer-groups", "support"},
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

	// call sends a request as the proxy would, for a member of group.
	call := func(group, method, path, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-User", group+"-user")
		req.Header.Set("X-Forwarded-Groups", group)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
			req.Header.Set("Origin", base)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// The catalog ids of the deferred and the scheduled message.
	idOf := func(state string) string {
		var out struct{ Messages []struct{ ID string } }
		waitForWithin(t, 30*time.Second, "the "+state+" message in the catalog", func() bool {
			_, body := call("support", "GET", "/api/v1/messages?entity=queue.1&state="+state, "", "")
			return json.Unmarshal([]byte(body), &out) == nil && len(out.Messages) == 1
		})
		return out.Messages[0].ID
	}
	deferredID, scheduledID := idOf("deferred"), idOf("scheduled")

	b, dialogs := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(b, 30*time.Second)
		defer tcancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	as := func(group string) chromedp.Action {
		return chromedp.Tasks{network.Enable(), network.SetExtraHTTPHeaders(network.Headers{
			"X-Forwarded-User": group + "-user", "X-Forwarded-Groups": group})}
	}
	text := func(sel string) string {
		t.Helper()
		var s string
		run("read "+sel, liveText(sel, &s))
		return strings.TrimSpace(s)
	}

	// An operator replays the deferred message from the inventory.
	run("the inventory as an operator", as("ops"), chromedp.Navigate(base+"/inventory"),
		chromedp.Poll(`document.querySelector('[data-testid="deferred-row"][data-id="`+deferredID+`"] [data-testid="deferred-replay"]') !== null`, nil))
	var cancelLinks int
	run("no cancel for an operator", chromedp.Evaluate(`document.querySelectorAll('[data-testid="scheduled-cancel"]').length`, &cancelLinks))
	if cancelLinks != 0 {
		t.Errorf("an operator is offered %d Cancel… links", cancelLinks)
	}
	run("Replay…", chromedp.Evaluate(`document.querySelector('[data-testid="deferred-row"][data-id="`+deferredID+`"] [data-testid="deferred-replay"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="plan-total"]`, chromedp.ByQuery))
	if total, deferred := text(`[data-testid="plan-total"]`), text(`[data-testid="plan-deferred"]`); total != "1" || deferred != "1" {
		t.Fatalf("the dry run selects %s messages, %s deferred; want 1 and 1", total, deferred)
	}
	if got := text(`[data-testid="plan-destination"]`); got != "queue.1" {
		t.Errorf("the copy goes to %q, want queue.1", got)
	}
	run("start", chromedp.Evaluate(`document.querySelector('[data-testid="confirm-submit"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="job-progress"]`, chromedp.ByQuery))
	jobURL := mustLocation(t, b)
	// (Live updates are another test's: here the page is read again.)
	waitForWithin(t, 25*time.Second, "the job to complete", func() bool {
		run("the job page", chromedp.Navigate(jobURL))
		return text(`[data-testid="job-status"]`) == "completed"
	})
	if got := text(`[data-testid="job-completed"]`); got != "1" {
		t.Errorf("the job completed %s messages, want 1", got)
	}
	jobID := jobURL[strings.LastIndex(jobURL, "/")+1:]

	// The broker: one copy on queue.1, and the deferred original gone.
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	copies, err := r.ReceiveMessages(rctx, 10, nil)
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) != 1 || copies[0].MessageID != "stock-1/dlqdash-"+jobID || string(copies[0].Body) != `{"sku":"A-1","delta":-3}` {
		var ids []string
		for _, m := range copies {
			ids = append(ids, m.MessageID)
		}
		t.Fatalf("queue.1 holds %v, want exactly the copy stock-1/dlqdash-%s", ids, jobID)
	}
	if err := r.CompleteMessage(ctx, copies[0], nil); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReceiveDeferredMessages(ctx, []int64{deferredSeq}, nil); err == nil && len(got) > 0 {
		t.Errorf("the deferred original %d can still be received", deferredSeq)
	}
	// Until the catalog reads the queue again, its row says it was
	// resolved (and offers no replay); then it leaves the deferred inventory.
	var honest bool
	run("the inventory after the job", chromedp.Navigate(base+"/inventory"), chromedp.Evaluate(`(() => {
			const r = document.querySelector('[data-testid="deferred-row"][data-id="`+deferredID+`"]');
			return r === null || (r.querySelector('[data-testid="deferred-resolved"]') !== null && r.querySelector('[data-testid="deferred-replay"]') === null);
		})()`, &honest))
	if !honest {
		t.Error("the inventory offers the resolved deferred message again instead of saying it was resolved")
	}
	waitForWithin(t, 30*time.Second, "the deferred message to leave the inventory", func() bool {
		var gone bool
		run("the inventory", chromedp.Navigate(base+"/inventory"),
			chromedp.Evaluate(`document.querySelector('[data-testid="deferred-empty"]') !== null`, &gone))
		return gone
	})

	// An operator may not cancel the scheduled message: the form's POST and the API are refused.
	if status, _ := call("ops", "POST", "/messages/"+scheduledID+"/cancel", "application/x-www-form-urlencoded", url.Values{"reason": {"x"}}.Encode()); status != http.StatusForbidden {
		t.Errorf("an operator's cancel: %d, want 403", status)
	}
	if status, body := call("ops", "POST", "/api/v1/scheduled/cancel", "application/json", `{"ids":["`+scheduledID+`"],"reason":"x"}`); status != http.StatusForbidden ||
		!strings.Contains(body, "permission_denied") {
		t.Errorf("an operator's cancel through the API: %d %s, want 403", status, body)
	}

	// An admin cancels it from the inventory, with a reason.
	run("the inventory as an admin", as("admins"), chromedp.Navigate(base+"/inventory"),
		chromedp.Poll(`document.querySelector('[data-testid="scheduled-row"][data-id="`+scheduledID+`"] [data-testid="scheduled-cancel"]') !== null`, nil),
		chromedp.Evaluate(`document.querySelector('[data-testid="scheduled-row"][data-id="`+scheduledID+`"] [data-testid="scheduled-cancel"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="cancel-reason"]`, chromedp.ByQuery),
		chromedp.SendKeys(`[data-testid="cancel-reason"]`, "campaign withdrawn", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('[data-testid="cancel-submit"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="cancel-done"]`, chromedp.ByQuery))
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range peeked {
		if *m.SequenceNumber == scheduled[0] {
			t.Errorf("the scheduled message %d is still in queue.1 (%v)", scheduled[0], m.State)
		}
	}
	waitForWithin(t, 30*time.Second, "the scheduled message to leave the inventory", func() bool {
		var gone bool
		run("the inventory", chromedp.Navigate(base+"/inventory"),
			chromedp.Evaluate(`document.querySelector('[data-testid="scheduled-empty"]') !== null`, &gone))
		return gone
	})
	// The audit trail: who cancelled which message, why, and that it worked.
	_, body := call("admins", "GET", "/api/v1/audit?action=scheduled_cancelled", "", "")
	var audit struct {
		Entries []struct {
			Actor      string
			MessageIDs []string `json:"message_ids"`
			Outcome    string
			Params     struct{ Reason, Entity string }
		}
	}
	if err := json.Unmarshal([]byte(body), &audit); err != nil {
		t.Fatalf("audit: %v %s", err, body)
	}
	if len(audit.Entries) != 1 || audit.Entries[0].Actor != "proxy:admins-user" || audit.Entries[0].Outcome != "succeeded" ||
		strings.Join(audit.Entries[0].MessageIDs, ",") != scheduledID || audit.Entries[0].Params.Reason != "campaign withdrawn" ||
		audit.Entries[0].Params.Entity != "queue.1" {
		t.Errorf("scheduled_cancelled entries: %s", body)
	}
	_, body = call("admins", "GET", "/api/v1/audit?action=deferred_resolved", "", "")
	if !strings.Contains(body, `"actor":"proxy:ops-user"`) || !strings.Contains(body, `"`+deferredID+`"`) {
		t.Errorf("deferred_resolved entries: %s", body)
	}
	if dialogs.Load() > 0 {
		t.Error("a dialog opened")
	}
}
