package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// TestServeTwoNamespacesOneFrozen is the serve wiring (serveDashboard with
// withCatalog over two namespaces, as runServe builds it) against two
// emulators, each behind a freezable proxy, both with a queue orders. Both
// are cataloged at once and told apart by the API; then eu is frozen (as
// SIGSTOP leaves a broker: sockets open, nothing answers): its status turns
// unhealthy within the stale bound while us stays healthy, and new dead
// letters in us are cataloged as fast as before; after the thaw eu
// recovers on its own.
func TestServeTwoNamespacesOneFrozen(t *testing.T) {
	const poll = 200 * time.Millisecond
	stale := max(3*poll, 5*time.Second)
	type side struct {
		ns *broker.Namespace
		fz *emulatortest.Freezable
	}
	sides := map[string]side{}
	var conns []namespaceConn
	for _, name := range []string{"eu", "us"} {
		emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
		if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
			t.Fatal(err)
		}
		emulatortest.FillDLQ(t, emu.Namespace(), "orders", map[string]int{"eu": 3, "us": 2}[name], 32, nil)
		fz := emulatortest.StartFreezable(t, emu)
		t.Cleanup(fz.Thaw)
		sides[name] = side{emu.Namespace(), fz}
		c, err := openBroker(t.Context(), fz.ConnectionString(), fz.AdminURL(), "", 2*time.Second, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, namespaceConn{Name: name, Client: c})
	}

	db := filepath.Join(t.TempDir(), "catalog.db")
	cfg, err := parseConfig([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", poll.String(),
		"--servicebus-timeout", "2s"}, env(envConnectionString, sides["eu"].fz.ConnectionString()))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serveDashboard(ctx, cfg, logger, dashboard{mode: "serve", namespace: "eu, us", namespaces: []string{"eu", "us"},
			onStore: withCatalog(cfg, catalogNamespaces(conns), logger)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := closeNamespaces(context.Background(), conns); err != nil {
			t.Error(err)
		}
	})
	var addr string
	waitFor(t, "the listening log line", func() bool { addr = listenAddr(logs.String()); return addr != "" })
	base := "http://" + addr

	getJSON := func(path string, v any) {
		t.Helper()
		code, body := get(t, base+path)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	count := func(ns string) int {
		var v struct {
			Messages []struct{ Namespace, Entity string }
		}
		getJSON("/api/v1/messages?limit=500&namespace="+ns, &v)
		for _, m := range v.Messages {
			if m.Namespace != ns || m.Entity != "orders" {
				t.Errorf("a message of %s/%s in namespace %s's list", m.Namespace, m.Entity, ns)
			}
		}
		return len(v.Messages)
	}
	type nsStatus struct {
		Name          string  `json:"name"`
		Healthy       bool    `json:"healthy"`
		LastSuccessAt *string `json:"last_success_at"`
		Error         *string `json:"error"`
	}
	type statusBody struct {
		Healthy    bool       `json:"healthy"`
		Error      *string    `json:"error"`
		Namespaces []nsStatus `json:"namespaces"`
	}
	status := func() (statusBody, map[string]nsStatus) {
		var st statusBody
		getJSON("/api/v1/status", &st)
		by := map[string]nsStatus{}
		for _, n := range st.Namespaces {
			by[n.Name] = n
		}
		return st, by
	}

	waitFor(t, "both namespaces cataloged", func() bool { return count("eu") == 3 && count("us") == 2 })
	waitFor(t, "both healthy", func() bool { st, _ := status(); return st.Healthy })
	var ents struct {
		Entities []struct{ Namespace, Path string }
	}
	getJSON("/api/v1/entities", &ents)
	if fmt.Sprint(ents.Entities) != "[{eu orders} {us orders}]" {
		t.Errorf("entities %v: want orders in eu and in us", ents.Entities)
	}

	// The overview's namespaces panel, live.
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+addr+"/live?page=overview", nil)
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
			if json.Unmarshal(b, &op) == nil && op.Op == "replace" && op.ID == "namespaces" {
				select {
				case panels <- op.HTML:
				default:
				}
			}
		}
	}()
	if home := func() string { _, b := get(t, base+"/"); return b }(); !strings.Contains(home, `data-namespace="eu" data-healthy="true"`) {
		t.Errorf("the overview does not show eu healthy before the freeze")
	}

	sides["eu"].fz.Freeze()
	frozenAt := time.Now()
	var st statusBody
	var by map[string]nsStatus
	waitForWithin(t, stale+5*time.Second, "eu unhealthy", func() bool { st, by = status(); return !by["eu"].Healthy })
	if d := time.Since(frozenAt); d > stale+time.Second {
		t.Errorf("eu unhealthy %v after the freeze, want within %v", d, stale)
	}
	if st.Healthy || st.Error == nil || !by["us"].Healthy || by["us"].Error != nil {
		t.Errorf("while eu is frozen: summary healthy %v error %v; us %+v", st.Healthy, st.Error, by["us"])
	}
	t.Logf("eu unhealthy %v after the freeze: %q", time.Since(frozenAt).Round(time.Millisecond), *by["eu"].Error)
	for seen := false; !seen; {
		select {
		case html, ok := <-panels:
			if !ok {
				t.Fatal("the websocket closed waiting for the namespaces panel")
			}
			seen = strings.Contains(html, `data-namespace="eu" data-healthy="false"`) &&
				strings.Contains(html, `data-namespace="us" data-healthy="true"`)
		case <-time.After(5 * time.Second):
			t.Fatal("no namespaces panel with eu unhealthy and us healthy on the overview's websocket")
		}
	}

	// us stays live: new dead letters are cataloged within a few polls, and
	// its last success keeps moving.
	before := *by["us"].LastSuccessAt
	emulatortest.FillDLQ(t, sides["us"].ns, "orders", 2, 32, nil)
	added := time.Now()
	waitForWithin(t, 5*time.Second, "us's new dead letters while eu is frozen", func() bool { return count("us") == 4 })
	t.Logf("us cataloged 2 new dead letters %v after they arrived, with eu frozen", time.Since(added).Round(time.Millisecond))
	if _, by = status(); !by["us"].Healthy || by["us"].LastSuccessAt == nil || *by["us"].LastSuccessAt <= before {
		t.Errorf("us while eu is frozen: %+v (last success before %s)", by["us"], before)
	}
	if n := count("eu"); n != 3 {
		t.Errorf("eu shows %d messages while frozen, want its snapshot of 3", n)
	}

	sides["eu"].fz.Thaw()
	waitForWithin(t, 30*time.Second, "eu healthy after the thaw", func() bool { st, _ := status(); return st.Healthy })
}
