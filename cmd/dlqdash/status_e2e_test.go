package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// TestServeStatusGoesStaleWhileTheBrokerIsFrozen is issue 15's measurement
// with the real program: `dlqdash serve --poll 200ms` reads the emulator
// through a freezable proxy (a frozen broker as SIGSTOP leaves it: sockets
// open, nothing answers). Within max(3 × poll, 5 s) of the freeze,
// GET /api/v1/status says unhealthy with the error in words and the open
// overview is sent a freshness panel saying the catalog is a snapshot;
// after the thaw both are healthy and live again on their own.
func TestServeStatusGoesStaleWhileTheBrokerIsFrozen(t *testing.T) {
	const poll = 200 * time.Millisecond
	stale := max(3*poll, 5*time.Second)
	emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	emulatortest.FillDLQ(t, emu.Namespace(), "orders", 3, 32, nil)
	fz := emulatortest.StartFreezable(t, emu)
	t.Cleanup(fz.Thaw)

	db := filepath.Join(t.TempDir(), "catalog.db")
	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", poll.String(), "--admin-endpoint", fz.AdminURL()},
		env(envConnectionString, fz.ConnectionString()))
	t.Cleanup(func() { s.cancel(); <-s.done })

	type statusBody struct {
		Healthy    bool    `json:"healthy"`
		Error      *string `json:"error"`
		ErrorSince *string `json:"error_since"`
	}
	status := func() statusBody {
		t.Helper()
		res, err := http.Get("http://" + s.addr + "/api/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var st statusBody
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("status %s: %v", b, err)
		}
		return st
	}
	waitFor(t, "a healthy status", func() bool { return status().Healthy })

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+s.addr+"/live?page=overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	panels := make(chan string, 256)
	go func() {
		defer close(panels)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var op struct{ Op, ID, HTML string }
			if json.Unmarshal(b, &op) == nil && op.Op == "replace" && op.ID == "freshness" {
				select {
				case panels <- op.HTML:
				default:
				}
			}
		}
	}()
	panel := func(what, want string, within time.Duration) time.Duration {
		t.Helper()
		from := time.Now()
		timeout := time.After(within)
		for {
			select {
			case html, ok := <-panels:
				if !ok {
					t.Fatalf("the websocket closed waiting for %s", what)
				}
				if strings.Contains(html, want) {
					return time.Since(from)
				}
			case <-timeout:
				t.Fatalf("no %s panel on the websocket within %v", what, within)
			}
		}
	}

	fz.Freeze()
	frozenAt := time.Now()
	var st statusBody
	waitFor(t, "an unhealthy status", func() bool { st = status(); return !st.Healthy })
	if d := time.Since(frozenAt); d > stale+time.Second {
		t.Errorf("unhealthy %v after the freeze, want within %v", d, stale)
	}
	if st.Error == nil || !strings.HasPrefix(*st.Error, "no successful read from the namespace for ") || st.ErrorSince == nil {
		t.Errorf("status while frozen: error %v, error_since %v", st.Error, st.ErrorSince)
	} else {
		t.Logf("unhealthy %v after the freeze: %q", time.Since(frozenAt).Round(time.Millisecond), *st.Error)
	}
	panel("a snapshot", "Snapshot from", 2*time.Second)
	if d := time.Since(frozenAt); d > stale+2*time.Second {
		t.Errorf("the overview's panel turned %v after the freeze, want within %v", d, stale)
	}

	fz.Thaw()
	thawedAt := time.Now()
	waitFor(t, "a healthy status after the thaw", func() bool { return status().Healthy })
	panel("a live", `data-testid="freshness">Live<`, 10*time.Second)
	t.Logf("healthy and live again %v after the thaw", time.Since(thawedAt).Round(time.Millisecond))
	if st := status(); st.Error != nil || st.ErrorSince != nil {
		t.Errorf("status after the thaw: error %v, error_since %v", st.Error, st.ErrorSince)
	}
}
