package amqpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

// testEnv is one emulator on 127.0.0.1:0 plus an SDK client connected to it.
type testEnv struct {
	srv    *amqpserver.Server
	ns     *broker.Namespace
	client *azservicebus.Client
	conn   string
}

func testLogger() *slog.Logger {
	if os.Getenv("EMULATOR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fastRetries keeps failing operations quick in tests.
var fastRetries = azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}

// startEmulator starts a server, lets setup create entities through the broker API and
// connects an SDK client. Everything is closed when the test ends.
func startEmulator(tb testing.TB, setup func(ns *broker.Namespace)) *testEnv {
	tb.Helper()
	srv := amqpserver.New(amqpserver.Options{Logger: testLogger(), TickInterval: 20 * time.Millisecond})
	if setup != nil {
		setup(srv.Namespace())
	}
	connStr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		tb.Fatalf("start emulator: %v", err)
	}
	client := newClient(tb, connStr)
	env := &testEnv{srv: srv, ns: srv.Namespace(), client: client, conn: connStr}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Close(ctx)
		if err := srv.Close(); err != nil {
			tb.Errorf("close emulator: %v", err)
		}
	})
	return env
}

func newClient(tb testing.TB, connStr string) *azservicebus.Client {
	tb.Helper()
	client, err := azservicebus.NewClientFromConnectionString(connStr, &azservicebus.ClientOptions{RetryOptions: fastRetries})
	if err != nil {
		tb.Fatalf("new client: %v", err)
	}
	return client
}

func createQueue(tb testing.TB, ns *broker.Namespace, name string, edit func(p *broker.QueueProperties)) {
	tb.Helper()
	p := broker.DefaultQueueProperties()
	if edit != nil {
		edit(&p)
	}
	if _, err := ns.CreateQueue(name, p); err != nil {
		tb.Fatalf("create queue %s: %v", name, err)
	}
}

func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func (e *testEnv) sender(tb testing.TB, entity string) *azservicebus.Sender {
	tb.Helper()
	s, err := e.client.NewSender(entity, nil)
	if err != nil {
		tb.Fatalf("new sender: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func (e *testEnv) receiver(tb testing.TB, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	tb.Helper()
	r, err := e.client.NewReceiverForQueue(queue, opts)
	if err != nil {
		tb.Fatalf("new receiver: %v", err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func send(tb testing.TB, ctx context.Context, s *azservicebus.Sender, msgs ...*azservicebus.Message) {
	tb.Helper()
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			tb.Fatalf("send: %v", err)
		}
	}
}

type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receiveN receives until n messages arrived or the deadline passes.
func receiveN(tb testing.TB, r messageReceiver, n int) []*azservicebus.ReceivedMessage {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			tb.Fatalf("receive: got %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, msgs...)
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func sbCode(err error) azservicebus.Code {
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		return sbErr.Code
	}
	return ""
}

func strPtr(s string) *string { return &s }

// dialSession connects go-amqp to the emulator (SASL ANONYMOUS) and begins
// one session; the connection closes when the test ends.
func dialSession(tb testing.TB, ctx context.Context, env *testEnv) *goamqp.Session {
	tb.Helper()
	conn, err := goamqp.Dial(ctx, "amqp://"+env.srv.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return sess
}
