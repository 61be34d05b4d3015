package emulator_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/config"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// wsClient is an SDK client whose every AMQP connection is a WebSocket to
// the emulator's /$servicebus/websocket, offering subprotocol. hosts gets
// the host the SDK asked for on each dial.
func wsClient(t *testing.T, emu *emulator.Emulator, subprotocol string, hosts chan<- string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(emu.ConnectionString(), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 3, RetryDelay: 20 * time.Millisecond},
		NewWebSocketConn: func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			if hosts != nil {
				select {
				case hosts <- args.Host:
				default:
				}
			}
			ws, _, err := websocket.Dial(ctx, emu.WebSocketURL(), &websocket.DialOptions{Subprotocols: []string{subprotocol}})
			if err != nil {
				return nil, err
			}
			return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func wsQueueEmulator(t *testing.T) *emulator.Emulator {
	t.Helper()
	return emulatortest.Start(t, emulator.Config{Entities: &config.Config{UserConfig: config.UserConfig{
		Namespaces: []config.Namespace{{Name: "sbemulatorns", Queues: []config.Queue{{Name: "orders",
			Properties: config.QueueProperties{MaxDeliveryCount: 10, LockDuration: config.Duration(time.Minute)}}}}}}}})
}

// TestWebSocketServesTheSDK: the real SDK, with NewWebSocketConn, sends,
// receives, completes, dead-letters and peeks the DLQ through
// /$servicebus/websocket alone (no TCP connection reaches the AMQP
// listener), and Stats count those operations as over TCP.
func TestWebSocketServesTheSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	emu := wsQueueEmulator(t)
	hosts := make(chan string, 1)
	c := wsClient(t, emu, "AMQPWSB10", hosts)

	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, body := range []string{"one", "two"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
			t.Fatalf("send over websockets: %v", err)
		}
	}
	r, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	var got []*azservicebus.ReceivedMessage
	for len(got) < 2 {
		msgs, err := r.ReceiveMessages(ctx, 2-len(got), nil)
		if err != nil {
			t.Fatalf("receive over websockets: %v", err)
		}
		got = append(got, msgs...)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := r.DeadLetterMessage(ctx, got[1], &azservicebus.DeadLetterOptions{Reason: to.Ptr("Poison")}); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	dlq, err := c.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close(ctx)
	peeked, err := dlq.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatalf("peek the DLQ over websockets: %v", err)
	}
	if len(peeked) != 1 || string(peeked[0].Body) != string(got[1].Body) || peeked[0].DeadLetterReason == nil || *peeked[0].DeadLetterReason != "Poison" {
		t.Fatalf("peeked %d messages from the DLQ, want the dead-lettered %q with reason Poison", len(peeked), got[1].Body)
	}

	if h := <-hosts; h != "wss://"+emu.AMQPAddr().String()+"/$servicebus/websocket" {
		t.Errorf("the SDK asked for %q, want wss://<endpoint>/$servicebus/websocket", h)
	}
	conns := emu.Connections()
	if conns.TCP != 0 || conns.WebSocket < 1 || conns.Open < 1 {
		t.Errorf("Connections() = %+v, want only websocket connections, one open at least", conns)
	}
	st := emu.Stats()
	if q := st.Entity("orders"); q.Send != 2 || q.Receive != 2 || q.Settle != 2 {
		t.Errorf("Stats of orders: %d sent, %d received, %d settled; want 2, 2, 2", q.Send, q.Receive, q.Settle)
	}
	if d := st.Entity("orders/$DeadLetterQueue"); d.Peek != 1 || d.PeekedMessages != 1 {
		t.Errorf("Stats of the DLQ: %d peeks of %d messages, want 1 of 1", d.Peek, d.PeekedMessages)
	}
}

