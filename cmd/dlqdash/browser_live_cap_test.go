package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserLiveCapShowsTheReason: over the cap on live pages, a page's
// socket is refused and the page's status line says why (static/live.js
// shows the close frame's reason); the page itself still works.
func TestBrowserLiveCapShowsTheReason(t *testing.T) {
	exe := chromiumPath(t)
	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "cap.db"),
		"--max-live-connections", "1", "--max-live-connections-per-actor", "1"}, env(envConnectionString, goodConnStr))
	defer s.stop(t)
	ctx, _ := browser(t, exe)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	url := "http://" + s.addr + "/"
	if err := chromedp.Run(ctx, chromedp.Navigate(url),
		chromedp.WaitVisible(`[data-testid=live-status][data-state=live]`, chromedp.ByQuery)); err != nil {
		t.Fatalf("first page never went live: %v", err)
	}
	second, cancel2 := chromedp.NewContext(ctx) // another tab
	defer cancel2()
	var status string
	if err := chromedp.Run(second, chromedp.Navigate(url),
		chromedp.WaitVisible(`[data-testid=live-status][data-state=refused]`, chromedp.ByQuery),
		liveText(`[data-testid=live-status]`, &status)); err != nil {
		t.Fatalf("second page: %v", err)
	}
	if !strings.Contains(status, "live pages open") {
		t.Errorf("the refused page says %q, want the server's reason", status)
	}
	var title string
	if err := chromedp.Run(second, liveText(`h1`, &title)); err != nil || title == "" {
		t.Errorf("the refused page does not render: %q %v", title, err)
	}
}
