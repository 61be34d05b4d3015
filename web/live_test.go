package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
	"github.com/dlqdash/dlqdash/views"
)

// liveFixture is a server with a running hub on a real store, behind a
// real listener.
type liveFixture struct {
	srv  *httptest.Server
	hub  *Hub
	path string
	st   *store.Store
}

func newLiveFixture(t *testing.T, cfg HubConfig) *liveFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "live.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.AddEntities(t, path,
		storetest.Entity{Path: "orders", Counts: dlq.Counts{Active: 3, DeadLetter: 41, TransferDeadLetter: 1}},
		storetest.Entity{Path: "payments/Subscriptions/audit", Counts: dlq.Counts{DeadLetter: 2}},
	)
	cfg.Catalog, cfg.Mode, cfg.Namespace = st, "serve", "contoso.servicebus.windows.net"
	hub := NewHub(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	s := New(Config{Catalog: st, Mode: "serve", Namespace: cfg.Namespace, Hub: hub})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &liveFixture{srv: srv, hub: hub, path: path, st: st}
}

// deadLetter catalogs a dead letter of entity with reason and returns its id.
func (fx *liveFixture) deadLetter(t *testing.T, entity, reason string, gone bool) int64 {
	t.Helper()
	now := time.Now().UTC()
	r := dlq.Record{Entity: entity, SubQueue: dlq.SubQueueDeadLetter,
		Message: dlq.Message{SequenceNumber: now.UnixNano(), State: dlq.StateActive, MessageID: "m-" + reason,
			EnqueuedAt: &now, DeadLetterReason: &reason, Body: []byte(`{"note":"` + reason + `"}`)},
		FirstSeenAt: now, LastSeenAt: now}
	if gone {
		r.GoneAt = &now
	}
	return storetest.Insert(t, fx.path, r)[0]
}

func wsURL(srv *httptest.Server, query string) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/live?" + query
}

// dial subscribes with query and waits until the hub has registered the
// connection (the handshake completes just before), so that what is
// published next reaches it.
func (fx *liveFixture) dial(t *testing.T, query string) *websocket.Conn {
	t.Helper()
	before := fx.hub.clientCount()
	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, query), nil)
	if err != nil {
		t.Fatalf("dial %s: %v (response %v)", query, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	waitUntil(t, "the connection to register", func() bool { return fx.hub.clientCount() > before })
	return conn
}

// waitUntil polls cond with a deadline: for state that no channel announces.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not a wait for an event
	}
}

// next reads the next op, failing after a deadline.
func next(t *testing.T, conn *websocket.Conn) liveOp {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var op liveOp
	if err := json.Unmarshal(b, &op); err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	return op
}

// until reads ops until one has id (or is a resync when id is "resync").
func until(t *testing.T, conn *websocket.Conn, id string) liveOp {
	t.Helper()
	for {
		op := next(t, conn)
		if op.ID == id || id == "resync" && op.Op == "resync" {
			return op
		}
	}
}

func freshness(healthy bool, msg string) dlq.Change {
	at := time.Date(2026, 11, 22, 10, 42, 7, 0, time.UTC)
	st := dlq.Status{Healthy: healthy, LastSuccessAt: &at, Error: msg}
	if !healthy {
		st.ErrorSince = &at
	}
	return dlq.Change{Kind: dlq.ChangeFreshness, Status: &st, At: at}
}

func TestLiveOverview(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	conn := fx.dial(t, "page=overview")

	fx.hub.Publish(freshness(false, "Service Bus <unreachable>"))
	op := next(t, conn)
	if op.Op != "replace" || op.ID != views.FragmentID("freshness", "") ||
		!strings.Contains(op.HTML, `id="freshness"`) || !strings.Contains(op.HTML, "Service Bus &lt;unreachable&gt;") {
		t.Fatalf("freshness op = %+v", op)
	}

	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeCounts, Entity: "orders", Counts: &dlq.Counts{DeadLetter: 41}})
	seen := map[string]string{}
	for len(seen) < 3 {
		op := next(t, conn)
		if op.Op != "replace" {
			t.Fatalf("op %+v", op)
		}
		seen[op.ID] = op.HTML
	}
	row := seen[views.FragmentID("entity", "orders")]
	if !strings.Contains(row, `data-testid="dead-letter-count">41<`) || !strings.Contains(row, `id="entity-orders"`) {
		t.Errorf("entity row = %q", row)
	}
	if !strings.Contains(seen["totals"], `data-testid="dead-letter-total">44<`) {
		t.Errorf("totals = %q", seen["totals"])
	}
	if !strings.Contains(seen["depth-chart"], `id="depth-chart"`) {
		t.Errorf("chart = %q", seen["depth-chart"])
	}

	// Entities added or deleted change the table's shape: the page refetches.
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeEntities})
	if op := next(t, conn); op.Op != "resync" {
		t.Errorf("entities change: %+v", op)
	}
}