// TestWebSocketSubprotocols: "amqp" (the name the Go SDK's example offers)
// is accepted like AMQPWSB10, and the path with a trailing slash like
// without; another subprotocol, none, or a plain GET are refused with an
// HTTP error that names the one to use.
func TestWebSocketSubprotocols(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	emu := wsQueueEmulator(t)

	c := wsClient(t, emu, "amqp", nil)
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatalf("send with subprotocol amqp: %v", err)
	}
	s.Close(ctx)

	for _, tc := range []struct {
		name     string
		protos   []string
		wantCode int
		wantText string
	}{
		{"another subprotocol", []string{"mqtt"}, http.StatusBadRequest, "unsupported WebSocket subprotocol mqtt"},
		{"none", nil, http.StatusBadRequest, "needs the subprotocol AMQPWSB10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, resp, err := websocket.Dial(ctx, emu.WebSocketURL(), &websocket.DialOptions{Subprotocols: tc.protos})
			if err == nil {
				ws.CloseNow()
				t.Fatal("dial succeeded, want a refusal")
			}
			if resp == nil || resp.StatusCode != tc.wantCode {
				t.Fatalf("dial: %v (response %v), want HTTP %d", err, resp, tc.wantCode)
			}
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), tc.wantText) {
				t.Errorf("refusal body %q, want it to contain %q", body, tc.wantText)
			}
		})
	}

	// uamqp (the Python SDK up to 7.8) asks for the path with a trailing
	// slash; Azure serves it too.
	ws, _, err := websocket.Dial(ctx, emu.WebSocketURL()+"/", &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}})
	if err != nil {
		t.Fatalf("dial %s/: %v", emu.WebSocketURL(), err)
	}
	ws.CloseNow()

	resp, err := http.Get(emu.AdminURL() + "/$servicebus/websocket")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), "AMQPWSB10") {
		t.Errorf("plain GET: %d %q, want 426 naming AMQPWSB10", resp.StatusCode, body)
	}
	// The server counts a connection when its handler takes it over, which
	// may be just after the client's Dial has returned (the 101 is written
	// first): wait for the count rather than read it once (CI saw 1).
	deadline := time.Now().Add(5 * time.Second)
	n := emu.Connections().WebSocket
	for n < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = emu.Connections().WebSocket
	}
	if n != 2 {
		t.Errorf("%d websocket connections served, want 2 (the refusals are not connections)", n)
	}
}

// TestWebSocketFaultsAndClose: DropConnections drops websocket connections
// (the SDK reconnects on a new one), latency delays their replies, and
// Close ends them.
func TestWebSocketFaultsAndClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	emu := wsQueueEmulator(t)
	c := wsClient(t, emu, "AMQPWSB10", nil)
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("before")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := emu.Connections().WebSocket; n != 1 {
		t.Fatalf("%d websocket connections before the drop, want 1", n)
	}

	emu.DropConnections()
	deadline := time.Now().Add(5 * time.Second)
	for emu.Connections().Open != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := emu.Connections().Open; n != 0 {
		t.Fatalf("%d connections open after DropConnections, want 0", n)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("after")}, nil); err != nil {
		t.Fatalf("send after the drop: %v", err)
	}
	if n := emu.Connections().WebSocket; n != 2 {
		t.Errorf("%d websocket connections after the drop, want 2 (the SDK reconnected)", n)
	}

	const latency = 300 * time.Millisecond
	emu.SetLatency(latency)
	start := time.Now()
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("slow")}, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < latency {
		t.Errorf("a send under %v of latency took %v", latency, d)
	}
	emu.SetLatency(0)

	// A raw websocket connection, mid-handshake from the server's view (it
	// sent nothing): Close must end it too, promptly.
	ws, _, err := websocket.Dial(ctx, emu.WebSocketURL(), &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}})
	if err != nil {
		t.Fatal(err)
	}
	raw := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	defer raw.Close()
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(raw)
		read <- err
	}()
	start = time.Now()
	if err := emu.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with websocket connections open", d)
	}
	select {
	case <-read: // ended, with EOF or a close error: either way, closed
	case <-time.After(5 * time.Second):
		t.Fatal("a websocket connection stayed open after Close")
	}
	if n := emu.Connections().Open; n != 0 {
		t.Errorf("%d connections open after Close", n)
	}
}
