package atom

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// fakeFaults records the AMQP-level fault calls.
type fakeFaults struct {
	mu        sync.Mutex
	drops     int
	latencies []time.Duration
}

func (f *fakeFaults) DropConnections() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops++
}

func (f *fakeFaults) SetLatency(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latencies = append(f.latencies, d)
}

func (f *fakeFaults) calls() (int, []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drops, append([]time.Duration(nil), f.latencies...)
}

type faultEnv struct {
	ns  *broker.Namespace
	srv *httptest.Server
}

// newFaultEnv serves a namespace with queue q1 and topic t1/sub s1; faults
// may be nil (no AMQP server hook).
func newFaultEnv(t *testing.T, faults Faults) *faultEnv {
	t.Helper()
	ns := broker.New(broker.Options{})
	if _, err := ns.CreateQueue("q1", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.CreateTopic("t1", broker.DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.CreateSubscription("t1", "s1", broker.DefaultSubscriptionProperties()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(ns, Options{Faults: faults}))
	t.Cleanup(srv.Close)
	return &faultEnv{ns: ns, srv: srv}
}

// do sends method path (with query) signed with the default key unless auth
// is "" ("none") or another header value, and returns status and error detail.
func (e *faultEnv) do(t *testing.T, method, pathQuery, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+pathQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch auth {
	case "none":
	case "":
		req.Header.Set("Authorization", sign(t, "http://"+req.URL.Host+req.URL.Path, DefaultKeyName, DefaultKey))
	default:
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNoContent {
		if len(body) != 0 {
			t.Errorf("%s %s: 204 with a body %q", method, pathQuery, body)
		}
		return resp.StatusCode, ""
	}
	var ex errorXML
	if err := xml.Unmarshal(body, &ex); err != nil || ex.Code != resp.StatusCode {
		t.Errorf("%s %s: status %d with body %q, want an <Error> with that code", method, pathQuery, resp.StatusCode, body)
	}
	return resp.StatusCode, ex.Detail
}

func (e *faultEnv) mustNoContent(t *testing.T, method, pathQuery string) {
	t.Helper()
	if code, detail := e.do(t, method, pathQuery, ""); code != http.StatusNoContent {
		t.Fatalf("%s %s = %d %s, want 204", method, pathQuery, code, detail)
	}
}

func peekBusy(ns *broker.Namespace, entity string) bool {
	_, err := ns.Peek(entity, 0, 1)
	return errors.Is(err, broker.ErrServerBusy)
}

func TestFaultsServerBusyOps(t *testing.T) {
	f := &fakeFaults{}
	e := newFaultEnv(t, f)
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/server-busy?entity=q1&ops=2")
	for i := range 2 {
		if err := e.ns.Send("q1", &goamqp.Message{Data: [][]byte{[]byte("x")}}); !errors.Is(err, broker.ErrServerBusy) {
			t.Fatalf("send %d: %v, want server busy", i, err)
		}
	}
	if err := e.ns.Send("q1", &goamqp.Message{Data: [][]byte{[]byte("x")}}); err != nil {
		t.Fatalf("third send: %v", err)
	}
	// A subscription path and a case-insensitive prefix work too.
	e.mustNoContent(t, http.MethodPost, "/$Emulator/Faults/Server-Busy?entity=t1/Subscriptions/s1&ops=1&api-version=2021-05")
	if !peekBusy(e.ns, "t1/Subscriptions/s1") || peekBusy(e.ns, "t1/Subscriptions/s1") {
		t.Fatal("subscription: want exactly one busy peek")
	}
	if peekBusy(e.ns, "q1") {
		t.Fatal("q1 still busy")
	}
}

func TestFaultsServerBusySpanAndClear(t *testing.T) {
	f := &fakeFaults{}
	e := newFaultEnv(t, f)
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/server-busy?entity=q1&for=1h")
	for range 3 {
		if !peekBusy(e.ns, "q1") {
			t.Fatal("peek inside the busy span succeeded")
		}
	}
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/latency?d=300ms")
	e.mustNoContent(t, http.MethodDelete, "/$emulator/faults")
	if peekBusy(e.ns, "q1") {
		t.Fatal("q1 busy after DELETE /$emulator/faults")
	}
	if _, lat := f.calls(); len(lat) != 2 || lat[0] != 300*time.Millisecond || lat[1] != 0 {
		t.Fatalf("latency calls = %v, want [300ms 0]", lat)
	}

	// A short span ends by itself.
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/server-busy?entity=q1&for=50ms")
	if !peekBusy(e.ns, "q1") {
		t.Fatal("peek inside a 50ms span succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for peekBusy(e.ns, "q1") {
		if time.Now().After(deadline) {
			t.Fatal("the 50ms busy span did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFaultsExpireLocks(t *testing.T) {
	e := newFaultEnv(t, nil) // needs no AMQP hook
	if err := e.ns.Send("q1", &goamqp.Message{Data: [][]byte{[]byte("x")}}); err != nil {
		t.Fatal(err)
	}
	c, err := e.ns.NewConsumer(context.Background(), "q1", broker.ConsumerOptions{Mode: broker.PeekLock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, ok := c.Next()
	if !ok {
		t.Fatal("no message")
	}
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/expire-locks?entity=Q1")
	if err := e.ns.Complete(d.LockToken); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("complete after expire-locks: %v, want lock lost", err)
	}
	again, ok := c.Next()
	if !ok || again.SequenceNumber != d.SequenceNumber {
		t.Fatalf("redelivery: %v %+v", ok, again)
	}
}

func TestFaultsDropConnectionsAndLatency(t *testing.T) {
	f := &fakeFaults{}
	e := newFaultEnv(t, f)
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/drop-connections")
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/drop-connections/")
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/latency?d=1.5s")
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/latency?d=0")
	drops, lat := f.calls()
	if drops != 2 || len(lat) != 2 || lat[0] != 1500*time.Millisecond || lat[1] != 0 {
		t.Fatalf("drops = %d, latencies = %v; want 2, [1.5s 0]", drops, lat)
	}
}

func TestFaultsWithoutHook(t *testing.T) {
	e := newFaultEnv(t, nil)
	for _, pq := range []string{"/$emulator/faults/drop-connections", "/$emulator/faults/latency?d=10ms"} {
		code, detail := e.do(t, http.MethodPost, pq, "")
		if code != http.StatusNotImplemented || !strings.Contains(detail, "needs the AMQP server") {
			t.Errorf("POST %s without a hook = %d %q, want 501", pq, code, detail)
		}
	}
	// Broker-level faults and clearing still work.
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/server-busy?entity=q1&ops=1")
	e.mustNoContent(t, http.MethodDelete, "/$emulator/faults")
	if peekBusy(e.ns, "q1") {
		t.Fatal("q1 busy after DELETE")
	}
}

func TestFaultsErrors(t *testing.T) {
	f := &fakeFaults{}
	e := newFaultEnv(t, f)
	for _, tt := range []struct {
		method, pathQuery string
		code              int
		detail            string // substring
	}{
		{"POST", "/$emulator/faults/server-busy?ops=1", 400, "entity: missing"},
		{"POST", "/$emulator/faults/server-busy?entity=q1", 400, "ops, for"},
		{"POST", "/$emulator/faults/server-busy?entity=q1&ops=0&for=0s", 400, "ops, for"},
		{"POST", "/$emulator/faults/server-busy?entity=q1&ops=x", 400, `ops: "x"`},
		{"POST", "/$emulator/faults/server-busy?entity=q1&ops=-1", 400, `ops: "-1"`},
		{"POST", "/$emulator/faults/server-busy?entity=q1&for=30", 400, `for: "30"`},
		{"POST", "/$emulator/faults/server-busy?entity=q1&for=-1s", 400, `for: "-1s"`},
		{"POST", "/$emulator/faults/server-busy?entity=q1&op=3", 400, `unknown parameter "op"`},
		{"POST", "/$emulator/faults/server-busy?entity=nope&ops=1", 404, `entity: "nope" does not exist`},
		{"POST", "/$emulator/faults/server-busy?entity=t1/Subscriptions/nope&ops=1", 404, "does not exist"},
		{"POST", "/$emulator/faults/expire-locks", 400, "entity: missing"},
		{"POST", "/$emulator/faults/expire-locks?entity=nope", 404, "does not exist"},
		{"POST", "/$emulator/faults/drop-connections?now=1", 400, `unknown parameter "now"`},
		{"POST", "/$emulator/faults/latency", 400, "d: missing"},
		{"POST", "/$emulator/faults/latency?d=fast", 400, `d: "fast"`},
		{"POST", "/$emulator/faults/latency?d=-5ms", 400, `d: "-5ms"`},
		{"POST", "/$emulator/faults/latency?d=1s&x=1", 400, `unknown parameter "x"`},
		{"POST", "/$emulator/faults/latency?d=%zz", 400, "malformed"},
		{"POST", "/$emulator/faults/partition", 404, "unknown fault"},
		{"GET", "/$emulator/faults/server-busy?entity=q1&ops=1", 405, "GET"},
		{"POST", "/$emulator/faults", 405, "POST"},
		{"GET", "/$emulator/faults", 405, "GET"},
		{"DELETE", "/$emulator/faults/latency?d=1s", 405, "DELETE"},
		{"DELETE", "/$emulator/faults?all=1", 400, `unknown parameter "all"`},
		{"POST", "/$emulator/faultsx", 404, "unknown resource"},
	} {
		code, detail := e.do(t, tt.method, tt.pathQuery, "")
		if code != tt.code || !strings.Contains(detail, tt.detail) {
			t.Errorf("%s %s = %d %q, want %d containing %q", tt.method, tt.pathQuery, code, detail, tt.code, tt.detail)
		}
	}
	if drops, lat := f.calls(); drops != 0 || len(lat) != 0 {
		t.Errorf("failed requests reached the hook: %d drops, latencies %v", drops, lat)
	}
	if peekBusy(e.ns, "q1") {
		t.Error("a failed request injected a fault")
	}
}

func TestFaultsNeedAuthorization(t *testing.T) {
	f := &fakeFaults{}
	e := newFaultEnv(t, f)
	wrongKey := sign(t, e.srv.URL+"/$emulator/faults/drop-connections", DefaultKeyName, "not-the-key")
	for _, auth := range []string{"none", wrongKey} {
		for _, rq := range []struct{ method, pathQuery string }{
			{"POST", "/$emulator/faults/server-busy?entity=q1&ops=5"},
			{"POST", "/$emulator/faults/expire-locks?entity=q1"},
			{"POST", "/$emulator/faults/drop-connections"},
			{"POST", "/$emulator/faults/latency?d=1s"},
			{"DELETE", "/$emulator/faults"},
		} {
			if code, _ := e.do(t, rq.method, rq.pathQuery, auth); code != http.StatusUnauthorized {
				t.Errorf("%s %s with auth %.20q = %d, want 401", rq.method, rq.pathQuery, auth, code)
			}
		}
	}
	if drops, lat := f.calls(); drops != 0 || len(lat) != 0 {
		t.Errorf("unauthorized requests reached the hook: %d drops, latencies %v", drops, lat)
	}
	if peekBusy(e.ns, "q1") {
		t.Error("an unauthorized request injected a fault")
	}
}
