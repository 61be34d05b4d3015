// Package servicebustest is the behavioural suite of package servicebus:
// one set of tests, run by servicebus's own tests against the emulator
// every time and against a real namespace when one is configured, in the
// manner of go-cloud's drivertest.
//
// The suite drives the namespace through the real azservicebus SDK and its
// admin client (creating entities, sending, dead-lettering, deferring,
// scheduling, forwarding) and checks what servicebus.Client reports against
// what was done and against what the SDK itself peeks. It creates every
// entity it uses under a random prefix and deletes them when it ends, so it
// can run against a shared namespace.
package servicebustest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/servicebus"
)

// Harness describes the namespace under test.
type Harness struct {
	// ConnectionString of the namespace; its key needs the Manage, Send and
	// Listen rights (the suite creates and deletes entities).
	ConnectionString string
	// Options are passed to servicebus.Open; AdminEndpoint is also used by
	// the suite's own admin client.
	Options servicebus.Options
	// InjectServerBusy makes the next ops AMQP operations on entity (a
	// queue or subscription path) fail with com.microsoft:server-busy, and
	// ClearFaults ends that. Nil skips the throttling cases: a real
	// namespace cannot be made to throttle on demand.
	InjectServerBusy func(entity string, ops int)
	ClearFaults      func()
	// CountTimeout bounds how long the suite waits for runtime counts to
	// show a change; Azure updates them asynchronously. 0 means 60 s.
	CountTimeout time.Duration
	// Open, when not nil, opens the Client under test instead of
	// servicebus.Open with ConnectionString (a token credential client,
	// say). The suite still drives the namespace with ConnectionString,
	// over Options.TLSConfig when that is set.
	Open func(ctx context.Context, opts servicebus.Options) (*servicebus.Client, error)
}

// fastRetries keeps failing SDK calls of the suite's own clients short.
var fastRetries = azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond}

// env is one run of the suite: the SDK clients it drives the namespace
// with and the prefix of its entities.
type env struct {
	h      Harness
	sb     *azservicebus.Client
	admin  *admin.Client
	prefix string
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	if h.CountTimeout == 0 {
		h.CountTimeout = time.Minute
	}
	sb, err := azservicebus.NewClientFromConnectionString(h.ConnectionString, &azservicebus.ClientOptions{RetryOptions: fastRetries, TLSConfig: h.Options.TLSConfig})
	if err != nil {
		t.Fatalf("suite: SDK client: %v", err)
	}
	opts := &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: 3, RetryDelay: 100 * time.Millisecond},
	}}
	if h.Options.AdminEndpoint != "" {
		u, err := url.Parse(h.Options.AdminEndpoint)
		if err != nil {
			t.Fatalf("suite: admin endpoint: %v", err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = h.Options.TLSConfig
		opts.Transport = rewrite{u, &http.Client{Transport: tr}}
	}
	adm, err := admin.NewClientFromConnectionString(h.ConnectionString, opts)
	if err != nil {
		t.Fatalf("suite: admin client: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sb.Close(ctx)
	})
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &env{h: h, sb: sb, admin: adm, prefix: "dlqdashtest-" + hex.EncodeToString(b[:])}
}

// rewrite sends the admin client's https://<namespace>/ requests to the
// harness's admin endpoint (docs/servicebus-protocol.md §12.3).
type rewrite struct {
	base   *url.URL
	client *http.Client
}

func (r rewrite) Do(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host, out.Host = r.base.Scheme, r.base.Host, ""
	return r.client.Do(out)
}

// ctx is a test context with a deadline generous enough for a real
// namespace.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// name is a unique entity name for this run.
func (e *env) name(t *testing.T, base string) string {
	t.Helper()
	return e.prefix + "-" + strings.ToLower(base)
}

// open opens the Client under test and closes it when the test ends.
func (e *env) open(t *testing.T) *servicebus.Client {
	t.Helper()
	c, err := e.openClient(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func (e *env) createQueue(t *testing.T, base string, p *admin.QueueProperties) string {
	t.Helper()
	name := e.name(t, base)
	if _, err := e.admin.CreateQueue(testCtx(t), name, &admin.CreateQueueOptions{Properties: p}); err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = e.admin.DeleteQueue(ctx, name, nil)
	})
	return name
}

func (e *env) createTopic(t *testing.T, base string, p *admin.TopicProperties) string {
	t.Helper()
	name := e.name(t, base)
	if _, err := e.admin.CreateTopic(testCtx(t), name, &admin.CreateTopicOptions{Properties: p}); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = e.admin.DeleteTopic(ctx, name, nil)
	})
	return name
}

