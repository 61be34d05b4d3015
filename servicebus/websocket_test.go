package servicebus_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/servicebustest"
)

// TestEmulatorWebSockets runs the whole suite with the adapter's AMQP over
// WebSockets (the suite's own seeding clients use TCP).
func TestEmulatorWebSockets(t *testing.T) {
	emu := startEmulator(t)
	ns := emu.srv.Namespace()
	servicebustest.Run(t, servicebustest.Harness{
		ConnectionString: emu.connStr,
		Options:          servicebus.Options{AdminEndpoint: emu.adminURL, Transport: servicebus.TransportWebSockets, Logger: testLogger()},
		InjectServerBusy: func(entity string, ops int) { ns.InjectServerBusy(entity, ops, time.Time{}) },
		ClearFaults:      ns.ClearFaults,
		CountTimeout:     10 * time.Second,
	})
	if c := emu.srv.Connections(); c.WebSocket == 0 {
		t.Errorf("Connections() = %+v: the adapter never used the websocket endpoint", c)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestWebSocketsOnly: with a connection string whose endpoint is a closed
// port and the emulator's HTTP listener as the custom endpoint, the adapter
// lists entities, peeks a DLQ, receives and completes, and sends: all of it
// over the websocket endpoint, none over TCP.
func TestWebSocketsOnly(t *testing.T) {
	emu := startEmulator(t)
	ns := emu.srv.Namespace()
	props := broker.DefaultQueueProperties()
	props.LockDuration = time.Minute
	if _, err := ns.CreateQueue("orders", props); err != nil {
		t.Fatal(err)
	}
	emulatortest.FillDLQ(t, ns, "orders", 3, 32, nil)

	conn := "Endpoint=sb://" + freePort(t) + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
	c, err := servicebus.Open(t.Context(), conn, servicebus.Options{
		Transport:      servicebus.TransportWebSockets,
		CustomEndpoint: emu.adminURL, // http://127.0.0.1:PORT: ws:// and the admin API
		Logger:         testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	ents, err := c.Entities(ctx)
	if err != nil {
		t.Fatalf("Entities over the custom endpoint: %v", err)
	}
	if len(ents) != 1 || ents[0].Path != "orders" || ents[0].Counts.DeadLetter != 3 {
		t.Fatalf("Entities = %+v, want orders with 3 dead-lettered", ents)
	}
	msgs, err := c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	if err != nil {
		t.Fatalf("Peek over websockets: %v", err)
	}
	if len(msgs) != 3 || msgs[0].MessageID != "msg-0" {
		t.Fatalf("peeked %d messages (first %+v), want msg-0..msg-2", len(msgs), msgs)
	}

	r, err := c.OpenReceiver(ctx, "orders", dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	var got []*replay.Received
	for len(got) < 3 {
		more, err := r.Receive(ctx, 3-len(got), time.Second)
		if err != nil {
			t.Fatalf("Receive over websockets: %v", err)
		}
		got = append(got, more...)
	}
	s, err := c.OpenSender(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "msg-0-replayed"}}); err != nil {
		t.Fatalf("Send over websockets: %v", err)
	}
	if err := r.Complete(ctx, got[0]); err != nil {
		t.Fatalf("Complete over websockets: %v", err)
	}
	if err := r.Release(ctx, got[1:]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	msgs, err = c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("after the complete: peeked %d messages, %v; want 2", len(msgs), err)
	}
	active, err := c.Peek(ctx, "orders", dlq.SubQueueMain, 0, 10)
	if err != nil || len(active) != 1 || active[0].MessageID != "msg-0-replayed" {
		t.Fatalf("the queue after the send: %d messages, %v; want msg-0-replayed", len(active), err)
	}

	conns := emu.srv.Connections()
	if conns.TCP != 0 || conns.WebSocket == 0 {
		t.Errorf("Connections() = %+v, want websocket connections only", conns)
	}
	st := emu.srv.Stats()
	if q := st.Entity("orders"); q.Send != 1 { // FillDLQ seeds the broker directly, uncounted
		t.Errorf("Stats of orders: %d sends, want 1", q.Send)
	}
	if d := st.Entity("orders/$DeadLetterQueue"); d.Receive != 3 || d.Settle != 3 { // a complete, two abandons
		t.Errorf("Stats of the DLQ: %d received, %d settled; want 3 and 3", d.Receive, d.Settle)
	}
}

// TestWebSocketsRefused: a server that refuses the upgrade, or accepts it
// without the AMQPWSB10 subprotocol, is an error that says so; the emulator
// itself refuses other subprotocols (emulator/websocket_test.go).
func TestWebSocketsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"refused", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "unsupported WebSocket subprotocol "+r.Header.Get("Sec-WebSocket-Protocol"), http.StatusBadRequest)
		}, "HTTP 400 Bad Request: unsupported WebSocket subprotocol AMQPWSB10"},
		{"no subprotocol", func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"mqtt"}})
			if err != nil {
				return
			}
			defer ws.CloseNow()
			_, _, _ = ws.Read(r.Context())
		}, "did not accept the subprotocol AMQPWSB10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.Path
				tc.handler(w, r)
			}))
			defer srv.Close()
			conn := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;UseDevelopmentEmulator=true", freePort(t))
			c, err := servicebus.Open(t.Context(), conn, servicebus.Options{
				Transport: servicebus.TransportWebSockets, CustomEndpoint: srv.URL, Logger: testLogger(),
				Retry: servicebus.Retry{MaxRetries: -1},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err = c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Peek: %v, want an error saying %q", err, tc.want)
			}
			if path != "/$servicebus/websocket" {
				t.Errorf("the adapter asked for %q, want /$servicebus/websocket", path)
			}
			t.Logf("Peek: %v", err)
		})
	}
}

// TestTransportOptions: what Open accepts and refuses.
func TestTransportOptions(t *testing.T) {
	const emu = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;UseDevelopmentEmulator=true"
	for _, tc := range []struct {
		opts servicebus.Options
		want string // "" for accepted
	}{
		{servicebus.Options{}, ""},
		{servicebus.Options{Transport: "amqp"}, ""},
		{servicebus.Options{Transport: "websockets"}, ""},
		{servicebus.Options{Transport: "websocket"}, `transport "websocket": want amqp or websockets`},
		{servicebus.Options{CustomEndpoint: "10.0.0.4:5671"}, ""},
		{servicebus.Options{CustomEndpoint: "amqps://10.0.0.4"}, ""},
		{servicebus.Options{CustomEndpoint: "https://10.0.0.4"}, "is an HTTP address but the transport is amqp"},
		{servicebus.Options{Transport: "websockets", CustomEndpoint: "https://gw.example.com"}, ""},
		{servicebus.Options{Transport: "websockets", CustomEndpoint: "gw.example.com:8443"}, ""},
		{servicebus.Options{Transport: "websockets", CustomEndpoint: "amqps://10.0.0.4"}, "is an AMQP address but the transport is websockets"},
		{servicebus.Options{Transport: "websockets", CustomEndpoint: "https://gw.example.com/some/path"}, "want host[:port], or https://host[:port]"},
		{servicebus.Options{Transport: "websockets", CustomEndpoint: "ftp://gw.example.com"}, "want host[:port]"},
	} {
		c, err := servicebus.Open(t.Context(), emu, tc.opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Open(%+v): %v", tc.opts, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Open(%+v): %v, want an error saying %q", tc.opts, err, tc.want)
		}
		if c != nil {
			c.Close(context.Background())
		}
	}
}
