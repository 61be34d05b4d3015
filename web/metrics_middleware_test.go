package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/store"
)

type observation struct {
	method, route string
	code          int
}

// fakeObserver records what the middleware reports.
type fakeObserver struct {
	mu  sync.Mutex
	obs []observation
}

func (f *fakeObserver) ObserveRequest(method, route string, code int, elapsed time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if elapsed < 0 {
		code = -1 // shows up as a mismatch
	}
	f.obs = append(f.obs, observation{method, route, code})
}

func (f *fakeObserver) last() (observation, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.obs) == 0 {
		return observation{}, 0
	}
	return f.obs[len(f.obs)-1], len(f.obs)
}

func newMeasuredServer(t *testing.T, metricsHandler http.Handler, hub *Hub) (*Server, *fakeObserver) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "web.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	obs := &fakeObserver{}
	return New(Config{Catalog: st, Mode: "demo", Metrics: obs, MetricsHandler: metricsHandler, Hub: hub}), obs
}

func TestMeasureLabelsByRoutePattern(t *testing.T) {
	metricsPage := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "dlqdash_up 1\n") })
	s, obs := newMeasuredServer(t, metricsPage, nil)
	h := s.Handler()
	tests := []struct {
		method, target string
		header         map[string]string
		want           observation
	}{
		{"GET", "/healthz", nil, observation{"GET", "GET /healthz", 200}},
		{"GET", "/api/v1/messages?state=active", nil, observation{"GET", "GET /api/v1/messages", 200}},
		{"GET", "/api/v1/messages/12345", nil, observation{"GET", "GET /api/v1/messages/{id}", 404}},
		{"GET", "/api/v1/no-such-thing", nil, observation{"GET", "/api/", 404}},
		{"GET", "/no/such/page/98765", nil, observation{"GET", "/", 404}},
		{"GET", "/metrics", nil, observation{"GET", "GET /metrics", 200}},
		// The path is cleaned by a redirect, labelled with the pattern the
		// clean path matches.
		{"GET", "/api/v1/../../healthz", nil, observation{"GET", "GET /healthz", 307}},
		// Refused before the mux runs, still labelled by the route.
		{"POST", "/api/v1/jobs", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			observation{"POST", "POST /api/v1/jobs", 403}},
		{"BREW", "/coffee", nil, observation{"BREW", "/", 404}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			r := httptest.NewRequestWithContext(t.Context(), tt.method, tt.target, nil)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			res, _ := do(t, h, r)
			got, _ := obs.last()
			if got != tt.want || res.StatusCode != tt.want.code {
				t.Errorf("observed %+v (status %d), want %+v", got, res.StatusCode, tt.want)
			}
		})
	}
	for _, o := range obs.obs {
		if strings.Contains(o.route, "12345") || strings.Contains(o.route, "98765") || strings.Contains(o.route, "such") ||
			strings.Contains(o.route, "coffee") || strings.Contains(o.route, "?") {
			t.Errorf("route label %q carries the request path", o.route)
		}
	}
}

// With metrics on a listener of their own, the dashboard has no /metrics.
func TestMetricsRouteOnlyWhenServedHere(t *testing.T) {
	s, obs := newMeasuredServer(t, nil, nil)
	res, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/metrics", nil))
	if res.StatusCode != 404 || !strings.Contains(body, `data-testid="error-page"`) {
		t.Errorf("GET /metrics = %d, want the 404 page", res.StatusCode)
	}
	if got, _ := obs.last(); got != (observation{"GET", "/", 404}) {
		t.Errorf("observed %+v", got)
	}
}

// The websocket upgrade goes through the recorder (gorilla/websocket needs
// http.Hijacker) and is observed at the handshake, not when it closes.
func TestMeasureWebsocketUpgrade(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "live.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hub := NewHub(HubConfig{Catalog: st, Mode: "demo"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	obs := &fakeObserver{}
	srv := httptest.NewServer(New(Config{Catalog: st, Mode: "demo", Metrics: obs, Hub: hub}).Handler())
	t.Cleanup(srv.Close)

	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=overview"), nil)
	if err != nil {
		t.Fatalf("dial: %v (response %v)", err, resp)
	}
	defer conn.Close()
	waitUntil(t, "the upgrade to be observed", func() bool { _, n := obs.last(); return n > 0 })
	if got, n := obs.last(); n != 1 || got != (observation{"GET", "GET /live", 101}) {
		t.Errorf("observed %+v (%d observations), want one GET /live 101 while the socket is open", got, n)
	}
}
