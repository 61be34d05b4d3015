package web

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A wake-up from another replica (HubConfig.Remote) makes every open page
// refetch, since the hub cannot know what changed, except a failure
// group's page, which fetches its live parts only (recount: its triage
// form keeps what is being typed in it); a burst of wake-ups costs one
// refetch per RemoteEvery, not one each.
func TestLiveRemoteWakeResyncsEveryPage(t *testing.T) {
	remote := make(chan struct{}, 1)
	// every is long enough that the burst below (20 wake-ups 5 ms apart)
	// falls within one interval even on a loaded machine under -race, where
	// 300 ms was not (CI: a second, legitimate resync for the wake-ups that
	// came after the first interval).
	const every = time.Second
	fx := newLiveFixture(t, HubConfig{Remote: remote, RemoteEvery: every})
	fx.deadLetter(t, "orders", "SqlTimeout", false)
	pages := []*websocket.Conn{fx.dial(t, "page=overview"), fx.dial(t, "page=messages&entity=orders"), fx.dial(t, "page=groups")}
	group := fx.dial(t, "page=group&key="+groupKey(t, fx, "SqlTimeout"))
	remote <- struct{}{}
	for _, c := range pages {
		if op := next(t, c); op.Op != "resync" {
			t.Fatalf("after a remote wake-up: %+v, want resync", op)
		}
	}
	if op := next(t, group); op.Op != "recount" || op.ID != "group" {
		t.Fatalf("a group's page after a remote wake-up: %+v, want a recount of the group, not a refetch of its form", op)
	}
	// A burst of wake-ups within one interval: one more resync, after it.
	sent := time.Now()
	for range 20 {
		select {
		case remote <- struct{}{}:
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	burst := time.Since(sent)
	if op := next(t, pages[0]); op.Op != "resync" {
		t.Fatalf("after a burst: %+v, want resync", op)
	}
	got := time.Since(sent)
	pages[0].SetReadDeadline(time.Now().Add(2 * every))
	// Wake-ups that came after the first interval rightly cost one more
	// resync (one per interval); a burst within one interval, one only.
	if _, b, err := pages[0].ReadMessage(); err == nil && burst < every {
		t.Errorf("a second frame %s after one burst of wake-ups (the burst lasted %s)", b, burst)
	}
	if got > 5*every {
		t.Errorf("the burst's resync came %s later, want within %s", got, 5*every)
	}
}
