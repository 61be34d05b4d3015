package views

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The message list carries what static/live.js needs to keep it stable and
// in order: each row's sort key, whether a later page exists, the new-rows
// bar (hidden) for its rows, and the header saying the order.
func TestMessageListStableMarkup(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 42, 7, 123_000_000, time.UTC)
	render := func(l MessageList) string {
		t.Helper()
		var b strings.Builder
		if err := MessagesPage(l).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	l := MessageList{Messages: []MessageItem{
		{ID: 7, Entity: "orders", SubQueue: "dead_letter", State: "active", EnqueuedAt: &at},
		{ID: 8, Entity: "orders", SubQueue: "dead_letter", State: "active"},
	}, NextURL: "/messages?cursor=x"}
	page := render(l)
	for _, want := range []string{
		`data-id="7" class="" data-sort="1795344127123"`, `data-id="8" class="" data-sort="-1"`,
		`data-testid="message-rows" data-more="true"`,
		`data-testid="new-rows" data-list="message-rows" hidden`,
		`aria-sort="descending" data-testid="sort-column">Enqueued (UTC)`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
	l.NextURL = ""
	if page := render(l); !strings.Contains(page, `data-more="false"`) {
		t.Error("the last page says a later page exists")
	}
}
