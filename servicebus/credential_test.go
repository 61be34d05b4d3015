package servicebus_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/devcred"
	"github.com/dlqdash/dlqdash/servicebus/servicebustest"
)

var signingKey = []byte("servicebus-test-signing-key-0123456789")

// tlsEmulator runs an emulator that checks jwt tokens with signingKey over
// TLS with its generated certificate, and writes the certificate where a
// client's TLSCAFile finds it.
func tlsEmulator(t *testing.T, cfg emulator.Config) (*emulator.Emulator, string) {
	t.Helper()
	cfg.JWTKey, cfg.TLS, cfg.Logger = signingKey, &emulator.TLSConfig{}, testLogger()
	emu := emulatortest.Start(t, cfg)
	caFile := filepath.Join(t.TempDir(), "emulator-ca.pem")
	if err := os.WriteFile(caFile, emu.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return emu, caFile
}

func openWithCred(t *testing.T, s *emulator.NamespaceServer, caFile string, key []byte, name string) *servicebus.Client {
	t.Helper()
	cred, err := devcred.New(key, devcred.Options{Subject: "servicebus-test"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := servicebus.OpenWithCredential(t.Context(), s.FullyQualifiedNamespace(), cred, servicebus.Options{
		Name:          name,
		AdminEndpoint: s.AdminURL(),
		TLSCAFile:     caFile,
		Logger:        testLogger(),
		Retry:         servicebus.Retry{MaxRetries: -1},
	})
	if err != nil {
		t.Fatalf("OpenWithCredential: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// TestOpenWithCredentialOverTLS: a Client signed in with devcred reaches
// both planes over the emulator's TLS listeners, trusting the generated
// certificate from a file: the admin plane lists entities with their
// counts; the data plane peeks a DLQ, receives and completes a dead
// letter, and sends its copy back to the queue.
func TestOpenWithCredentialOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	emu, caFile := tlsEmulator(t, emulator.Config{})
	ns := emu.Namespace()
	if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	emulatortest.FillDLQ(t, ns, "orders", 3, 64, nil)
	c := openWithCred(t, emu.Servers()[0], caFile, signingKey, "prod-eu")

	ents, err := c.Entities(ctx)
	if err != nil {
		t.Fatalf("Entities: %v", err)
	}
	if len(ents) != 1 || ents[0].Path != "orders" || ents[0].Counts.DeadLetter != 3 || ents[0].Counts.Active != 0 {
		t.Fatalf("Entities = %+v, want orders with 3 dead letters", ents)
	}
	peeked, err := c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	if len(peeked) != 3 || peeked[0].MessageID != "msg-0" {
		t.Fatalf("Peek = %d messages, first %+v", len(peeked), peeked)
	}

	rcv, err := c.OpenReceiver(ctx, "orders", dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatalf("OpenReceiver: %v", err)
	}
	defer rcv.Close(ctx)
	got, err := rcv.Receive(ctx, 1, 5*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive = %v, %v", got, err)
	}
	snd, err := c.OpenSender(ctx, "orders")
	if err != nil {
		t.Fatalf("OpenSender: %v", err)
	}
	defer snd.Close(ctx)
	if err := snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "copy-of-" + got[0].MessageID}}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := rcv.Complete(ctx, got[0]); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	q, err := ns.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	if q.Counts.DeadLetter != 2 || q.Counts.Active != 1 {
		t.Errorf("after the replay of one: %d dead letters and %d active, want 2 and 1", q.Counts.DeadLetter, q.Counts.Active)
	}
}

// TestOpenWithCredentialRefused: a token signed with another key is refused
// on both planes with an error matching dlq.ErrUnauthorized that names the
// namespace and says what to check; so is a credential that cannot get a
// token at all.
func TestOpenWithCredentialRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	emu, caFile := tlsEmulator(t, emulator.Config{})
	if _, err := emu.Namespace().CreateQueue("orders", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	c := openWithCred(t, emu.Servers()[0], caFile, []byte("a-different-key-0123456789abcdefghij"), "prod-us")

	_, err := c.Entities(ctx)
	checkRefused(t, "Entities", err, "Service Bus refused the credential for prod-us", "401", "role assignment")
	_, err = c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	checkRefused(t, "Peek", err, "Service Bus refused the credential for prod-us", "signature does not match", "role assignment")

	failing, err := servicebus.OpenWithCredential(ctx, emu.Servers()[0].FullyQualifiedNamespace(), noToken{}, servicebus.Options{
		Name: "prod-us", AdminEndpoint: emu.AdminURL(), TLSCAFile: caFile, Retry: servicebus.Retry{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Close(ctx)
	_, err = failing.Entities(ctx)
	checkRefused(t, "Entities without a token", err, "could not get a token for prod-us", "no managed identity endpoint", "credential's configuration")
	_, err = failing.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	checkRefused(t, "Peek without a token", err, "could not get a token for prod-us", "no managed identity endpoint", "credential's configuration")
}

func checkRefused(t *testing.T, what string, err error, wants ...string) {
	t.Helper()
	if !errors.Is(err, dlq.ErrUnauthorized) {
		t.Errorf("%s = %v, want dlq.ErrUnauthorized", what, err)
		return
	}
	t.Logf("%s: %v", what, err)
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// noToken is a credential that cannot get a token, as a managed identity
// credential off Azure.
type noToken struct{}

func (noToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("no managed identity endpoint is available")
}

// TestTwoNamespacesIsolated: two namespaces of one emulator, each reached
// with its own credential client over TLS: a message sent in one is not in
// the other, and each lists only its own entities.
func TestTwoNamespacesIsolated(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	emu, caFile := tlsEmulator(t, emulator.Config{Namespaces: []emulator.NamespaceConfig{{Name: "prod-eu"}, {Name: "prod-us"}}})
	eu, us := emu.Server("prod-eu"), emu.Server("prod-us")
	for _, s := range []*emulator.NamespaceServer{eu, us} {
		if _, err := s.Namespace().CreateQueue("orders", broker.QueueProperties{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := us.Namespace().CreateQueue("us-only", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	ceu := openWithCred(t, eu, caFile, signingKey, "prod-eu")
	cus := openWithCred(t, us, caFile, signingKey, "prod-us")

	snd, err := cus.OpenSender(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(ctx)
	rcvUS, err := cus.OpenReceiver(ctx, "orders", dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer rcvUS.Close(ctx)
	// Send one message to prod-us (a copy needs an original: make one there).
	seed := us.Namespace()
	if err := seedOne(seed, "orders", "original"); err != nil {
		t.Fatal(err)
	}
	got, err := rcvUS.Receive(ctx, 1, 5*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive in prod-us = %v, %v", got, err)
	}
	if err := snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "sent-in-us"}}); err != nil {
		t.Fatalf("Send in prod-us: %v", err)
	}
	if err := rcvUS.Complete(ctx, got[0]); err != nil {
		t.Fatal(err)
	}

	counts := func(c *servicebus.Client) map[string]dlq.Counts {
		ents, err := c.Entities(ctx)
		if err != nil {
			t.Fatalf("Entities of %s: %v", c.Name(), err)
		}
		m := map[string]dlq.Counts{}
		for _, e := range ents {
			m[e.Path] = e.Counts
		}
		return m
	}
	euCounts, usCounts := counts(ceu), counts(cus)
	if len(euCounts) != 1 || euCounts["orders"].Active != 0 {
		t.Errorf("prod-eu entities %+v, want only an empty orders", euCounts)
	}
	if len(usCounts) != 2 || usCounts["orders"].Active != 1 {
		t.Errorf("prod-us entities %+v, want orders with the sent message and us-only", usCounts)
	}
	peekedEU, err := ceu.Peek(ctx, "orders", dlq.SubQueueMain, 0, 10)
	if err != nil || len(peekedEU) != 0 {
		t.Errorf("prod-eu orders peeks %d messages (%v), want none", len(peekedEU), err)
	}
	peekedUS, err := cus.Peek(ctx, "orders", dlq.SubQueueMain, 0, 10)
	if err != nil || len(peekedUS) != 1 || peekedUS[0].MessageID != "sent-in-us" {
		t.Errorf("prod-us orders peeks %+v (%v), want sent-in-us", peekedUS, err)
	}
}

// seedOne puts a message with id in queue directly through the broker.
func seedOne(ns *broker.Namespace, queue, id string) error {
	return ns.Send(queue, &goamqp.Message{Data: [][]byte{[]byte(`{"seed":true}`)}, Properties: &goamqp.MessageProperties{MessageID: id}})
}

// TestOpenWithCredentialChecks: what OpenWithCredential refuses before any
// I/O, and the namespace forms it takes.
func TestOpenWithCredentialChecks(t *testing.T) {
	cred, err := devcred.New(signingKey, devcred.Options{})
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, fqdn string
		cred       azcore.TokenCredential
		opts       servicebus.Options
		want       string // "" accepts; else in the error
		namespace  string
	}{
		{"host", "contoso.servicebus.windows.net", cred, servicebus.Options{}, "", "contoso.servicebus.windows.net"},
		{"sb url", "sb://contoso.servicebus.windows.net/", cred, servicebus.Options{}, "", "contoso.servicebus.windows.net"},
		{"host and port", "127.0.0.1:5671", cred, servicebus.Options{}, "", "127.0.0.1:5671"},
		{"empty", "", cred, servicebus.Options{}, "want a host", ""},
		{"path", "contoso.servicebus.windows.net/q1", cred, servicebus.Options{}, "want a host", ""},
		{"connection string", "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b", cred, servicebus.Options{}, "want a host", ""},
		{"bad port", "contoso:99999", cred, servicebus.Options{}, "want a host", ""},
		{"nil credential", "contoso.servicebus.windows.net", nil, servicebus.Options{}, "credential is nil", ""},
		{"missing CA file", "contoso.servicebus.windows.net", cred, servicebus.Options{TLSCAFile: "/nonexistent/ca.pem"}, "TLS CA file", ""},
		{"CA file without a certificate", "contoso.servicebus.windows.net", cred, servicebus.Options{TLSCAFile: notPEM}, "no PEM certificate", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := servicebus.OpenWithCredential(t.Context(), tt.fqdn, tt.cred, tt.opts)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("OpenWithCredential(%q) = %v, want an error about %q", tt.fqdn, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenWithCredential(%q) = %v", tt.fqdn, err)
			}
			defer c.Close(context.Background())
			if c.Namespace() != tt.namespace || c.Name() != tt.namespace {
				t.Errorf("Namespace, Name = %q, %q, want %q", c.Namespace(), c.Name(), tt.namespace)
			}
		})
	}
}

// TestEmulatorWithCredentialOverTLS runs the whole behavioural suite with
// the Client under test signed in with devcred, over the emulator's TLS
// listeners (the suite seeds with SAS over the same TLS).
func TestEmulatorWithCredentialOverTLS(t *testing.T) {
	emu, _ := tlsEmulator(t, emulator.Config{})
	ns := emu.Namespace()
	s := emu.Servers()[0]
	cred, err := devcred.New(signingKey, devcred.Options{})
	if err != nil {
		t.Fatal(err)
	}
	servicebustest.Run(t, servicebustest.Harness{
		ConnectionString: emu.ConnectionString(),
		Options:          servicebus.Options{AdminEndpoint: s.AdminURL(), TLSConfig: emu.ClientTLSConfig(), Logger: testLogger()},
		Open: func(ctx context.Context, opts servicebus.Options) (*servicebus.Client, error) {
			return servicebus.OpenWithCredential(ctx, s.FullyQualifiedNamespace(), cred, opts)
		},
		InjectServerBusy: func(entity string, ops int) { ns.InjectServerBusy(entity, ops, time.Time{}) },
		ClearFaults:      ns.ClearFaults,
		CountTimeout:     10 * time.Second,
	})
}

// TestOpenWithCredentialCustomEndpoint: the namespace is named by its host
// (no port, as on Azure) and the AMQP connection dials CustomEndpoint, as
// through a private endpoint; the certificate is checked against the
// namespace host.
func TestOpenWithCredentialCustomEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	emu, caFile := tlsEmulator(t, emulator.Config{})
	if _, err := emu.Namespace().CreateQueue("orders", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := seedOne(emu.Namespace(), "orders", "via-endpoint"); err != nil {
		t.Fatal(err)
	}
	cred, _ := devcred.New(signingKey, devcred.Options{})
	c, err := servicebus.OpenWithCredential(ctx, "localhost", cred, servicebus.Options{
		CustomEndpoint: emu.AMQPAddr().String(), AdminEndpoint: emu.AdminURL(), TLSCAFile: caFile, Retry: servicebus.Retry{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	got, err := c.Peek(ctx, "orders", dlq.SubQueueMain, 0, 10)
	if err != nil || len(got) != 1 || got[0].MessageID != "via-endpoint" {
		t.Fatalf("Peek through the custom endpoint = %+v, %v", got, err)
	}

	// Without it the SDK dials localhost:5671, where nothing listens.
	direct, err := servicebus.OpenWithCredential(ctx, "localhost", cred, servicebus.Options{
		AdminEndpoint: emu.AdminURL(), TLSCAFile: caFile, Retry: servicebus.Retry{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Peek(ctx, "orders", dlq.SubQueueMain, 0, 10); !errors.Is(err, dlq.ErrUnreachable) {
		t.Errorf("Peek without the custom endpoint = %v, want unreachable", err)
	}
}
