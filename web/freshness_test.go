package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// stallingBroker is a namespace with one empty queue whose listings, while
// stalled, wait for their context to end: a frozen broker.
type stallingBroker struct {
	mu    sync.Mutex
	stall chan struct{} // non-nil while stalled; closed by resume
}

func (b *stallingBroker) freeze() { b.mu.Lock(); b.stall = make(chan struct{}); b.mu.Unlock() }
func (b *stallingBroker) resume() { b.mu.Lock(); close(b.stall); b.stall = nil; b.mu.Unlock() }

func (b *stallingBroker) wait(ctx context.Context) error {
	b.mu.Lock()
	stall := b.stall
	b.mu.Unlock()
	if stall == nil {
		return nil
	}
	select {
	case <-stall:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *stallingBroker) Entities(ctx context.Context) ([]dlq.Entity, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, nil
}

func (b *stallingBroker) Settings(ctx context.Context) ([]dlq.Settings, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return []dlq.Settings{{Path: "orders", Kind: dlq.KindQueue, Status: "Active"}}, nil
}

func (b *stallingBroker) Peek(ctx context.Context, entity string, q dlq.SubQueue, from int64, max int) ([]dlq.Message, error) {
	return nil, b.wait(ctx)
}

// TestOverviewFreshnessTurnsLiveWhenReadsStall is the overview's banner
// with the real ingester, hub and server: a broker that stops answering
// fails no read, yet within the ingester's Stale of the last success the
// open overview is sent a freshness panel that says the catalog is a
// snapshot and why, GET /api/v1/status and a fresh page agree, and the
// panel turns back to Live on its own once reads succeed again.
func TestOverviewFreshnessTurnsLiveWhenReadsStall(t *testing.T) {
	const stale = 800 * time.Millisecond
	path := filepath.Join(t.TempDir(), "fresh.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders"})

	const ns = "contoso.servicebus.windows.net"
	hub := NewHub(HubConfig{Catalog: st, Mode: "serve", Namespace: ns})
	b := &stallingBroker{}
	in := dlq.New(dlq.Config{Broker: b, Catalog: st, Namespace: ns, Poll: 50 * time.Millisecond,
		Stale: stale, PollTimeout: 10 * time.Second, Publish: hub.Publish})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() {
		if err := in.Run(ctx); err != nil {
			t.Errorf("ingester: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	srv := httptest.NewServer(New(Config{Catalog: st, Mode: "serve", Namespace: ns, Hub: hub, Status: in}).Handler())
	t.Cleanup(srv.Close)
	fx := &liveFixture{srv: srv, hub: hub, path: path, st: st}

	status := func() (s struct {
		Healthy    bool    `json:"healthy"`
		Error      *string `json:"error"`
		ErrorSince *string `json:"error_since"`
	}) {
		t.Helper()
		res, err := http.Get(srv.URL + "/api/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	page := func() string {
		t.Helper()
		res, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	waitUntil(t, "a healthy status", func() bool { return status().Healthy })
	if p := page(); !strings.Contains(p, `data-testid="freshness">Live<`) {
		t.Fatal("the overview is not live while reads succeed")
	}
	conn := fx.dial(t, "page=overview")

	b.freeze()
	for {
		op := until(t, conn, "freshness")
		if strings.Contains(op.HTML, "Snapshot from") {
			last := *in.Status().LastSuccessAt
			if d := time.Since(last); d > stale+time.Second {
				t.Errorf("the panel turned %v after the last success, want within %v", d, stale)
			}
			if !strings.Contains(op.HTML, `class="panel notice"`) ||
				!strings.Contains(op.HTML, "no successful read from the namespace for ") ||
				!strings.Contains(op.HTML, "the broker is not answering") {
				t.Errorf("stale panel = %s", op.HTML)
			}
			break
		}
	}
	s := status()
	if s.Healthy || s.Error == nil || !strings.HasPrefix(*s.Error, "no successful read from the namespace for ") || s.ErrorSince == nil {
		t.Errorf("status while stalled: healthy %v, error %v, error_since %v", s.Healthy, s.Error, s.ErrorSince)
	}
	if p := page(); !strings.Contains(p, "Snapshot from") || !strings.Contains(p, "the broker is not answering") {
		t.Error("a page loaded while stalled does not show the snapshot")
	}

	b.resume()
	for {
		op := until(t, conn, "freshness")
		if strings.Contains(op.HTML, `data-testid="freshness">Live<`) {
			break
		}
	}
	if s := status(); !s.Healthy || s.Error != nil || s.ErrorSince != nil {
		t.Errorf("status after the reads resumed: %+v", s)
	}
}
