package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's Chromium. Without it the browser test is
// skipped, except in CI, where .ci/run installs it and a skip would hide a
// missing install step.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it with apt-get")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipping the browser test")
	return ""
}

// browser starts headless Chromium for the test, with the flags this
// machine needs, and fails the test on any JavaScript dialog (an XSS
// payload's alert would open one).
func browser(t *testing.T, exe string) (context.Context, *atomic.Int32) {
	t.Helper()
	// Not t.TempDir: Chromium's helpers may still be writing to the
	// profile when the test's directories are removed.
	profile, err := os.MkdirTemp("", "dlqdash-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeProfile(t, profile) })
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	var dialogs atomic.Int32
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Run(ctx, page.HandleJavaScriptDialog(false))
			t.Errorf("a JavaScript dialog opened: %q", e.Message)
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, &dialogs
}

// removeProfile removes Chromium's profile directory. Its helpers can
// write one more file (Default/Network Persistent State) just after the
// browser has gone, which made a single RemoveAll leave the directory
// behind in the temporary directory on most runs: it tries again until
// the directory stays gone.
func removeProfile(t *testing.T, dir string) {
	for range 20 {
		err := os.RemoveAll(dir)
		time.Sleep(100 * time.Millisecond)
		if _, serr := os.Stat(dir); err == nil && errors.Is(serr, fs.ErrNotExist) {
			return
		}
	}
	t.Logf("Chromium's profile %s is still there after 2 s; left behind", dir)
}

// TestBrowserTriage drives the real program in Chromium: dlqdash emulator,
// dlqdash serve against it, and the journey of issue 8.
func TestBrowserTriage(t *testing.T) {
	exe := chromiumPath(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	conn, adminAddr := startTestEmulator(t, "")

	client := testClient(t, conn)
	deadLetter := func(id, body, reason, desc string) {
		t.Helper()
		s, err := client.NewSender("queue.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(body), ContentType: ptr("application/json")}, nil); err != nil {
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
		if err := r.DeadLetterMessage(ctx, ms[0], &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
			t.Fatal(err)
		}
	}
	xss := `<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=1;alert(2)</script>`
	deadLetter("order-1", `{"order":1,"sku":"A-1","note":"gift wrap"}`, "SqlTimeout", "Timeout after 30012 ms")
	deadLetter("order-2", `{"order":2,"sku":"B-2","note":"`+strings.ReplaceAll(xss, `"`, `\"`)+`"}`, "SqlTimeout", "Timeout after 29987 ms")
	deadLetter("order-3", `{"order":3,"sku":"C-3","note":"zanzibar"}`, xss, xss)

	// A fixed port, so that serve can stop and start again at the same
	// address (the dropped connection at the end).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := filepath.Join(t.TempDir(), "catalog.db")
	// The default poll (1 s): the live latency logged below is what users get.
	serveArgs := []string{"serve", "--addr", addr, "--db", db, "--admin-endpoint", "http://" + adminAddr}
	srv := start(t, serveArgs, env(envConnectionString, conn))
	stopped := false
	defer func() {
		if !stopped {
			srv.stop(t)
		}
	}()
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
	rows := func() int {
		var n int
		run("count rows", chromedp.Evaluate(`document.querySelectorAll('[data-testid="message-row"]').length`, &n))
		return n
	}
	noXSS := func(where string) {
		t.Helper()
		var ran bool
		run("check for XSS", chromedp.Evaluate(`window.__xss === 1`, &ran))
		if ran || dialogs.Load() > 0 {
			t.Fatalf("%s: an XSS payload ran", where)
		}
	}

	// The overview: the entity's count, live.
	var deadLetters string
	run("overview", chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`[data-testid="entity-row"][data-entity="queue.1"]`),
		chromedp.Poll(`document.querySelector('[data-testid="dead-letter-total"]').textContent.trim() === "3"`, nil),
		liveText(`[data-testid="dead-letter-total"]`, &deadLetters))
	noXSS("overview")

	// Drill into the failure group and a message. Clicks are script clicks:
	// the live script may refetch a page (a resync) at any moment, and a
	// step-by-step click would hold a node it replaced.
	run("open the group", chromedp.Evaluate(`document.querySelector('a[href^="/messages?group="]').click()`, nil), chromedp.WaitVisible(`[data-testid="message-row"]`))
	if n := rows(); n != 2 {
		t.Errorf("the SqlTimeout group lists %d messages, want 2", n)
	}
	var body string
	run("open a message", chromedp.Evaluate(`document.querySelector('[data-testid="message-row"] [data-testid="message-link"]').click()`, nil),
		chromedp.WaitVisible(`[data-testid="body"]`), liveText(`[data-testid="body"]`, &body))
	if !strings.Contains(body, `"order"`) {
		t.Errorf("message body = %q, want the JSON", body)
	}
	noXSS("message detail")

	// The XSS message: reason and body show as text.
	run("the XSS message", chromedp.Navigate(base+"/messages?q=zanzibar"), chromedp.WaitVisible(`[data-testid="message-row"]`),
		chromedp.Evaluate(`document.querySelector('[data-testid="message-row"] [data-testid="message-link"]').click()`, nil), chromedp.WaitVisible(`[data-testid="body"]`))
	var text string
	run("read the page", liveText(`main`, &text))
	if !strings.Contains(text, "<script>window.__xss=1;alert(2)</script>") {
		t.Errorf("the XSS payload is not shown as text:\n%s", text)
	}
	noXSS("XSS message")

	// Search for a word in a body.
	run("search", chromedp.Navigate(base+"/messages"), chromedp.WaitVisible(`input[name="q"]`),
		chromedp.Evaluate(`window.__unsearched = 1`, nil),
		chromedp.SendKeys(`input[name="q"]`, "gift\n"))
	// The unfiltered list stays on screen until the form's navigation
	// lands: wait for the searched page (a fresh window), not for any row.
	// The page's execution context is replaced mid-way, so a failed
	// evaluation during the switch is retried, not fatal.
	searched := time.Now().Add(30 * time.Second)
	for {
		var landed bool
		err := chromedp.Run(b, chromedp.Evaluate(`window.__unsearched === undefined && new URLSearchParams(location.search).get("q") === "gift" && document.readyState === "complete"`, &landed))
		if err == nil && landed {
			break
		}
		if time.Now().After(searched) {
			t.Fatalf("the search page never loaded (last error: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run("the search results", chromedp.WaitVisible(`[data-testid="message-row"]`))
	if n := rows(); n != 1 {
		t.Errorf("search for gift found %d rows, want 1", n)
	}

	// Readable at 390 px: no page is wider than a phone's screen (wide
	// tables scroll inside their own box).
	var msgID string
	run("a message id", chromedp.Navigate(base+"/messages"), chromedp.WaitVisible(`[data-testid="message-link"]`),
		chromedp.AttributeValue(`[data-testid="message-link"]`, "href", &msgID, nil))
	run("a phone's width", chromedp.EmulateViewport(390, 800))
	for _, path := range []string{"/", "/groups", "/messages", msgID, "/inventory"} {
		var wide bool
		run("390 px "+path, chromedp.Navigate(base+path), chromedp.WaitReady(`#main`),
			chromedp.Evaluate(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &wide))
		if wide {
			t.Errorf("%s scrolls sideways at 390 px", path)
		}
	}
	run("a desktop's width", chromedp.EmulateViewport(1280, 900))

	// Live: a new dead letter appears on the open list without a reload.
	// A marker on the window: a reload would lose it.
	run("the list", chromedp.Navigate(base+"/messages?entity=queue.1"), chromedp.WaitVisible(`[data-testid="live-status"]`),
		chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 3`, nil),
		chromedp.Evaluate(`window.__noReload = 1`, nil))
	var latencies []time.Duration
	for i := range 10 {
		before := time.Now()
		deadLetter(fmt.Sprintf("live-%d", i), `{"live":true}`, "LiveTest", "arrived live")
		run("the live row", chromedp.Poll(fmt.Sprintf(`document.querySelectorAll('[data-testid="message-row"]').length === %d`, 4+i), nil,
			chromedp.WithPollingInterval(20*time.Millisecond)))
		latencies = append(latencies, time.Since(before))
	}
	slices.Sort(latencies)
	t.Logf("dead-lettered → row in the browser: min %s, median %s, max %s (poll 1s)", latencies[0], latencies[len(latencies)/2], latencies[len(latencies)-1])
	if worst := latencies[len(latencies)-1]; worst > 3*time.Second {
		t.Errorf("a new dead letter took %s to appear, want about a second", worst)
	}
	var kept bool
	run("no reload happened", chromedp.Evaluate(`window.__noReload === 1`, &kept))
	if !kept {
		t.Error("the page reloaded to show the new rows")
	}

	// A dropped connection: serve stops and starts again at the same
	// address; the page reconnects, catches up and keeps updating.
	srv.stop(t)
	stopped = true
	run("the page notices", chromedp.Poll(`document.querySelector('[data-testid="live-status"]').textContent.toLowerCase().includes("reconnect")`, nil))
	deadLetter("while-down", `{"while":"down"}`, "LiveTest", "arrived while the dashboard was down")
	srv = start(t, serveArgs, env(envConnectionString, conn))
	stopped = false
	run("caught up after reconnecting", chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 14`, nil,
		chromedp.WithPollingInterval(50*time.Millisecond)))
	deadLetter("after", `{"after":"reconnect"}`, "LiveTest", "arrived after the reconnect")
	run("live again", chromedp.Poll(`document.querySelectorAll('[data-testid="message-row"]').length === 15`, nil))
	run("still the same page", chromedp.Evaluate(`window.__noReload === 1`, &kept))
	if !kept {
		t.Error("the page reloaded instead of catching up")
	}
	noXSS("end")
}

// liveText reads the visible text (innerText, as chromedp.Text) of the first node matching sel in one script
// turn, waiting until there is one. chromedp.Text finds the node, then
// asks for its text in a second round trip; on a page the live script
// re-renders (a resync replaces whole sections) the node can be gone in
// between ("No node with given id found"). One turn cannot race that.
func liveText(sel string, out *string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText : null })()`, sel)
		for {
			var got *string
			if err := chromedp.Evaluate(js, &got).Do(ctx); err != nil {
				return err
			}
			if got != nil {
				*out = *got
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("no %s on the page: %w", sel, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// testClient is the SDK's client of the test's emulator, closed when the
// test ends.
func testClient(t *testing.T, conn string) *azservicebus.Client {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	return client
}
