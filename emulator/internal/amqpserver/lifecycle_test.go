package amqpserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

func TestHeartbeatsAndIdleTimeout(t *testing.T) {
	srv := amqpserver.New(amqpserver.Options{Logger: testLogger(), HeartbeatInterval: 50 * time.Millisecond})
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	env := &testEnv{srv: srv, ns: srv.Namespace()}
	c := dialRaw(t, env)
	c.handshake(false)
	c.writeFrame(0, &amqp.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 65535})
	o, ok := c.readFrame().Body.(*amqp.Open)
	if !ok || o.IdleTimeout <= 0 || o.ChannelMax == 0 || o.MaxFrameSize < 512 {
		t.Fatalf("server open %+v", o)
	}
	// Empty frames arrive although the client sends nothing...
	for range 3 {
		if f := c.readFrame(); f.Body != nil {
			t.Fatalf("expected an empty frame, got %T", f.Body)
		}
	}
	// ...and a client that stays silent is hung up on after twice the idle time-out.
	start := time.Now()
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			break
		}
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("silent client kept for %v", waited)
	}
}

func TestDropConnectionsRecovers(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("before")})
	env.srv.DropConnections()
	// The SDK reconnects (its retry covers the forced close).
	waitFor(t, "send after drop", func() bool {
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte("after")}, nil) == nil
	})
	r := env.receiver(t, "q1", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if len(receiveN(t, r, 2)) != 2 {
		t.Fatal("messages lost")
	}
}

func TestSetLatency(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("warm")})
	env.srv.SetLatency(150 * time.Millisecond)
	start := time.Now()
	send(t, ctx, s, &azservicebus.Message{Body: []byte("slow")})
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("send took %v with 150ms latency", d)
	}
	env.srv.SetLatency(0)
}

func TestQueueDeletedDetachesReceiver(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	r := env.receiver(t, "q1", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := r.ReceiveMessages(ctx, 10, nil)
		errc <- err
	}()
	// Let the link attach: peek works once the receiver's links exist.
	waitFor(t, "receiver link", func() bool {
		_, err := r.PeekMessages(ctx, 1, nil)
		return err == nil
	})
	if err := env.ns.DeleteQueue("q1"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
			t.Fatalf("ReceiveMessages after the queue was deleted: %v, want amqp:not-found", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReceiveMessages still blocked after the queue was deleted")
	}
}

// TestRawDrain drives a manual-credit go-amqp receiver: drain must be answered at once.
func TestRawDrain(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("one")})
	sess := dialSession(t, ctx, env)
	rcv, err := sess.NewReceiver(ctx, "q1", &goamqp.ReceiverOptions{Credit: -1, SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil || string(m.GetData()) != "one" {
		t.Fatalf("receive: %v %v", m, err)
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatalf("accept: %v", err)
	}
	// Four credits are left and the queue is empty: the drain must be answered at once.
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rcv.DrainCredit(dctx, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	// An attach to a missing entity is refused with amqp:not-found.
	_, err = sess.NewReceiver(ctx, "missing", nil)
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
		t.Fatalf("attach to a missing queue: %v", err)
	}
}

// TestCloseWithOpenConnections: Close must end every connection goroutine, including
// deliverers blocked on an empty queue and a session accept waiting for a session.
func TestCloseWithOpenConnections(t *testing.T) {
	srv := amqpserver.New(amqpserver.Options{Logger: testLogger()})
	createQueue(t, srv.Namespace(), "q1", nil)
	createQueue(t, srv.Namespace(), "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for range 3 {
		conn, err := goamqp.Dial(ctx, "amqp://"+srv.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.NewReceiver(ctx, "q1", &goamqp.ReceiverOptions{Credit: 10}); err != nil {
			t.Fatal(err)
		}
		go func() {
			// An accept-next that can never succeed: it blocks in the broker until Close.
			_, _ = sess.NewReceiver(ctx, "sq", &goamqp.ReceiverOptions{Filters: []goamqp.LinkFilter{
				goamqp.NewLinkFilter("com.microsoft:session-filter", 0x00000137000000C, nil)}})
		}()
	}
	// Also a connection that never finishes its handshake.
	raw := dialRaw(t, &testEnv{srv: srv})
	raw.write([]byte("AM"))

	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestHeartbeatFollowsPeerIdleTimeout: a peer with a short idle-time-out gets
// keep-alives at half of it even though the server's default is 15 s.
func TestHeartbeatFollowsPeerIdleTimeout(t *testing.T) {
	env := startEmulator(t, nil)
	c := dialRaw(t, env)
	c.handshake(false)
	c.writeFrame(0, &amqp.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 65535, IdleTimeout: 400 * time.Millisecond})
	if _, ok := c.readFrame().Body.(*amqp.Open); !ok {
		t.Fatal("no open")
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	for range 2 {
		if f := c.readFrame(); f.Body != nil {
			t.Fatalf("expected an empty frame, got %T", f.Body)
		}
	}
}

// TestServeConn: a connection handed in (as the WebSocket endpoint does)
// is served like an accepted one and counted by its transport; before
// Start and after Close it is refused and closed.
func TestServeConn(t *testing.T) {
	before := amqpserver.New(amqpserver.Options{Logger: testLogger()})
	client, server := net.Pipe()
	if err := before.ServeConn(server, amqpserver.TransportWebSocket); !errors.Is(err, amqpserver.ErrServerClosed) {
		t.Fatalf("ServeConn before Start: %v, want ErrServerClosed", err)
	}
	if _, err := client.Write([]byte("AMQP")); err == nil {
		t.Error("a refused connection was left open")
	}

	srv := amqpserver.New(amqpserver.Options{Logger: testLogger()})
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	client, server = net.Pipe()
	served := make(chan error, 1)
	go func() { served <- srv.ServeConn(server, amqpserver.TransportWebSocket) }()
	// The server answers the SASL protocol header with its own.
	if _, err := client.Write(amqp.ProtocolHeader(amqp.ProtoSASL)); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(client, hdr); err != nil || !bytes.Equal(hdr, amqp.ProtocolHeader(amqp.ProtoSASL)) {
		t.Fatalf("protocol header answer %q, %v", hdr, err)
	}
	if got := srv.Connections(); got.WebSocket != 1 || got.TCP != 0 || got.Open != 1 {
		t.Errorf("Connections() = %+v, want one open websocket connection", got)
	}
	go io.Copy(io.Discard, client) // let the server write whatever it will while closing
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeConn of a served connection: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeConn still running after Close")
	}
	client, server = net.Pipe()
	if err := srv.ServeConn(server, amqpserver.TransportTCP); !errors.Is(err, amqpserver.ErrServerClosed) {
		t.Fatalf("ServeConn after Close: %v, want ErrServerClosed", err)
	}
	client.Close()
}
