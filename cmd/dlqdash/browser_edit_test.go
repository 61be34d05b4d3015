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
// is sent: no job, the dead letter still in its queue.
func TestBrowserEditDryRun(t *testing.T) {
	exe := chromiumPath(t)
	ctx := t.Context()
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
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