func TestLiveOverviewPageSubscribes(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	res, err := http.Get(fx.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-live="page=overview"`, `data-testid="live-status"`, `<script src="/static/live.`,
		`id="freshness"`, `id="totals"`, `id="entity-orders"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("overview lacks %s", want)
		}
	}
}

// Every page's data-live is a subscription /live accepts.
func TestLivePagesSubscribe(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	id := fx.deadLetter(t, "orders", "SqlTimeout", false)
	liveRe := regexp.MustCompile(`data-live="([^"]*)"`)
	for _, tt := range []struct{ target, want string }{
		{"/", "page=overview"},
		{"/messages", "first=1&page=messages"},
		// The filter as dlq.Filter.Encode writes it: times in RFC 3339.
		{"/messages?entity=orders&since=2026-11-22T10:42&q=", "entity=orders&first=1&page=messages&since=2026-11-22T10%3A42%3A00.000Z"},
		{"/groups", "page=groups"},
		{"/groups?include_gone=true", "page=groups&include_gone=true"},
		{"/inventory", "page=inventory"},
		{"/messages/" + strconv.FormatInt(id, 10), "page=message&id=" + strconv.FormatInt(id, 10)},
		{"/groups/" + groupKey(t, fx, "SqlTimeout"), "key=" + groupKey(t, fx, "SqlTimeout") + "&page=group"},
	} {
		res, err := http.Get(fx.srv.URL + tt.target)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		m := liveRe.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s: no data-live", tt.target)
			continue
		}
		q := html.UnescapeString(string(m[1]))
		if q != tt.want {
			t.Errorf("%s: data-live %q, want %q", tt.target, q, tt.want)
		}
		conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, q), nil)
		if err != nil {
			t.Errorf("%s: /live?%s: %v (%v)", tt.target, q, err, resp)
			continue
		}
		conn.Close()
	}
}

func TestLiveNewMessagesMatchTheFilter(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	first := fx.dial(t, "page=messages&entity=orders&first=1")
	later := fx.dial(t, "page=messages&entity=orders") // a later page: no new rows
	all := fx.dial(t, "page=messages&first=1&q=bananas")

	a := fx.deadLetter(t, "orders", "SqlTimeout", false)
	b := fx.deadLetter(t, "payments/Subscriptions/audit", "bananas", false)
	c := fx.deadLetter(t, "orders", "ValidationFailed", false)
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{a, c}})
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "payments/Subscriptions/audit", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{b}})

	op := next(t, first)
	if op.Op != "prepend" || op.ID != views.FragmentID("message-rows", "") {
		t.Fatalf("op %+v", op)
	}
	firstHTML := op.HTML
	ia, ib, ic := strings.Index(op.HTML, `id="message-`+strconv.FormatInt(a, 10)+`"`),
		strings.Index(op.HTML, `id="message-`+strconv.FormatInt(b, 10)+`"`),
		strings.Index(op.HTML, `id="message-`+strconv.FormatInt(c, 10)+`"`)
	if ia < 0 || ic < 0 || ib >= 0 || ic > ia {
		t.Errorf("rows of orders' first page: a at %d, b at %d, c at %d (want c before a, no b):\n%s", ia, ib, ic, op.HTML)
	}
	op = next(t, all)
	if op.Op != "prepend" || !strings.Contains(op.HTML, `id="message-`+strconv.FormatInt(b, 10)+`"`) ||
		strings.Contains(op.HTML, `id="message-`+strconv.FormatInt(a, 10)+`"`) {
		t.Errorf("search subscriber got %+v", op)
	}
	// A search list's new rows mark the matches and link with the search,
	// as its page's rows do.
	if !strings.Contains(op.HTML, `<mark data-testid="match">bananas</mark>`) || !strings.Contains(op.HTML, `?q=bananas"`) {
		t.Errorf("the search list's new row is not highlighted:\n%s", op.HTML)
	}
	// A later page of orders gets no rows, but its count grew: one
	// recount (of the count paragraph), not one per message.
	if op := next(t, later); op.Op != "recount" || op.ID != "matching" || op.HTML != "" {
		t.Errorf("orders' later page got %+v, want a recount of matching", op)
	}
	// Rows carry their place in the list's order: enqueued time, id.
	if !regexp.MustCompile(`id="message-` + strconv.FormatInt(a, 10) + `"[^>]*data-sort="\d{13}"`).MatchString(firstHTML) {
		t.Errorf("a new row has no sort key:\n%s", firstHTML)
	}

	// A message no list matches is sent to none: the next frame each gets
	// is the freshness published after it.
	d := fx.deadLetter(t, "payments/Subscriptions/audit", "Other", false)
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, IDs: []int64{d}})
	fx.hub.Publish(freshness(true, ""))
	for name, conn := range map[string]*websocket.Conn{"first": first, "later": later, "all": all} {
		if op := next(t, conn); op.ID != "freshness" {
			t.Errorf("%s: got %+v before the freshness", name, op)
		}
	}
}

