package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
)

// byLabel finds a form control by its label's text, as a person (or a
// screen reader) finds it.
func byLabel(label string) string {
	return `[...document.querySelectorAll('label')].find(l => l.textContent.trim() === ` + jsString(label) + `).control`
}

// TestBrowserAlertsAndTriage drives the real program in Chromium: an admin
// adds a Slack webhook on the Alerts page (the "Webhook URL" field, the
// "Format" select, the events), a new group's first dead letter reaches the
// receiver within 5 s, and a group renamed and marked known on its page
// (the select labelled "Status") is silent afterwards while a group left
// new is told it grows.
func TestBrowserAlertsAndTriage(t *testing.T) {
	exe := chromiumPath(t)
	conn, adminAddr := startTestEmulator(t, "")
	client := testClient(t, conn)
	sender, err := client.NewSender("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(context.Background())
	receiver, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close(context.Background())
	deadLetter := func(n int, reason, desc string) {
		t.Helper()
		for range n {
			if err := sender.SendMessage(t.Context(), &azservicebus.Message{Body: []byte(reason)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		deadLetterFrom(t, receiver, n, reason, desc)
	}

	hook := &slackReceiver{path: "/services/T000/B000/XXXXsecretXXXX"}
	recv := httptest.NewServer(hook)
	defer recv.Close()

	srv := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "catalog.db"), "--poll", "200ms",
		"--admin-endpoint", "http://" + adminAddr}, env(envConnectionString, conn))
	defer srv.stop(t)
	base := "http://" + srv.addr

	b, _ := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// again runs actions that may be run twice (a navigation and what it
	// reads) like run, once more when Chromium lost the page's execution
	// context under them: an evaluation can start in the context of the
	// page a navigation replaces, before chromedp has seen the new one.
	again := func(what string, actions ...chromedp.Action) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			tctx, cancel := context.WithTimeout(b, 30*time.Second)
			err := chromedp.Run(tctx, actions...)
			cancel()
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "Cannot find context with specified id") || time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			t.Logf("%s: %v; again", what, err)
			time.Sleep(100 * time.Millisecond)
		}
	}

	// landed waits for the page a form's submission loads: the execution
	// context is replaced mid-way, so a failed evaluation is retried. The
	// submitting page is marked (window.submitted), and the condition holds
	// only on a page without the mark: a live page can show the saved values
	// before the form's own navigation has finished, and navigating away
	// then would race it.
	landed := func(cond string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ok bool
			err := chromedp.Run(b, chromedp.Evaluate(`!window.submitted && (`+cond+`)`, &ok))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s (last error: %v)", cond, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The Alerts page, from the navigation.
	run("open Alerts", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`[data-testid="nav-alerts"]`),
		chromedp.Evaluate(`document.querySelector('[data-testid="nav-alerts"]').click()`, nil), chromedp.WaitVisible(`[data-testid="webhook-form"]`))
	run("fill in the webhook", chromedp.Evaluate(`(() => {
			`+byLabel("Name")+`.value = "ops channel";
			`+byLabel("Webhook URL")+`.value = `+jsString(recv.URL+hook.path)+`;
			const format = `+byLabel("Format")+`; format.value = "slack";
			for (const box of document.querySelectorAll('input[name="events"]')) box.checked = ["new_group", "group_growth"].includes(box.value);
			`+byLabel("Growing fast: at least this many dead letters per minute")+`.value = "5";
			window.submitted = true;
			setTimeout(() => document.querySelector('[data-testid="webhook-save"]').click(), 0);
		})()`, nil))
	landed(`document.readyState === "complete" && document.querySelector('[data-testid="webhook-added"]') !== null`)
	var page string
	run("read the Alerts page", chromedp.OuterHTML(`html`, &page))
	if strings.Contains(page, "XXXXsecretXXXX") || !strings.Contains(page, strings.TrimPrefix(recv.URL, "http://")) {
		t.Errorf("after saving, the page shows the URL or not its host")
	}

	// A new group: told within 5 s of its first dead letter.
	start := time.Now()
	deadLetter(1, "OrderNotFound", "Order 4711 not found")
	deadLetter(1, "PaymentDeclined", "Card 4242 declined")
	var first slackPost
	waitForWithin(t, 5*time.Second, "the Slack alert of the new group", func() bool {
		var ok bool
		first, ok = hook.find("New failure group: OrderNotFound")
		return ok
	})
	t.Logf("dead-lettered → Slack alert: %v", first.at.Sub(start).Round(time.Millisecond))
	if !strings.Contains(first.body, "<"+base+"/groups/") {
		t.Errorf("the alert does not link to the group's page on this dashboard: %s", first.body)
	}
	waitForWithin(t, 5*time.Second, "the second group's alert", func() bool { _, ok := hook.find("PaymentDeclined"); return ok })

	// Rename it and mark it known on its page.
	again("open the group", chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(`[data-testid="group-name"]`),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="group-name"]')].find(a => a.textContent.includes("OrderNotFound")).click()`, nil),
		chromedp.WaitVisible(`[data-testid="group-triage"]`))
	run("triage it", chromedp.Evaluate(`(() => {
			`+byLabel("Name")+`.value = "Orders deleted upstream";
			const status = `+byLabel("Status")+`;
			if (status.tagName !== "SELECT") throw new Error("Status is a " + status.tagName);
			status.value = "known";
			`+byLabel("Owner")+`.value = "ops team";
			window.submitted = true;
			setTimeout(() => document.querySelector('[data-testid="group-save"]').click(), 0);
		})()`, nil))
	landed(`document.readyState === "complete" && document.querySelector('[data-testid="group-title"]') !== null && document.querySelector('[data-testid="group-title"]').textContent.trim() === "Orders deleted upstream"`)
	var status string
	run("its status", chromedp.Evaluate(byLabel("Status")+`.value`, &status))
	if status != "known" {
		t.Errorf("the Status select shows %q after saving, want known", status)
	}
	again("the list", chromedp.Navigate(base+"/groups"),
		chromedp.Poll(`[...document.querySelectorAll('[data-testid="group-row"]')].some(r => r.dataset.status === "known" && r.textContent.includes("Orders deleted upstream") && r.textContent.includes("ops team"))`, nil))
	before := len(hook.posts())

	// Both grow the same way once the alert loop can measure a rate.
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	deadLetter(12, "OrderNotFound", "Order 4712 not found")
	deadLetter(12, "PaymentDeclined", "Card 4343 declined")
	waitForWithin(t, 15*time.Second, "the growth alert of the group left new", func() bool {
		_, ok := hook.find("Failure group growing: PaymentDeclined")
		return ok
	})
	time.Sleep(500 * time.Millisecond)
	for _, p := range hook.posts()[before:] {
		if strings.Contains(p.text, "OrderNotFound") || strings.Contains(p.text, "Orders deleted upstream") {
			t.Errorf("the known group alerted: %s", p.text)
		}
	}

	// The history says what was sent and that the webhook answered.
	again("the history", chromedp.Navigate(base+"/alerts/history"), chromedp.WaitVisible(`[data-testid="alert-delivery"]`))
	var delivered, ok int
	again("count deliveries", chromedp.Evaluate(`document.querySelectorAll('[data-testid="alert-delivery"]').length`, &delivered),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="alert-delivery"][data-ok="true"]').length`, &ok))
	if delivered != len(hook.posts()) || ok != delivered {
		t.Errorf("history lists %d deliveries (%d answered), the receiver got %d", delivered, ok, len(hook.posts()))
	}

	// The new pages fit a phone: no sideways scroll at 390 px.
	var groupPage string
	again("the group's address", chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(`[data-testid="group-name"]`),
		chromedp.AttributeValue(`[data-testid="group-name"]`, "href", &groupPage, nil))
	run("a phone's width", chromedp.EmulateViewport(390, 844))
	for _, path := range []string{"/alerts", "/alerts/history", groupPage, "/groups", "/"} {
		var wide bool
		again("390 px "+path, chromedp.Navigate(base+path), chromedp.WaitReady(`#main`),
			chromedp.Evaluate(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &wide))
		if wide {
			var culprits []string
			run("what is too wide", chromedp.Evaluate(`[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 8).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))`, &culprits))
			t.Errorf("%s scrolls sideways at 390 px: %v", path, culprits)
		}
	}
}
