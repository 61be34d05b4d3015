package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/store"
)

// The websocket honours the API's roles: a token is needed to open it, and
// it is closed (1008) at the next ping after the token is revoked.
func TestLiveNeedsAndKeepsCredentials(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "live-auth.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hub := NewHub(HubConfig{Catalog: st})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	secret, _, err := auth.CreateToken(t.Context(), st, auth.Token{Name: "wall-screen", Role: auth.Viewer, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Catalog: st, Hub: hub, Auth: auth.New(auth.Config{Mode: auth.ModeOIDC, Store: st})})
	s.livePing = 50 * time.Millisecond
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	_, res, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=overview"), nil)
	if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous dial: %v, %v", err, res)
	}
	header := http.Header{"Authorization": {"Bearer " + secret}}
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=overview"), header)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Pings pass while the token holds.
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("connection ended while the token was valid: %v", err)
		}
		break
	}
	// A timed-out read leaves a gorilla connection unusable: dial again.
	conn.Close()
	conn, _, err = websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=overview"), header)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := st.RevokeToken(t.Context(), "wall-screen", time.Now()); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
			t.Fatalf("after revocation: %v, want close 1008", err)
		}
		break
	}
}

// A viewer's job page gets the live progress without the controls; an
// operator's with them, from the same publication.
func TestLiveJobProgressByRole(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	tokens := map[auth.Role]string{}
	for _, r := range []auth.Role{auth.Viewer, auth.Operator} {
		secret, _, err := auth.CreateToken(t.Context(), fx.st, auth.Token{Name: r.String(), Role: r, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		tokens[r] = secret
	}
	srv := httptest.NewServer(New(Config{Catalog: fx.st, Hub: fx.hub, Jobs: newFakeJobs(nil),
		Auth: auth.New(auth.Config{Mode: auth.ModeOIDC, Store: fx.st})}).Handler())
	t.Cleanup(srv.Close)
	dial := func(r auth.Role) *websocket.Conn {
		before := fx.hub.clientCount()
		conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=job&id=7"), http.Header{"Authorization": {"Bearer " + tokens[r]}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		waitUntil(t, "the connection to register", func() bool { return fx.hub.clientCount() > before })
		return conn
	}
	viewer, operator := dial(auth.Viewer), dial(auth.Operator)
	fx.hub.PublishJob(runningJob(7))
	if op := next(t, operator); !strings.Contains(op.HTML, `data-testid="job-pause"`) {
		t.Errorf("operator got %+v", op)
	}
	if op := next(t, viewer); op.ID != "job-progress-7" || strings.Contains(op.HTML, `data-testid="job-controls"`) {
		t.Errorf("viewer got %+v", op)
	}
}
