package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
)

// TestBrowserEditDryRun drives edit and replay in Chromium against the real
// program (issue 19): the message page's "Edit and replay…" button opens
// the form, a change to the body and a "Dry run" show the diff of the body
// and the properties (the broker's DeadLetterReason removed), and nothing
// is sent: no job, the dead letter still in its queue. Then the edited copy
// is sent, fails again, and the lineage links both ways.
func TestBrowserEditDryRun(t *testing.T) {
	exe := chromiumPath(t)
	ctx := t.Context()
	conn, adminAddr := startTestEmulator(t, "")
	client := testClient(t, conn)
	s, err := client.NewSender("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: ptrTo("order-1"), ContentType: ptrTo("application/json"),
		Body: []byte(`{"customer":{"id":"C-1","name":"Ann"},"total":5}`), ApplicationProperties: map[string]any{"tenant": "t1"}}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	r, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v", err)
	}
	if err := r.DeadLetterMessage(ctx, ms[0], &azservicebus.DeadLetterOptions{Reason: ptrTo("CustomerUnknown")}); err != nil {
		t.Fatal(err)
	}
	r.Close(ctx)

	srv := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "catalog.db"),
		"--admin-endpoint", "http://" + adminAddr}, env(envConnectionString, conn))
	defer srv.stop(t)
	base := "http://" + srv.addr
	getJSON := func(path string, out any) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var list struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	waitFor(t, "the dead letter in the catalog", func() bool {
		getJSON("/api/v1/messages?entity=queue.1", &list)
		return len(list.Messages) == 1
	})
	id := list.Messages[0].ID

	b, _ := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(b, 30*time.Second)
		defer tcancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// The buttons by their accessible names, as a person finds them.
	click := func(name string) chromedp.Action {
		return chromedp.Evaluate(`(() => {
			const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === `+jsString(name)+`);
			if (!b) throw new Error('no button ' + `+jsString(name)+`);
			b.click();
		})()`, nil)
	}
	run("the message page", chromedp.Navigate(base+"/messages/"+id), chromedp.WaitVisible(`[data-testid="message-actions"]`, chromedp.ByQuery))
	run("open the edit form", click("Edit and replay…"), chromedp.WaitVisible(`[data-testid="edit-body"]`, chromedp.ByQuery))
	var props string
	run("read the properties", chromedp.Value(`[data-testid="edit-properties"]`, &props, chromedp.ByQuery))
	if !strings.Contains(props, "tenant") || strings.Contains(props, "DeadLetterReason") {
		t.Errorf("the form's properties: %s", props)
	}
	run("edit the body", chromedp.Evaluate(`(() => {
			const t = document.querySelector('[data-testid="edit-body"]');
			t.value = t.value.replace('C-1', 'C-42');
		})()`, nil))
	run("dry run", click("Dry run"), chromedp.WaitVisible(`[data-testid="edit-review"]`, chromedp.ByQuery))
	var diff []string
	run("read the diff", chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="diff-line"]:not([data-kind="same"])')].map(r => r.dataset.kind + ' ' + r.querySelector('.diff-text').textContent.trim())`, &diff))
	if strings.Join(diff, "|") != `removed "id": "C-1",|added "id": "C-42",` {
		t.Errorf("the body's diff: %q", diff)
	}
	var props2 []string
	run("read the property changes", chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="property-change"]')].map(r => r.dataset.key + ' ' + r.dataset.kind)`, &props2))
	if !strings.Contains(strings.Join(props2, "|"), "DeadLetterReason removed") || !strings.Contains(strings.Join(props2, "|"), "dlqdash.replay_count added") {
		t.Errorf("the property changes: %q", props2)
	}
	var edited string
	run("the form keeps the edit", chromedp.Value(`[data-testid="edit-body"]`, &edited, chromedp.ByQuery))
	if !strings.Contains(edited, "C-42") {
		t.Errorf("the form after the dry run: %s", edited)
	}
	// Nothing was sent: no job, the dead letter where it was.
	var jobs struct {
		Jobs []any `json:"jobs"`
	}
	getJSON("/api/v1/jobs", &jobs)
	if len(jobs.Jobs) != 0 {
		t.Errorf("the dry run created %d jobs", len(jobs.Jobs))
	}
	pr, err := client.NewReceiverForQueue("queue.1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(context.Background())
	peeked, err := pr.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 1 {
		t.Errorf("the dead-letter queue after the dry run: %d messages, %v", len(peeked), err)
	}
	main, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close(context.Background())
	if got, err := main.PeekMessages(ctx, 10, nil); err != nil || len(got) != 0 {
		t.Errorf("the queue after the dry run: %d messages, %v", len(got), err)
	}

	// Sent for real, the copy fails again: its page links back to the
	// original and the job, the original's page forward to the copy.
	run("replay the edited message", click("Replay the edited message"), chromedp.WaitVisible(`[data-testid="job-progress"]`, chromedp.ByQuery))
	var jobURL string
	run("the job's page", chromedp.Location(&jobURL))
	jobPath := strings.TrimPrefix(jobURL, base)
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	copies, err := main.ReceiveMessages(rctx, 1, nil)
	rcancel()
	if err != nil || len(copies) != 1 {
		t.Fatalf("receive the copy: %v", err)
	}
	if !strings.Contains(string(copies[0].Body), "C-42") || copies[0].ApplicationProperties["DeadLetterReason"] != nil {
		t.Errorf("the copy: %s %v", copies[0].Body, copies[0].ApplicationProperties)
	}
	if err := main.DeadLetterMessage(ctx, copies[0], &azservicebus.DeadLetterOptions{Reason: ptrTo("StillUnknown")}); err != nil {
		t.Fatal(err)
	}
	var copyID string
	waitForWithin(t, 20*time.Second, "the copy dead-lettered again in the catalog", func() bool {
		getJSON("/api/v1/messages?entity=queue.1&reason=StillUnknown", &list)
		if len(list.Messages) == 1 {
			copyID = list.Messages[0].ID
		}
		return copyID != ""
	})
	run("the copy's page", chromedp.Navigate(base+"/messages/"+copyID), chromedp.WaitVisible(`[data-testid="lineage"]`, chromedp.ByQuery))
	var links []string
	run("the copy's lineage", chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="lineage"] a')].map(a => new URL(a.href).pathname)`, &links))
	if strings.Join(links, " ") != "/messages/"+id+" "+jobPath {
		t.Errorf("the copy's lineage links %q, want the original /messages/%s and %s", links, id, jobPath)
	}
	run("to the original", chromedp.Evaluate(`document.querySelector('[data-testid="lineage-message-link"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="lineage-current"]`, chromedp.ByQuery))
	run("the original's lineage", chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="lineage"] a')].map(a => new URL(a.href).pathname)`, &links))
	if strings.Join(links, " ") != jobPath+" /messages/"+copyID {
		t.Errorf("the original's lineage links %q, want %s and the copy /messages/%s", links, jobPath, copyID)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