// createSubscription creates a subscription (deleted with its topic) and
// returns its path.
func (e *env) createSubscription(t *testing.T, topic, name string, p *admin.SubscriptionProperties) string {
	t.Helper()
	if _, err := e.admin.CreateSubscription(testCtx(t), topic, name, &admin.CreateSubscriptionOptions{Properties: p}); err != nil {
		t.Fatalf("create subscription %s/%s: %v", topic, name, err)
	}
	return topic + "/Subscriptions/" + name
}

func (e *env) send(t *testing.T, entity string, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := e.sb.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("new sender %s: %v", entity, err)
	}
	defer s.Close(context.Background())
	for _, m := range msgs {
		if err := s.SendMessage(testCtx(t), m, nil); err != nil {
			t.Fatalf("send to %s: %v", entity, err)
		}
	}
}

func (e *env) sendAMQP(t *testing.T, entity string, msgs ...*azservicebus.AMQPAnnotatedMessage) {
	t.Helper()
	s, err := e.sb.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("new sender %s: %v", entity, err)
	}
	defer s.Close(context.Background())
	for _, m := range msgs {
		if err := s.SendAMQPAnnotatedMessage(testCtx(t), m, nil); err != nil {
			t.Fatalf("send to %s: %v", entity, err)
		}
	}
}

// schedule schedules msgs on entity an hour from now and returns their
// sequence numbers.
func (e *env) schedule(t *testing.T, entity string, msgs ...*azservicebus.Message) []int64 {
	t.Helper()
	s, err := e.sb.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("new sender %s: %v", entity, err)
	}
	defer s.Close(context.Background())
	seqs, err := s.ScheduleMessages(testCtx(t), msgs, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatalf("schedule on %s: %v", entity, err)
	}
	return seqs
}

// receiver opens a peek-lock receiver on a queue or subscription path.
func (e *env) receiver(t *testing.T, entity string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	var r *azservicebus.Receiver
	var err error
	if topic, sub, ok := strings.Cut(entity, "/Subscriptions/"); ok {
		r, err = e.sb.NewReceiverForSubscription(topic, sub, opts)
	} else {
		r, err = e.sb.NewReceiverForQueue(entity, opts)
	}
	if err != nil {
		t.Fatalf("new receiver %s: %v", entity, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receive receives exactly n messages (peek-lock).
func receive(t *testing.T, r messageReceiver, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx := testCtx(t)
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("receive: got %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, msgs...)
	}
	return out
}

// deadLetter receives n messages from entity and dead-letters them with
// reason and description, returning them in receive order.
func (e *env) deadLetter(t *testing.T, entity string, n int, reason, description string) []*azservicebus.ReceivedMessage {
	t.Helper()
	r := e.receiver(t, entity, nil)
	msgs := receive(t, r, n)
	for _, m := range msgs {
		if err := r.DeadLetterMessage(testCtx(t), m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &description}); err != nil {
			t.Fatalf("dead-letter on %s: %v", entity, err)
		}
	}
	return msgs
}

// sdkPeek peeks with the SDK itself, for comparison.
func (e *env) sdkPeek(t *testing.T, entity string, sub azservicebus.SubQueue, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	r := e.receiver(t, entity, &azservicebus.ReceiverOptions{SubQueue: sub})
	var from int64
	msgs, err := r.PeekMessages(testCtx(t), n, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil {
		t.Fatalf("SDK peek of %s: %v", entity, err)
	}
	return msgs
}

// waitFor polls cond until it holds or timeout passes; the message says
// what was last seen.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	delay := 10 * time.Millisecond
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(delay) // polling real I/O; nothing to wait on
		delay = min(2*delay, 500*time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// openClient opens a Client under test with Harness.Open, or
// servicebus.Open.
func (e *env) openClient(ctx context.Context) (*servicebus.Client, error) {
	if e.h.Open != nil {
		return e.h.Open(ctx, e.h.Options)
	}
	return servicebus.Open(ctx, e.h.ConnectionString, e.h.Options)
}
