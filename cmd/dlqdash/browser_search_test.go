package main

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
)

// TestBrowserSearch drives the real program in Chromium: a search's word
// is highlighted in the list's preview and in the message's body, its
// count is exact, a body's markup stays inert, and the filter bar's
// property picker offers the listed messages' keys and values and adds a
// property filter chip.
func TestBrowserSearch(t *testing.T) {
	exe := chromiumPath(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, adminAddr := startTestEmulator(t, "")
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	deadLetter := func(id, body, tenant string) {
		t.Helper()
		s, err := client.NewSender("queue.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		m := &azservicebus.Message{MessageID: &id, Body: []byte(body), ContentType: ptr("text/plain"),
			ApplicationProperties: map[string]any{"tenant": tenant, "region": "westeurope"}}
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		r, err := client.NewReceiverForQueue("queue.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		ms, err := r.ReceiveMessages(rctx, 1, nil)
		if err != nil || len(ms) != 1 {
			t.Fatalf("receive %s: %v", id, err)
		}
		reason := "SqlTimeout"
		if err := r.DeadLetterMessage(ctx, ms[0], &azservicebus.DeadLetterOptions{Reason: &reason}); err != nil {
			t.Fatal(err)
		}
	}
	deadLetter("s-1", "please gift wrap order 1", "contoso")
	deadLetter("s-2", `<script>window.__xss=1;alert(1)</script> a Gift for you`, "contoso")
	deadLetter("s-3", "nothing to see here", "fabrikam")
	deadLetter("s-4", "gifted? no: a gif, not the word", "fabrikam")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := filepath.Join(t.TempDir(), "catalog.db")
	srv := start(t, []string{"serve", "--addr", addr, "--db", db, "--admin-endpoint", "http://" + adminAddr}, env(envConnectionString, conn))
	defer srv.stop(t)
	base := "http://" + addr

	b, dialogs := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(b, 30*time.Second)
		defer tcancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	texts := func(sel string) []string {
		t.Helper()
		var out []string
		run("read "+sel, chromedp.Evaluate(`Array.from(document.querySelectorAll(`+jsString(sel)+`)).map(e => e.textContent)`, &out))
		return out
	}
	noXSS := func(where string) {
		t.Helper()
		var ran bool
		run("check for XSS", chromedp.Evaluate(`window.__xss === 1`, &ran))
		if ran || dialogs.Load() > 0 {
			t.Fatalf("%s: an XSS payload ran", where)
		}
	}

	// Every message catalogued first (the list is live, but the count
	// and the picker are read once).
	run("the catalog", chromedp.Navigate(base+"/messages?entity=queue.1"),
		chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 4`, nil, chromedp.WithPollingInterval(100*time.Millisecond)))

	// The search: two rows, the word marked in each preview, counted
	// exactly.
	run("search", chromedp.Navigate(base+"/messages?q=gift"),
		chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 2`, nil),
		chromedp.Poll(`document.querySelector('[data-testid="matching-count"]').textContent.trim() === "2"`, nil))
	if got := texts(`[data-testid="preview"] mark`); strings.Join(got, ",") != "Gift,gift" {
		t.Errorf("the previews mark %q, want Gift and gift", got)
	}
	var matching string
	run("the count", liveText(`[data-testid="matching"]`, &matching))
	if !strings.Contains(matching, "2 messages match") {
		t.Errorf("the count says %q", matching)
	}
	noXSS("search list")

	// The message's page, from the row with the script: the body marks the
	// word and shows the script as text.
	run("open the message", chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="message-row"]')).find(r => r.textContent.includes("script")).querySelector('[data-testid="message-link"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="body-text"]`))
	var loc string
	run("where", chromedp.Evaluate(`location.pathname + location.search`, &loc))
	if u, err := url.Parse(loc); err != nil || u.Query().Get("q") != "gift" {
		t.Errorf("the row links to %s, want the search along", loc)
	}
	if got := texts(`#body-text mark`); strings.Join(got, ",") != "Gift" {
		t.Errorf("the body marks %q, want Gift", got)
	}
	var body string
	run("the body", liveText(`#body-text`, &body))
	if !strings.Contains(body, "<script>window.__xss=1;alert(1)</script> a Gift for you") {
		t.Errorf("the body is not shown as its text: %q", body)
	}
	noXSS("message page")

	// The property picker: the listed messages' keys, a key's values, and
	// a property filter chip.
	run("the picker", chromedp.Navigate(base+"/messages?entity=queue.1"),
		chromedp.Poll(`(() => { const p = document.querySelector('[data-testid="property-picker"]'); return p && !p.hidden && document.querySelectorAll('#property-key option').length > 1 })()`, nil))
	// The broker's own dead-letter properties (DeadLetterReason, …) are
	// application properties too.
	keys := texts(`#property-key option`)
	if keys[0] != "Property…" || !slices.Contains(keys, "region (4)") || !slices.Contains(keys, "tenant (4)") {
		t.Errorf("the keys offered: %q", keys)
	}
	run("choose tenant", chromedp.Evaluate(`(() => { const s = document.querySelector('#property-key'); s.value = 'tenant'; s.dispatchEvent(new Event('change')) })()`, nil),
		chromedp.Poll(`document.querySelectorAll('#property-values option').length === 2`, nil))
	var values []string
	run("the values", chromedp.Evaluate(`Array.from(document.querySelectorAll('#property-values option')).map(o => o.value)`, &values))
	if strings.Join(values, ",") != "contoso,fabrikam" {
		t.Errorf("tenant's values offered: %q", values)
	}
	// The click navigates: it runs after the script's turn, and the new
	// page is awaited by retries (the execution context is replaced
	// mid-way).
	run("add the filter", chromedp.Evaluate(`(() => { const v = document.querySelector('#property-value'); v.value = 'fabrikam'; v.dispatchEvent(new Event('input')); setTimeout(() => document.querySelector('#property-add').click(), 0) })()`, nil))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var landed bool
		err := chromedp.Run(b, chromedp.Evaluate(`new URLSearchParams(location.search).get("property") === "tenant=fabrikam" && document.readyState === "complete" && document.querySelectorAll('[data-testid="message-row"]').length === 2`, &landed))
		if err == nil && landed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the list with the property filter never loaded (last error: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	chips := texts(`[data-testid="filter-chip"] .chip-text`)
	if strings.Join(chips, ",") != "Entity: queue.1,Property: tenant=fabrikam" {
		t.Errorf("chips %q", chips)
	}
	noXSS("end")
}
