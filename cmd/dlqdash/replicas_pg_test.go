package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/pgtest"
	"github.com/dlqdash/dlqdash/store/replica"
	"github.com/dlqdash/dlqdash/web"
)

// fakeShared is the PostgreSQL store's side of sharedStore, for the
// wake-ups alone: its pool is real, its catalog and jobs are a SQLite
// store's, which nothing here writes through (TestTwoServesShareOnePostgres
// runs the real PostgreSQL store).
type fakeShared struct {
	pool *pgxpool.Pool
	st   *store.Store
}

func (f fakeShared) ReplicaDB() (*pgxpool.Pool, bool) { return f.pool, true }
func (f fakeShared) FencedNamespace(name string, _ replica.Fencer) dlq.Catalog {
	return f.st.Namespace(name)
}
func (f fakeShared) FencedJobs(replica.Fencer) replay.Store { return f.st }

// TestReplicasWakeEachOthersPages: two replicas wired as serve wires them
// on one PostgreSQL database (sharedReplicas). A change published on
// replica A's hub (an ingester's page, a triage) reaches a page open on
// replica B, through A's notifier and B's listener, as a refetch; a page
// on A is not refetched by A's own notification, and B's engine is woken.
func TestReplicasWakeEachOthersPages(t *testing.T) {
	c := pgtest.Start(t)
	dsn := c.Database(t)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	type side struct {
		r   *replicas
		hub *web.Hub
		srv *httptest.Server
	}
	var engineWakes sync.WaitGroup
	engineWakes.Add(1)
	var once sync.Once
	mk := func(id string) side {
		p, err := pgxpool.New(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		r := sharedReplicas(st, fakeShared{pool: p, st: st}, p, id, slog.New(slog.DiscardHandler))
		if id == "replica-b" {
			r.engineWake = func() { once.Do(engineWakes.Done) }
		}
		hub := web.NewHub(web.HubConfig{Catalog: st, Mode: "serve", Namespace: "ns", Remote: r.remote(), Published: r.changed(), RemoteEvery: 100 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, loop := range append(r.loops(), hub.Run) {
			wg.Go(func() { loop(ctx) })
		}
		t.Cleanup(func() { cancel(); wg.Wait() })
		srv := httptest.NewServer(web.New(web.Config{Catalog: st, Mode: "serve", Namespace: "ns", Hub: hub}).Handler())
		t.Cleanup(srv.Close)
		return side{r, hub, srv}
	}
	a, b := mk("replica-a"), mk("replica-b")
	// Each page's frames, as "op:id", read by a goroutine of its own (a
	// websocket read that times out cannot be resumed).
	dial := func(s side) chan string {
		conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws"+strings.TrimPrefix(s.srv.URL, "http")+"/live?page=overview", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		ops := make(chan string, 64)
		go func() {
			for {
				_, msg, err := conn.ReadMessage()
				if err != nil {
					return
				}
				var op struct{ Op, ID string }
				json.Unmarshal(msg, &op)
				ops <- op.Op + ":" + op.ID
			}
		}()
		return ops
	}
	pageA, pageB := dial(a), dial(b)
	drain := func(ops chan string, within time.Duration) []string {
		var got []string
		deadline := time.After(within)
		for {
			select {
			case op := <-ops:
				got = append(got, op)
			case <-deadline:
				return got
			}
		}
	}
	// Let the listeners' first wake-ups (after connecting) pass.
	drain(pageA, time.Second)
	drain(pageB, time.Second)

	a.hub.Publish(dlq.Change{Kind: dlq.ChangeGroups})
	sent := time.Now()
	var first string
	select {
	case first = <-pageB:
	case <-time.After(5 * time.Second):
	}
	if first != "resync:" {
		t.Fatalf("replica B's page after A's change: %q, want a resync", first)
	}
	t.Logf("replica B's page refetched %s after A's change", time.Since(sent).Round(time.Millisecond))
	for _, op := range drain(pageA, 500*time.Millisecond) {
		if op == "resync:" {
			t.Errorf("replica A's page refetched for A's own change: %v", op)
		}
	}
	done := make(chan struct{})
	go func() { engineWakes.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("replica B's engine was not woken")
	}
}
