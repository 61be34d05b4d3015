package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
)

// TestBrowserStableList drives dlqdash serve against dlqdash emulator in
// Chromium at 1280 and 390 px (issue 19's stable lists): with no selection
// and the page at its top a new dead letter is inserted live; with a row
// ticked (or the page scrolled down) arriving dead letters do not move the
// rows, a bar says "1 new message", "2 new messages", and clicking it puts
// them in; the list's count follows live either way; and a dead letter that
// expired (enqueued before the rows above it) goes where the list's order,
// newest first by enqueued time, puts it, not at the top. The group page
// shows the group's chart with its range switch.
func TestBrowserStableList(t *testing.T) {
	exe := chromiumPath(t)
	dir := t.TempDir()
	emuCfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(emuCfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"ns","Queues":[
		{"Name":"orders"},
		{"Name":"expiring","Properties":{"DeadLetteringOnMessageExpiration":true}}]}],"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, admin := startTestEmulator(t, emuCfg)
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(context.Background())
	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close(context.Background())
	total := 0 // dead letters sent so far: the list's count
	deadLetter := func(n int, reason string) {
		t.Helper()
		for i := range n {
			body := fmt.Sprintf(`{"n":%d,"reason":%q}`, total+i, reason)
			if err := sender.SendMessage(t.Context(), &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		deadLetterFrom(t, receiver, n, reason, "")
		total += n
	}
	deadLetter(12, "Seed")

	srv := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "catalog.db"),
		"--admin-endpoint", "http://" + admin, "--poll", "200ms"}, env(envConnectionString, conn))
	defer srv.stop(t)
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
	rowIDs := func() []string {
		t.Helper()
		var ids []string
		run("the rows", chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="message-row"]')).map(r => r.id)`, &ids))
		return ids
	}
	// bar is the new-rows bar's words, "" while it is hidden.
	bar := func() string {
		t.Helper()
		var s string
		run("the bar", chromedp.Evaluate(`(() => { const b = document.querySelector('[data-testid="new-rows"]'); return b && !b.hidden ? b.textContent : "" })()`, &s))
		return s
	}
	countIs := func(what string, n int) {
		t.Helper()
		run(what, chromedp.Poll(fmt.Sprintf(`(() => { const c = document.querySelector('[data-testid="matching-count"]'); return !!c && c.textContent.trim() === %q })()`, strconv.Itoa(n)), nil,
			chromedp.WithPollingTimeout(15*time.Second)))
	}
	rowsAre := func(what string, n int) {
		t.Helper()
		run(what, chromedp.Poll(fmt.Sprintf(`document.querySelectorAll('[data-testid="message-row"]').length === %d`, n), nil,
			chromedp.WithPollingTimeout(15*time.Second)))
	}
	barSays := func(words string) {
		t.Helper()
		// The words, on their own ("1 new message", not "11 new messages").
		re := `(^|\s)` + regexp.QuoteMeta(words) + `$`
		run("the bar says "+words, chromedp.Poll(fmt.Sprintf(`(() => { const b = document.querySelector('[data-testid="new-rows"]'); return !!b && !b.hidden && new RegExp(%q).test(b.textContent) })()`, re), nil,
			chromedp.WithPollingTimeout(15*time.Second)))
	}
	// sorted: every row is newer than the next (enqueued time, then id).
	sorted := func() bool {
		t.Helper()
		var ok bool
		run("the order", chromedp.Evaluate(`(() => {
			const k = Array.from(document.querySelectorAll('[data-testid="message-row"]')).map(r => [Number(r.dataset.sort), Number(r.dataset.id)]);
			return k.every((a, i) => i === 0 || a[0] < k[i-1][0] || (a[0] === k[i-1][0] && a[1] < k[i-1][1]));
		})()`, &ok))
		return ok
	}
	open := func(width, height int64) {
		t.Helper()
		run(fmt.Sprintf("the list at %d px", width), chromedp.EmulateViewport(width, height),
			chromedp.Navigate(base+"/messages?subqueue=dead_letter"),
			chromedp.WaitVisible(`[data-testid="live-status"][data-state="live"]`, chromedp.ByQuery))
		rowsAre("the rows", total)
		countIs("the count", total)
		// The first connection may refetch the page (a change between its
		// request and the socket): let that land before ticking anything.
		run("settle", chromedp.Sleep(time.Second), chromedp.Evaluate(`window.__noReload = 1`, nil))
	}

	for _, width := range []int64{1280, 390} {
		t.Logf("%d px", width)
		open(width, 900)

		// No selection, at the top: a new dead letter goes in live, at
		// the top (it is the newest), and the count follows.
		before := rowIDs()
		deadLetter(1, "Live")
		rowsAre("the live row", total)
		if got := rowIDs(); got[0] == before[0] || !slices.Equal(got[1:], before) {
			t.Errorf("%d px: without a selection the new row did not go in at the top: %v → %v", width, before, got)
		}
		if s := bar(); s != "" {
			t.Errorf("%d px: the bar shows %q with nothing held", width, s)
		}
		countIs("the count after a live row", total)

		// A row ticked: new dead letters wait behind the bar.
		run("tick a row", chromedp.Evaluate(`document.querySelectorAll('[data-testid="select-row"]')[1].click()`, nil))
		before = rowIDs()
		deadLetter(1, "Held")
		barSays("1 new message")
		deadLetter(1, "Held")
		barSays("2 new messages")
		countIs("the count while rows wait", total)
		if got := rowIDs(); !slices.Equal(got, before) {
			t.Errorf("%d px: with a row ticked the rows moved: %v → %v", width, before, got)
		}
		var ticked string
		run("the ticked row", chromedp.Evaluate(`document.querySelector('[data-testid="select-row"]:checked').closest('tr').id`, &ticked))
		if ticked != before[1] {
			t.Errorf("%d px: the ticked row is %s, want %s", width, ticked, before[1])
		}
		run("show them", chromedp.Evaluate(`document.querySelector('[data-testid="new-rows"]').click()`, nil))
		rowsAre("the waiting rows", total)
		got := rowIDs()
		if !slices.Equal(got[2:], before) {
			t.Errorf("%d px: the bar did not put the two new rows on top: %v → %v", width, before, got)
		}
		if s := bar(); s != "" {
			t.Errorf("%d px: the bar still shows %q", width, s)
		}
		var still bool
		run("still ticked", chromedp.Evaluate(`document.getElementById(`+strconv.Quote(before[1])+`).querySelector('[data-testid="select-row"]').checked && window.__noReload === 1`, &still))
		if !still {
			t.Errorf("%d px: the ticked row lost its tick, or the page reloaded", width)
		}
		run("untick", chromedp.Evaluate(`document.querySelector('[data-testid="select-row"]:checked').click()`, nil))

		// "Select all matching" holds them too.
		run("select all matching", chromedp.Evaluate(`document.querySelector('[data-testid="select-matching"]').click()`, nil))
		before = rowIDs()
		deadLetter(1, "Held")
		barSays("1 new message")
		countIs("the count with every match selected", total)
		if got := rowIDs(); !slices.Equal(got, before) {
			t.Errorf("%d px: with every match selected the rows moved: %v → %v", width, before, got)
		}
		run("show it", chromedp.Evaluate(`document.querySelector('[data-testid="new-rows"]').click()`, nil))
		rowsAre("the waiting row", total)
		run("unselect", chromedp.Evaluate(`document.querySelector('[data-testid="select-matching"]').click()`, nil))
		if !sorted() {
			t.Errorf("%d px: the rows are out of order", width)
		}
	}

	// At 390 px the page scrolled down holds new rows too; the bar stays
	// in view, and clicking it brings the new row into view.
	open(390, 600)
	var y float64
	run("scroll down", chromedp.Evaluate(`window.scrollTo(0, document.documentElement.scrollHeight); window.scrollY`, &y))
	if y <= 2 {
		t.Fatalf("the list does not scroll at 390x600 (scrollY %v)", y)
	}
	before := rowIDs()
	deadLetter(1, "Scrolled")
	barSays("1 new message")
	countIs("the count while scrolled", total)
	if got := rowIDs(); !slices.Equal(got, before) {
		t.Errorf("scrolled down, the rows moved: %v → %v", before, got)
	}
	var inView bool
	run("the bar in view", chromedp.Evaluate(`(() => { const r = document.querySelector('[data-testid="new-rows"]').getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0 })()`, &inView))
	if !inView {
		t.Error("scrolled down, the bar is out of view")
	}
	run("show it", chromedp.Evaluate(`document.querySelector('[data-testid="new-rows"]').click()`, nil))
	rowsAre("the new row", total)
	got := rowIDs()
	run("the new row in view", chromedp.Evaluate(`(() => { const r = document.getElementById(`+strconv.Quote(got[0])+`).getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight })()`, &inView))
	if !slices.Equal(got[1:], before) || !inView {
		t.Errorf("the bar's row: %v → %v, in view %v", before, got, inView)
	}

	// An expired dead letter is enqueued before the rows above it: at the
	// top of the page with no selection it is inserted live, below them.
	open(1280, 900)
	exp, err := client.NewSender("expiring", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close(context.Background())
	ttl := time.Second
	if err := exp.SendMessage(t.Context(), &azservicebus.Message{Body: []byte(`{"expires":true}`), TimeToLive: &ttl}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // enqueued in an earlier millisecond than the next two
	deadLetter(2, "AfterTheExpiring")
	rowsAre("the rows after the expiring message", total)
	time.Sleep(1500 * time.Millisecond)
	// A receive attempt makes the emulator expire it (dead-lettering it).
	er, err := client.NewReceiverForQueue("expiring", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close(context.Background())
	rctx, rcancel := context.WithTimeout(t.Context(), 2*time.Second)
	if ms, _ := er.ReceiveMessages(rctx, 1, nil); len(ms) != 0 {
		t.Fatalf("the expiring message was received, not expired")
	}
	rcancel()
	total++
	rowsAre("the expired dead letter", total)
	var reasons []string
	run("the reasons", chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="message-row"] [data-testid="reason"]')).map(r => r.textContent)`, &reasons))
	at := slices.Index(reasons, "TTLExpiredException")
	if at < 2 || !sorted() {
		t.Errorf("the expired dead letter is row %d of %v (want below the two sent after it), in order %v", at, reasons, sorted())
	}
	countIs("the count after the expired one", total)

	// The list of one entity: its chart's count follows live too.
	orders := total - 1 // every dead letter but the expired one
	run("the entity's list", chromedp.Navigate(base+"/messages?entity=orders"),
		chromedp.WaitVisible(`[data-testid="live-status"][data-state="live"]`, chromedp.ByQuery))
	chartSays := func(n int) {
		t.Helper()
		run(fmt.Sprintf("the chart counts %d", n), chromedp.Poll(fmt.Sprintf(`(() => { const c = document.querySelector('[data-testid="dl-chart-total"]'); return !!c && c.textContent.startsWith(%q) })()`, strconv.Itoa(n)+" dead letters"), nil,
			chromedp.WithPollingTimeout(15*time.Second)))
	}
	chartSays(orders)
	deadLetter(1, "Charted")
	chartSays(orders + 1)
	countIs("the entity's count", orders+1)

	// The group page shows the group's chart with its range switch, at
	// both widths, without scrolling sideways.
	var group string
	run("a group", chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(`[data-testid="group-row"]`, chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('a[href^="/groups/"]')).map(a => a.getAttribute('href')).find(h => h.length > 8)`, &group))
	for _, width := range []int64{1280, 390} {
		var chart []float64
		run(fmt.Sprintf("the group page at %d px", width), chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+group),
			chromedp.WaitVisible(`[data-testid="dead-letter-chart"]`, chromedp.ByQuery),
			chromedp.Evaluate(`[document.querySelectorAll('[data-testid="chart-bar"]').length,
				Array.from(document.querySelectorAll('[data-testid="chart-bar"]')).reduce((n, b) => n + Number(b.dataset.count), 0),
				document.documentElement.scrollWidth - window.innerWidth]`, &chart))
		if len(chart) != 3 || chart[0] != 48 || chart[1] < 1 || chart[2] > 0 {
			t.Errorf("%d px: the group page's chart (bars, dead letters, sideways scroll) = %v, want 48 bars with the group's dead letters, no sideways scroll", width, chart)
		}
		var loc string
		run("the 7 d range", chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="chart-range"]')).find(a => a.textContent.trim() === '7 d').click()`, nil))
		// The click navigates: an evaluation during the switch of pages
		// fails and is tried again.
		landed := time.Now().Add(15 * time.Second)
		for {
			var ok bool
			err := chromedp.Run(b, chromedp.Evaluate(`new URLSearchParams(location.search).get('chart') === '7d' && document.readyState === 'complete' && document.querySelectorAll('[data-testid="chart-bar"]').length === 56`, &ok))
			if err == nil && ok {
				break
			}
			if time.Now().After(landed) {
				t.Fatalf("%d px: the 7 d chart never showed (last error: %v)", width, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		run("where", chromedp.Location(&loc))
		if want := base + group + "?chart=7d"; loc != want {
			t.Errorf("%d px: the 7 d range led to %s, want %s", width, loc, want)
		}
	}

	// The group page follows its group live: a new dead letter of it
	// changes its count and its chart, and leaves the triage form (notes
	// being written) as it is.
	run("the group page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+group),
		chromedp.WaitVisible(`[data-testid="live-status"][data-state="live"]`, chromedp.ByQuery), chromedp.Sleep(time.Second))
	var reason, counted string
	run("the group's reason", liveText(`[data-testid="group-reason"]`, &reason), liveText(`[data-testid="group-count"]`, &counted))
	var present int
	if _, err := fmt.Sscanf(counted, "%d present", &present); err != nil {
		t.Fatalf("the group's count reads %q", counted)
	}
	run("write notes", chromedp.Evaluate(`document.querySelector('[data-testid="group-notes-input"]').value = "half-written note"`, nil))
	deadLetter(1, reason)
	run("the group's count, live", chromedp.Poll(fmt.Sprintf(`(() => { const c = document.querySelector('[data-testid="group-count"]'); return !!c && c.textContent.trim().startsWith(%q) })()`, fmt.Sprintf("%d present", present+1)), nil,
		chromedp.WithPollingTimeout(15*time.Second)))
	chartSays(present + 1)
	var notes string
	run("the notes", chromedp.Evaluate(`document.querySelector('[data-testid="group-notes-input"]').value`, &notes))
	if notes != "half-written note" {
		t.Errorf("the group's live update lost the notes being written: %q", notes)
	}
	// Resolved elsewhere (the API), then a new dead letter: the page
	// says, live, that the group is new again.
	req, err := http.NewRequestWithContext(t.Context(), "PATCH", base+"/api/v1"+group, strings.NewReader(`{"status":"resolved"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("resolve the group: %d", res.StatusCode)
	}
	run("resolved, live", chromedp.Poll(`(() => { const b = document.querySelector('#group-summary'); return !!b && b.textContent.includes('resolved') })()`, nil,
		chromedp.WithPollingTimeout(15*time.Second)))
	deadLetter(1, reason)
	run("new again, live", chromedp.Poll(`!!document.querySelector('[data-testid="group-reopened"]')`, nil,
		chromedp.WithPollingTimeout(15*time.Second)))
	if dialogs.Load() > 0 {
		t.Error("a dialog opened")
	}
}