func TestLiveGoneRowsAndMessagePage(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	id := fx.deadLetter(t, "orders", "SqlTimeout", true)
	list := fx.dial(t, "page=messages&entity=orders")
	detail := fx.dial(t, "page=message&id="+strconv.FormatInt(id, 10))
	other := fx.dial(t, "page=message&id=999999")

	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeGone, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{id}})
	op := next(t, list)
	if op.Op != "replace" || op.ID != "message-"+strconv.FormatInt(id, 10) || !strings.Contains(op.HTML, `data-testid="gone"`) {
		t.Errorf("list got %+v", op)
	}
	// The row changed in place, and the list's count may have moved (a
	// list without gone messages lost one).
	if op := next(t, list); op.Op != "recount" || op.ID != "matching" {
		t.Errorf("after the gone row the list got %+v, want a recount", op)
	}
	if op := next(t, detail); op.Op != "resync" {
		t.Errorf("the message's page got %+v", op)
	}
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, other); op.ID != "freshness" {
		t.Errorf("another message's page got %+v", op)
	}
}

func TestLiveGroupsPage(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	conn := fx.dial(t, "page=groups")
	id := fx.deadLetter(t, "orders", "PoisonMessage", false)
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{id}})
	op := next(t, conn)
	if op.Op != "replace" || op.ID != views.FragmentID("groups", "") || !strings.Contains(op.HTML, "PoisonMessage") {
		t.Errorf("groups page got %+v", op)
	}
}

func TestLiveInventoryRefetches(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	conn := fx.dial(t, "page=inventory")
	// Dead letters do not move the inventory; deferred messages do.
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{1}})
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, conn); op.ID != "freshness" {
		t.Fatalf("got %+v", op)
	}
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueMain, IDs: []int64{2}})
	if op := next(t, conn); op.Op != "resync" {
		t.Errorf("got %+v", op)
	}
}

// smallBuffers makes accepted connections' kernel send buffers small, so
// that a peer that does not read fills them after a few frames instead of
// megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

func TestLiveSlowClientIsDropped(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{ClientBuffer: 2, Window: time.Millisecond})
	// The same handler behind a listener with small send buffers.
	srv := httptest.NewUnstartedServer(fx.srv.Config.Handler)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	fast, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=inventory"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	slowDialer := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4 << 10)
		}
		return c, err
	}}
	slow, _, err := slowDialer.DialContext(t.Context(), wsURL(srv, "page=inventory"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	waitUntil(t, "both connections", func() bool { return fx.hub.clientCount() == 2 })

	var received atomic.Int64
	fastDone := make(chan error, 1)
	go func() {
		for {
			if _, _, err := fast.ReadMessage(); err != nil {
				fastDone <- err
				return
			}
			received.Add(1)
		}
	}()
	// Large frames, each published once the fast client has the one
	// before: the fast one keeps up, the slow one (never reading) fills its
	// socket, then its buffer, and is dropped.
	big := strings.Repeat("x", 64<<10)
	for i := 0; fx.hub.clientCount() == 2; i++ {
		if i > 2000 {
			t.Fatal("the slow client was never dropped")
		}
		want := received.Load() + 1
		fx.hub.Publish(freshness(false, fmt.Sprint(i, big)))
		waitUntil(t, "the fast client to read", func() bool { return received.Load() >= want })
	}
	want := received.Load() + 1
	fx.hub.Publish(freshness(true, ""))
	waitUntil(t, "the fast client after the drop", func() bool { return received.Load() >= want })
	select {
	case err := <-fastDone:
		t.Fatalf("the fast client was disconnected: %v", err)
	default:
	}
	// The slow one, reading at last, finds its connection closed after
	// what was already in flight.
	slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, _, err := slow.ReadMessage()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the slow connection was not closed: %v", err)
		}
		break
	}
}

func TestLivePublishNeverBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hub := NewHub(HubConfig{Catalog: st, Queue: 4})
	srv := httptest.NewServer(New(Config{Catalog: st, Hub: hub}).Handler())
	defer srv.Close()
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=overview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitUntil(t, "registration", func() bool { return hub.clientCount() == 1 })

	// Nothing reads the hub's queue yet: Publish must still return.
	published := make(chan struct{})
	go func() {
		for range 100 {
			hub.Publish(freshness(true, ""))
		}
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked")
	}
	if n := hub.dropped.Load(); n != 96 {
		t.Errorf("dropped %d changes, want 96", n)
	}
	// Once the hub runs, the page is told it missed something.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go hub.Run(ctx)
	if op := next(t, conn); op.Op != "resync" {
		t.Errorf("after an overflow: %+v, want resync", op)
	}
}

func TestLiveReconnect(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	conn := fx.dial(t, "page=overview")
	conn.Close()
	waitUntil(t, "the closed connection to leave", func() bool { return fx.hub.clientCount() == 0 })
	conn = fx.dial(t, "page=overview")
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, conn); op.ID != "freshness" {
		t.Errorf("after reconnecting: %+v", op)
	}
}

func TestLiveRefusesOtherOrigins(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	for _, tt := range []struct {
		origin string
		status int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{strings.Replace(fx.srv.URL, "127.0.0.1", "localhost", 1), http.StatusForbidden},
		{fx.srv.URL, http.StatusSwitchingProtocols},
		{"", http.StatusSwitchingProtocols}, // not a browser
	} {
		h := http.Header{}
		if tt.origin != "" {
			h.Set("Origin", tt.origin)
		}
		conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, "page=overview"), h)
		if conn != nil {
			conn.Close()
		}
		if resp == nil {
			t.Fatalf("origin %q: %v", tt.origin, err)
		}
		if resp.StatusCode != tt.status {
			t.Errorf("origin %q: status %d, want %d", tt.origin, resp.StatusCode, tt.status)
		}
	}
}

func TestLiveBadSubscriptions(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	for _, q := range []string{"", "page=nope", "page=messages&state=nope", "page=messages&cursor=x", "page=overview&x=1", "page=message&id=abc"} {
		_, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, q), nil)
		if resp == nil {
			t.Fatalf("%q: %v", q, err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400", q, resp.StatusCode)
		}
	}
	// Without a hub there are no live updates.
	srv := httptest.NewServer(New(Config{Catalog: fx.st}).Handler())
	defer srv.Close()
	_, resp, _ := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, "page=overview"), nil)
	if resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("no hub: %v", resp)
	}
}

func TestLiveIgnoresWhatTheClientSends(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	conn := fx.dial(t, "page=overview")
	for _, m := range []string{"hello", `{"op":"resync"}`, `{"page":"messages"}`} {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, conn); op.ID != "freshness" {
		t.Errorf("got %+v", op)
	}
	if n := fx.hub.clientCount(); n != 1 {
		t.Errorf("%d clients", n)
	}
}

func TestLiveShutdownClosesSockets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hub := NewHub(HubConfig{Catalog: st})
	s := New(Config{Catalog: st, Hub: hub})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws://"+ln.Addr().String()+"/live?page=overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitUntil(t, "registration", func() bool { return hub.clientCount() == 1 })

	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("after shutdown: %v, want a going-away close", err)
	}
	// And a page that reconnects now is refused.
	if hub.register(&liveClient{send: make(chan []byte, 1)}) == nil {
		t.Error("a closed hub registered a client")
	}
}

