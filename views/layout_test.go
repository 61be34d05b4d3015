package views

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
)

func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Each active filter is a chip whose link is the list without it (and on
// its first page); the folded filters say how many of them are set.
func TestFilterChips(t *testing.T) {
	l := MessageList{Filter: MessageFilter{Entity: "orders", Reason: "Sql Timeout", Query: "gift", Since: "2026-11-22T10:00:00",
		Properties: []string{"tenant=contoso"}, IncludeGone: true}}
	want := []filterChip{
		{"entity", "Entity: orders", "/messages?include_gone=true&property=tenant%3Dcontoso&q=gift&reason=Sql+Timeout&since=2026-11-22T10%3A00%3A00"},
		{"reason", "Reason: Sql Timeout", "/messages?entity=orders&include_gone=true&property=tenant%3Dcontoso&q=gift&since=2026-11-22T10%3A00%3A00"},
		{"since", "From 2026-11-22 10:00:00 UTC", "/messages?entity=orders&include_gone=true&property=tenant%3Dcontoso&q=gift&reason=Sql+Timeout"},
		{"property", "Property: tenant=contoso", "/messages?entity=orders&include_gone=true&q=gift&reason=Sql+Timeout&since=2026-11-22T10%3A00%3A00"},
		{"q", "Search: gift", "/messages?entity=orders&include_gone=true&property=tenant%3Dcontoso&reason=Sql+Timeout&since=2026-11-22T10%3A00%3A00"},
		{"include_gone", "Including messages gone from the broker", "/messages?entity=orders&property=tenant%3Dcontoso&q=gift&reason=Sql+Timeout&since=2026-11-22T10%3A00%3A00"},
	}
	got := l.chips()
	if len(got) != len(want) {
		t.Fatalf("chips %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("chip %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := l.moreFiltersLabel(); s != "More filters (5 set)" {
		t.Errorf("summary %q (the search box is not folded)", s)
	}
	one := MessageList{Filter: MessageFilter{State: "deferred"}}
	if c := one.chips(); len(c) != 1 || c[0].RemoveURL != "/messages" {
		t.Errorf("the last chip leads to %+v, want the unfiltered list", c)
	}
	html := render(t, MessagesPage(MessageList{Filter: MessageFilter{Entity: `<b>x</b>`}, Replay: true}))
	for _, w := range []string{`data-testid="filter-chip" data-field="entity"`, `aria-label="Remove the filter Entity: &lt;b&gt;x&lt;/b&gt;"`,
		`data-testid="filter-clear"`, "More filters (1 set)", `id="selection-hint"`} {
		if !strings.Contains(html, w) {
			t.Errorf("the list lacks %s", w)
		}
	}
	if strings.Contains(render(t, MessagesPage(MessageList{})), `data-testid="filter-chips"`) {
		t.Error("chips without a filter")
	}
}

// The message page: its actions come before everything but the title (and
// a gone notice); one count of replays, the table's; a gone notice without
// stray punctuation.
func TestMessagePageActionsFirst(t *testing.T) {
	gone := time.Date(2026, 11, 22, 10, 42, 7, 0, time.UTC)
	d := MessageDetail{Item: MessageItem{ID: 7, Entity: "orders", SequenceNumber: 42, Gone: true}, GoneAt: &gone,
		Replay: true, CanReplay: true, Edit: true, Replays: []ReplayHistory{{JobID: 3, Action: "replay", State: "completed"}}}
	html := render(t, MessagePage(d))
	actions := strings.Index(html, `data-testid="message-actions"`)
	for _, after := range []string{`data-testid="dead-letter"`, `data-testid="body"`, `data-testid="history"`, `data-testid="replays"`} {
		if i := strings.Index(html, after); actions < 0 || i < actions {
			t.Errorf("the actions (at %d) do not come before %s (at %d)", actions, after, i)
		}
	}
	for _, w := range []string{`data-testid="message-replay"`, `data-testid="message-discard"`, `data-testid="edit-replay-open">Edit and replay…</button>`,
		"it left the broker at 2026-11-22 10:42:07 UTC. The catalog", "Replays and discards: 1 job"} {
		if !strings.Contains(html, w) {
			t.Errorf("the page lacks %s", w)
		}
	}
	for _, bad := range []string{"UTC .", "<dt>Replays</dt>", `data-testid="lineage-replays"`} {
		if strings.Contains(html, bad) {
			t.Errorf("the page has %q", bad)
		}
	}
	d.ReplayCount, d.Replays = 2, nil
	html = render(t, MessagePage(d))
	if !strings.Contains(html, "replayed this message&#39;s lineage twice") || strings.Contains(html, "Replays and discards: 0") {
		t.Errorf("a copy's page:\n%s", html)
	}
	// A viewer gets no actions at all.
	if strings.Contains(render(t, MessagePage(MessageDetail{Item: d.Item, Replay: true})), `data-testid="message-actions"`) {
		t.Error("actions for a viewer")
	}
}

// Every page links the favicon and loads the density script in <head>.
func TestLayoutHead(t *testing.T) {
	html := render(t, Layout("x", NavHome))
	head := html[:strings.Index(html, "</head>")]
	for _, w := range []string{`<link rel="icon" type="image/svg+xml" href="/static/favicon.`, `<script src="/static/density.`} {
		if !strings.Contains(head, w) {
			t.Errorf("<head> lacks %s", w)
		}
	}
	if !strings.Contains(html, `<button type="button" id="density-toggle"`) || !strings.Contains(html, ">Compact rows</button>") {
		t.Error("no density toggle")
	}
}
