package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// countingCatalog counts the message lists' new-row queries by filter.
type countingCatalog struct {
	Catalog
	mu      sync.Mutex
	queries map[string]int
}

func (c *countingCatalog) MessagesByID(ctx context.Context, ids []int64, f dlq.Filter) ([]dlq.Record, error) {
	c.mu.Lock()
	c.queries[f.Encode().Encode()]++
	c.mu.Unlock()
	return c.Catalog.MessagesByID(ctx, ids, f)
}

func (c *countingCatalog) count(filter string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries[filter]
}

// capFixture is a hub and a server with sign-in on (tokens per actor), on
// a counting catalog.
type capFixture struct {
	srv    *httptest.Server
	hub    *Hub
	cat    *countingCatalog
	path   string
	tokens map[string]string
}

func newCapFixture(t *testing.T, cfg HubConfig, roles map[string]auth.Role) *capFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cap.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fx := &capFixture{cat: &countingCatalog{Catalog: st, queries: map[string]int{}}, path: path, tokens: map[string]string{}}
	for name, role := range roles {
		secret, _, err := auth.CreateToken(t.Context(), st, auth.Token{Name: name, Role: role, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		fx.tokens[name] = secret
	}
	cfg.Catalog = fx.cat
	fx.hub = NewHub(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fx.hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	s := New(Config{Catalog: fx.cat, Hub: fx.hub, Auth: auth.New(auth.Config{Mode: auth.ModeOIDC, Store: st})})
	fx.srv = httptest.NewServer(s.Handler())
	t.Cleanup(fx.srv.Close)
	return fx
}

// open dials /live as the token's actor.
func (fx *capFixture) open(t *testing.T, actor, query string) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(fx.srv, query), http.Header{"Authorization": {"Bearer " + fx.tokens[actor]}})
	if err != nil {
		t.Fatalf("dial as %s: %v", actor, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dial opens /live as the token's actor and waits until the hub has
// registered the connection.
func (fx *capFixture) dial(t *testing.T, actor, query string) *websocket.Conn {
	t.Helper()
	before := fx.hub.clientCount()
	conn := fx.open(t, actor, query)
	waitUntil(t, "the connection to register", func() bool { return fx.hub.clientCount() > before })
	return conn
}

// refused opens /live as the token's actor and returns the close frame
// the connection was refused with (nil if its first frame is another).
func (fx *capFixture) refused(t *testing.T, actor, query string) *websocket.CloseError {
	t.Helper()
	conn := fx.open(t, actor, query)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := conn.ReadMessage()
	ce, _ := err.(*websocket.CloseError)
	return ce
}

// Live connections are capped in all and per actor; a refused socket is
// closed at once with 4429 and words the page shows.
func TestLiveConnectionCaps(t *testing.T) {
	fx := newCapFixture(t, HubConfig{MaxConnections: 3, MaxPerActor: 2}, map[string]auth.Role{"alice": auth.Viewer, "bob": auth.Viewer})
	a1 := fx.dial(t, "alice", "page=overview")
	fx.dial(t, "alice", "page=groups")
	if refused := fx.refused(t, "alice", "page=overview"); refused == nil || refused.Code != closeTooMany || !strings.Contains(refused.Text, "you have 2 live pages open") {
		t.Errorf("alice's third page: %v, want refused with %d naming her cap", refused, closeTooMany)
	}
	fx.dial(t, "bob", "page=overview")
	if refused := fx.refused(t, "bob", "page=overview"); refused == nil || refused.Code != closeTooMany || !strings.Contains(refused.Text, "dashboard has 3 live pages open") {
		t.Errorf("over the dashboard's cap: %v, want refused naming the cap", refused)
	}
	if n := fx.hub.clientCount(); n != 3 {
		t.Errorf("%d connections registered, want 3", n)
	}
	// A page closed frees its place.
	a1.Close()
	waitUntil(t, "alice's page to unregister", func() bool { return fx.hub.clientCount() == 2 })
	fx.dial(t, "alice", "page=overview")
}

// Without sign-in everyone is the local user: the per-actor cap counts
// per address instead.
func TestLiveActorOfTheLocalUser(t *testing.T) {
	r := httptest.NewRequest("GET", "/live", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	r = r.WithContext(auth.WithIdentity(r.Context(), auth.Local()))
	if got := liveActor(r); got != "local@192.0.2.7" {
		t.Errorf("local user's actor %q", got)
	}
	r = r.WithContext(auth.WithIdentity(r.Context(), auth.Identity{Name: "ci", Role: auth.Viewer, Via: auth.ViaToken}))
	if got := liveActor(r); got == "local@192.0.2.7" || got == "" {
		t.Errorf("token's actor %q", got)
	}
}

// Message lists with the same filter share one query per change batch (a
// viewer's read-only page and an operator's too), and each list is queried
// at most every 250 ms however fast changes come; new rows still arrive.
func TestLiveNewRowsSharedAndThrottled(t *testing.T) {
	fx := newCapFixture(t, HubConfig{Window: 5 * time.Millisecond}, map[string]auth.Role{"vera": auth.Viewer, "olga": auth.Operator})
	const query = "page=messages&first=1&q=apple"
	viewer := fx.dial(t, "vera", query)
	operator := fx.dial(t, "olga", "page=messages&q=apple&first=1")
	apple := storetest.Insert(t, fx.path, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
		Message:     dlq.Message{SequenceNumber: 1, State: dlq.StateActive, MessageID: "m-apple", Body: []byte(`{"fruit":"apple"}`)},
		FirstSeenAt: time.Now(), LastSeenAt: time.Now()})[0]

	start := time.Now()
	for time.Since(start) < time.Second {
		fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{apple}})
		time.Sleep(15 * time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(300 * time.Millisecond) // the last throttled query
	filter := dlq.Filter{Query: "apple"}.Encode().Encode()
	n := fx.cat.count(filter)
	if max := int(elapsed/(250*time.Millisecond)) + 2; n < 1 || n > max {
		t.Errorf("%d queries for the two lists over %v of changes every 15ms, want 1 to %d (one per 250ms, shared)", n, elapsed, max)
	}
	for name, conn := range map[string]*websocket.Conn{"viewer": viewer, "operator": operator} {
		if op := next(t, conn); op.Op != "prepend" || !strings.Contains(op.HTML, `id="message-`+strconv.FormatInt(apple, 10)+`"`) {
			t.Errorf("%s: %+v, want the new row", name, op)
		}
	}
}

// The hub's new-row queries do not grow with the number of open lists:
// past maxListQueries distinct lists, rounds come less often, so that the
// rate stays at most maxListQueries per NewRowsEvery.
func TestLiveListQueriesAreCapped(t *testing.T) {
	const every = 50 * time.Millisecond
	fx := newCapFixture(t, HubConfig{Window: 5 * time.Millisecond, NewRowsEvery: every}, map[string]auth.Role{"vera": auth.Viewer})
	lists := maxListQueries + 8
	for i := range lists {
		fx.dial(t, "vera", "page=messages&first=1&q=word"+strconv.Itoa(i))
	}
	id := storetest.Insert(t, fx.path, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
		Message:     dlq.Message{SequenceNumber: 1, State: dlq.StateActive, MessageID: "m-1", Body: []byte(`{"fruit":"apple"}`)},
		FirstSeenAt: time.Now(), LastSeenAt: time.Now()})[0]
	start := time.Now()
	for time.Since(start) < time.Second {
		fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{id}})
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(3 * every) // the last round
	total := 0
	for i := range lists {
		total += fx.cat.count(dlq.Filter{Query: "word" + strconv.Itoa(i)}.Encode().Encode())
	}
	// Uncapped, every list would be queried every 50 ms: 40 × 21.
	if max := maxListQueries * (int(elapsed/every) + 2); total < lists || total > max {
		t.Errorf("%d queries over %v for %d lists, want %d to %d", total, elapsed, lists, lists, max)
	}
}
