package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// serveReal serves s on a loopback listener with its own http.Server (the
// timeouts under test), ReadTimeout shortened to readTimeout.
func serveReal(t *testing.T, s *Server, readTimeout time.Duration) string {
	t.Helper()
	s.http.ReadTimeout = readTimeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

func TestServerLimitsAreSet(t *testing.T) {
	s := newTestServer(t, nil)
	if s.http.ReadHeaderTimeout <= 0 || s.http.ReadTimeout <= 0 || s.http.IdleTimeout <= 0 || s.http.MaxHeaderBytes <= 0 || s.http.MaxHeaderBytes > 1<<20 {
		t.Errorf("http.Server limits: header %v, read %v, idle %v, max header bytes %d", s.http.ReadHeaderTimeout, s.http.ReadTimeout, s.http.IdleTimeout, s.http.MaxHeaderBytes)
	}
	if s.http.WriteTimeout != 0 {
		t.Errorf("WriteTimeout %v would cut off long answers", s.http.WriteTimeout)
	}
}

// A client that sends its body a byte at a time is cut off after
// ReadTimeout instead of holding its connection for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr := serveReal(t, newTestServer(t, nil), 300*time.Millisecond)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Whatever the server answers, then its close (or a reset: the client
	// is still sending); only our own deadline passing means it waited.
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the connection of a client sending a byte every 100ms after %v: %v", time.Since(start), err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("cut off after %v, want about the ReadTimeout", el)
	}
}

// slowCatalog answers ListEntities after a delay, noting whether the
// request's context was cancelled meanwhile.
type slowCatalog struct {
	Catalog
	delay     time.Duration
	cancelled chan error
}

func (c slowCatalog) ListEntities(ctx context.Context) ([]dlq.EntitySummary, error) {
	select {
	case <-time.After(c.delay):
		c.cancelled <- nil
	case <-ctx.Done():
		c.cancelled <- ctx.Err()
		return nil, ctx.Err()
	}
	return c.Catalog.ListEntities(ctx)
}

// ReadTimeout bounds reading the request, never the answer: a request
// that takes longer than it to answer keeps its context.
func TestLongAnswerOutlivesReadTimeout(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "web.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cat := slowCatalog{Catalog: st, delay: 900 * time.Millisecond, cancelled: make(chan error, 1)}
	addr := serveReal(t, New(Config{Catalog: cat}), 300*time.Millisecond)
	res, err := http.Get("http://" + addr + "/api/v1/entities")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if err := <-cat.cancelled; err != nil || res.StatusCode != 200 {
		t.Errorf("an answer taking 3 ReadTimeouts: %d, context %v", res.StatusCode, err)
	}

	// The same for a request with a body, once the body is read (net/http
	// lifts the read deadline at its end).
	s := &Server{}
	h := s.limitRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(900 * time.Millisecond):
			w.Write([]byte("done"))
		case <-r.Context().Done():
			http.Error(w, "cancelled", 500)
		}
	}))
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	res, err = http.Post(srv.URL, "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "done" {
		t.Errorf("a POST answered after 3 ReadTimeouts: %d %q", res.StatusCode, b)
	}
}

// A websocket lives past ReadTimeout: the hijacked connection's deadlines
// are its own.
func TestLiveOutlivesReadTimeout(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{Window: 5 * time.Millisecond})
	s := New(Config{Catalog: fx.st, Mode: "serve", Hub: fx.hub})
	addr := serveReal(t, s, 200*time.Millisecond)
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws://"+addr+"/live?page=overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(700 * time.Millisecond)
	fx.hub.Publish(freshness(false, "still here"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if op := next(t, conn); op.Op != "replace" || !strings.Contains(op.HTML, "still here") {
		t.Errorf("after 3 ReadTimeouts: %+v", op)
	}
}

// A body over its route's limit is 413 payload_too_large naming the
// limit: declared in Content-Length, or found while reading a chunked
// body. Selections by id may be larger (4 MiB).
func TestRequestBodyLimit(t *testing.T) {
	fx := newAuthFixture(t, nil)
	id := strconv.FormatInt(fx.ids[0], 10)
	big := func(n int) string { return `{"body":"` + strings.Repeat("a", n) + `"}` }
	for _, tt := range []struct {
		name, path, body string
		chunked          bool
		want             int
		limit            string
	}{
		{"edit, 2 MiB declared", "/api/v1/messages/" + id + "/replay", big(2 << 20), false, 413, "1 MiB"},
		{"edit, 2 MiB chunked", "/api/v1/messages/" + id + "/replay", big(2 << 20), true, 413, "1 MiB"},
		{"edit, 50 MB", "/api/v1/messages/" + id + "/replay", big(50 << 20), false, 413, "1 MiB"},
		{"edit, 300 KiB", "/api/v1/messages/" + id + "/replay", `{"dry_run":true,"body":"` + strings.Repeat("a", 300<<10) + `"}`, false, 200, ""},
		{"jobs, 5 MiB", "/api/v1/jobs", big(5 << 20), false, 413, "4 MiB"},
		{"jobs, 5 MiB chunked", "/api/v1/jobs", big(5 << 20), true, 413, "4 MiB"},
	} {
		var body io.Reader = strings.NewReader(tt.body)
		if tt.chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
		r := httptest.NewRequestWithContext(t.Context(), "POST", tt.path, body)
		if tt.chunked {
			r.ContentLength = -1
		}
		r.Header.Set("Content-Type", "application/json")
		res, got := fx.as(t, auth.Admin, r)
		if res.StatusCode != tt.want {
			t.Errorf("%s: %d, want %d\n%.300s", tt.name, res.StatusCode, tt.want, got)
			continue
		}
		if tt.want != 413 {
			continue
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal([]byte(got), &e) != nil || e.Error.Code != "payload_too_large" || !strings.Contains(e.Error.Message, tt.limit) {
			t.Errorf("%s: %.300s, want payload_too_large naming %s", tt.name, got, tt.limit)
		}
	}
	// A page's form over the limit gets the error page with 413.
	r := httptest.NewRequestWithContext(t.Context(), "POST", "/messages/"+id+"/edit", strings.NewReader("body="+strings.Repeat("a", 2<<20)))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if res, got := fx.as(t, auth.Admin, r); res.StatusCode != 413 || !strings.Contains(got, "1 MiB") {
		t.Errorf("edit form of 2 MiB: %d\n%.300s", res.StatusCode, got)
	}
}

// A real client sending 50 MB gets the 413 before the server reads it all.
func TestRequestBodyLimitOverTheWire(t *testing.T) {
	addr := serveReal(t, newTestServer(t, nil), 5*time.Second)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"ids\":[", addr, 50<<20)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 413 || !strings.Contains(string(b), "payload_too_large") {
		t.Errorf("50 MB declared: %d %s", res.StatusCode, b)
	}
}