// TestLiveFirstConnectionCatchesUp: a change published after the page was
// read and before its socket opened is not lost: the page's data-live-seq
// makes the hub tell it to resync, and an up-to-date page gets no resync.
func TestLiveFirstConnectionCatchesUp(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	resp, err := http.Get(fx.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`data-live-seq="(\d+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the overview has no data-live-seq:\n%s", page)
	}
	seq := string(m[1])

	// Up to date: the first frame is the next change, not a resync.
	conn := fx.dial(t, "page=overview&seq="+seq)
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, conn); op.Op == "resync" {
		t.Errorf("an up-to-date page was told to resync")
	}
	conn.Close()
	waitUntil(t, "the closed connection to leave", func() bool { return fx.hub.clientCount() == 0 })

	// A change slipped in between: resync first.
	conn = fx.dial(t, "page=overview&seq="+seq)
	if op := next(t, conn); op.Op != "resync" {
		t.Errorf("a page that missed a change got %+v first, want resync", op)
	}
}

// TestLiveGroupsTriage: a group's triage changed through the API updates
// the groups page's rows.
func TestLiveGroupsTriage(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{GroupsEvery: 10 * time.Millisecond})
	conn := fx.dial(t, "page=groups")
	id := fx.deadLetter(t, "orders", "PoisonMessage", false)
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{id}})
	if op := next(t, conn); op.Op != "replace" || !strings.Contains(op.HTML, `data-status="new"`) {
		t.Fatalf("groups page got %+v", op)
	}
	gs, err := fx.st.ListGroups(t.Context())
	if err != nil || len(gs) == 0 {
		t.Fatal(gs, err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "PATCH", fx.srv.URL+"/api/v1/groups/"+gs[0].ID,
		strings.NewReader(`{"status":"known","owner":"ops team"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("patch: %v %v", res, err)
	}
	res.Body.Close()
	op := next(t, conn)
	if op.Op != "replace" || op.ID != views.FragmentID("groups", "") || !strings.Contains(op.HTML, `data-status="known"`) ||
		!strings.Contains(op.HTML, "ops team") {
		t.Errorf("after the patch the groups page got %+v", op)
	}
}

// A burst of more new messages than one update renders: first pages
// refetch, later pages are only told their count changed.
func TestLiveManyNewMessages(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	first := fx.dial(t, "page=messages&entity=orders&first=1")
	later := fx.dial(t, "page=messages&entity=orders")
	ids := make([]int64, maxRowOps+1)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: ids})
	if op := next(t, first); op.Op != "resync" {
		t.Errorf("the first page got %+v, want resync", op)
	}
	if op := next(t, later); op.Op != "recount" || op.ID != "matching" {
		t.Errorf("the later page got %+v, want recount", op)
	}
}

// groupKey is the key of the group of reason's dead letters.
func groupKey(t *testing.T, fx *liveFixture, reason string) string {
	t.Helper()
	gs, err := fx.st.ListGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Reason == reason {
			return g.ID
		}
	}
	t.Fatalf("no group of %s", reason)
	return ""
}

// A failure group's page is told (recount) when its group changes, once
// per change, and not when another group does; it then fetches itself.
func TestLiveGroupPage(t *testing.T) {
	fx := newLiveFixture(t, HubConfig{})
	fx.deadLetter(t, "orders", "SqlTimeout", false)
	fx.deadLetter(t, "orders", "Other", false)
	mine := fx.dial(t, "page=group&key="+groupKey(t, fx, "SqlTimeout"))
	other := fx.dial(t, "page=group&key="+groupKey(t, fx, "Other"))
	// The first look: each page is told once (the hub had not seen them).
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeGroups})
	for name, c := range map[string]*websocket.Conn{"mine": mine, "other": other} {
		if op := next(t, c); op.Op != "recount" || op.ID != "group" {
			t.Fatalf("%s: first got %+v, want a recount of the group", name, op)
		}
	}
	id := fx.deadLetter(t, "orders", "SqlTimeout", false)
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{id}})
	if op := next(t, mine); op.Op != "recount" || op.ID != "group" {
		t.Errorf("the group's page got %+v, want a recount", op)
	}
	// Nothing changed for the other group: its next frame is the
	// freshness published after.
	fx.hub.Publish(freshness(true, ""))
	if op := next(t, other); op.ID != "freshness" {
		t.Errorf("another group's page got %+v before the freshness", op)
	}
	if op := next(t, mine); op.ID != "freshness" {
		t.Errorf("the group's page was told twice: %+v", op)
	}
	// A page without a key is refused.
	if _, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, "page=group"), nil); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("page=group without a key: %v %v", err, resp)
	}
}
