package emulator_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

var jwtKey = []byte("emulator-test-key-0123456789abcdef")

// hsCredential is a TokenCredential that signs its own HS256 tokens, the
// emulator tests' own (servicebus/devcred is the product's; the emulator
// does not import it).
type hsCredential struct {
	key    []byte
	aud    string
	expiry time.Duration
	scopes chan []string // the scopes asked for, when not nil
}

func (c hsCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if c.scopes != nil {
		select {
		case c.scopes <- o.Scopes:
		default:
		}
	}
	aud, expiry := c.aud, c.expiry
	if aud == "" {
		aud = "https://servicebus.azure.net"
	}
	if expiry == 0 {
		expiry = time.Hour
	}
	exp := time.Now().Add(expiry)
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	p, _ := json.Marshal(map[string]any{"aud": aud, "sub": "emulator-test", "exp": exp.Unix()})
	signing := h + "." + base64.RawURLEncoding.EncodeToString(p)
	mac := hmac.New(sha256.New, c.key)
	mac.Write([]byte(signing))
	return azcore.AccessToken{Token: signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), ExpiresOn: exp}, nil
}

// tlsAdmin sends the admin client's https://<namespace>/ requests to base
// over TLS trusting cfg.
type tlsAdmin struct {
	base   *url.URL
	client *http.Client
}

func newTLSAdmin(t *testing.T, base string, cfg *tls.Config) tlsAdmin {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	t.Cleanup(tr.CloseIdleConnections)
	return tlsAdmin{u, &http.Client{Transport: tr}}
}

func (a tlsAdmin) Do(req *http.Request) (*http.Response, error) {
	req.URL.Scheme, req.URL.Host = a.base.Scheme, a.base.Host
	return a.client.Do(req)
}

func credClients(t *testing.T, emu *emulator.Emulator, s *emulator.NamespaceServer, cred azcore.TokenCredential) (*azservicebus.Client, *admin.Client) {
	t.Helper()
	c, err := azservicebus.NewClient(s.FullyQualifiedNamespace(), cred, &azservicebus.ClientOptions{
		TLSConfig:    emu.ClientTLSConfig(),
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	ac, err := admin.NewClient(s.FullyQualifiedNamespace(), cred, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: newTLSAdmin(t, s.AdminURL(), emu.ClientTLSConfig()), Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return c, ac
}

// TestTokenCredentialOverTLS: the SDK's TokenCredential clients reach the
// data plane (AMQPS, jwt put-token) and the admin API (HTTPS, the token in
// Authorization) with a token signed by the configured key, over the
// generated certificate; tokens signed by another key, expired, or for
// another audience are refused with 401, which the SDK reports as
// CodeUnauthorizedAccess; and without a key every token is refused.
func TestTokenCredentialOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	emu := emulatortest.Start(t, emulator.Config{JWTKey: jwtKey, TLS: &emulator.TLSConfig{}})
	if !strings.HasPrefix(emu.AdminURL(), "https://") {
		t.Fatalf("AdminURL = %s over TLS", emu.AdminURL())
	}
	if strings.Contains(emu.ConnectionString(), "UseDevelopmentEmulator") {
		t.Errorf("TLS connection string %q keeps the emulator flag, which makes the SDK dial plain TCP", emu.ConnectionString())
	}
	s := emu.Servers()[0]
	scopes := make(chan []string, 1)
	c, ac := credClients(t, emu, s, hsCredential{key: jwtKey, scopes: scopes})

	if _, err := ac.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatalf("CreateQueue with a bearer token over HTTPS: %v", err)
	}
	if got := <-scopes; len(got) != 1 || got[0] != "https://servicebus.azure.net//.default" {
		t.Errorf("the SDK asked for scopes %q", got)
	}
	snd, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("over tls")}, nil); err != nil {
		t.Fatalf("send with a jwt over AMQPS: %v", err)
	}
	rcv, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := rcv.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "over tls" {
		t.Fatalf("receive = %v, %v", msgs, err)
	}
	if err := rcv.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	props, err := ac.GetQueueRuntimeProperties(ctx, "orders", nil)
	if err != nil || props.ActiveMessageCount != 0 {
		t.Fatalf("runtime properties after complete = %+v, %v", props, err)
	}

	for name, cred := range map[string]hsCredential{
		"wrong key":      {key: []byte("another-key-0123456789abcdef012345")},
		"expired":        {key: jwtKey, expiry: -time.Minute},
		"wrong audience": {key: jwtKey, aud: "https://storage.azure.com"},
	} {
		t.Run(name, func(t *testing.T) {
			c, ac := credClients(t, emu, s, cred)
			snd, err := c.NewSender("orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("refused")}, nil)
			var sbErr *azservicebus.Error
			if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
				t.Errorf("send = %v, want CodeUnauthorizedAccess", err)
			}
			_, err = ac.GetQueue(ctx, "orders", nil)
			var respErr *azcore.ResponseError
			if !errors.As(err, &respErr) || respErr.StatusCode != http.StatusUnauthorized {
				t.Errorf("GetQueue = %v, want 401", err)
			}
		})
	}
	if q, err := emu.Namespace().Queue("orders"); err != nil || q.Counts.Active != 0 {
		t.Errorf("a refused sender's message reached the queue")
	}

	// No key configured: the same good token is refused.
	nokey := emulatortest.Start(t, emulator.Config{TLS: &emulator.TLSConfig{}})
	c2, ac2 := credClients(t, nokey, nokey.Servers()[0], hsCredential{key: jwtKey})
	if _, err := ac2.NewListQueuesPager(nil).NextPage(ctx); err == nil {
		t.Error("the admin API accepted a jwt without a configured key")
	}
	snd2, _ := c2.NewSender("orders", nil)
	var sbErr *azservicebus.Error
	if err := snd2.SendMessage(ctx, &azservicebus.Message{}, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("send without a configured key = %v, want CodeUnauthorizedAccess", err)
	}

	// A client that does not trust the certificate cannot connect.
	c3, err := azservicebus.NewClient(s.FullyQualifiedNamespace(), hsCredential{key: jwtKey}, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close(ctx)
	snd3, _ := c3.NewSender("orders", nil)
	if err := snd3.SendMessage(ctx, &azservicebus.Message{}, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("send without trusting the certificate = %v, want a certificate error", err)
	}
}

// TestSASOverTLS: the SAS connection string works over TLS too.
func TestSASOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	emu := emulatortest.Start(t, emulator.Config{TLS: &emulator.TLSConfig{}})
	if _, err := emu.Namespace().CreateQueue("q", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	c, err := azservicebus.NewClientFromConnectionString(emu.ConnectionString(), &azservicebus.ClientOptions{TLSConfig: emu.ClientTLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	snd, _ := c.NewSender("q", nil)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("sas")}, nil); err != nil {
		t.Fatalf("send with SAS over TLS: %v", err)
	}
	ac, err := admin.NewClientFromConnectionString(emu.ConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: newTLSAdmin(t, emu.AdminURL(), emu.ClientTLSConfig())}})
	if err != nil {
		t.Fatal(err)
	}
	props, err := ac.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil || props.ActiveMessageCount != 1 {
		t.Fatalf("runtime properties = %+v, %v", props, err)
	}
}

// TestSeveralNamespaces: two namespaces in one process are two brokers on
// their own listeners; a message sent in one is not in the other, and the
// default accessors are the first namespace's.
func TestSeveralNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	emu := emulatortest.Start(t, emulator.Config{Namespaces: []emulator.NamespaceConfig{{Name: "prod-eu"}, {Name: "prod-us"}}})
	eu, us := emu.Server("prod-eu"), emu.Server("PROD-US")
	if eu == nil || us == nil || len(emu.Servers()) != 2 || emu.Server("prod-asia") != nil {
		t.Fatalf("servers %v", emu.Servers())
	}
	if eu.Namespace() == us.Namespace() || eu.AMQPAddr().String() == us.AMQPAddr().String() || eu.AdminURL() == us.AdminURL() {
		t.Fatal("the two namespaces share a broker or a listener")
	}
	if emu.ConnectionString() != eu.ConnectionString() || emu.Namespace() != eu.Namespace() || emu.AdminURL() != eu.AdminURL() {
		t.Error("the Emulator's accessors are not the first namespace's")
	}
	if eu.Namespace().Name() != "prod-eu" || us.Namespace().Name() != "prod-us" {
		t.Errorf("broker names %q, %q", eu.Namespace().Name(), us.Namespace().Name())
	}
	for _, s := range []*emulator.NamespaceServer{eu, us} {
		base, _ := url.Parse(s.AdminURL())
		ac, err := admin.NewClientFromConnectionString(s.ConnectionString(), &admin.ClientOptions{
			ClientOptions: azcore.ClientOptions{Transport: toAdmin{base}, Retry: policy.RetryOptions{MaxRetries: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.CreateQueue(ctx, "orders", nil); err != nil {
			t.Fatalf("%s: CreateQueue: %v", s.Name(), err)
		}
	}
	c, err := azservicebus.NewClientFromConnectionString(us.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	snd, _ := c.NewSender("orders", nil)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("us only")}, nil); err != nil {
		t.Fatal(err)
	}
	qEU, _ := eu.Namespace().Queue("orders")
	qUS, _ := us.Namespace().Queue("orders")
	if qEU.Counts.Active != 0 || qUS.Counts.Active != 1 {
		t.Errorf("after a send to prod-us: prod-eu has %d, prod-us %d", qEU.Counts.Active, qUS.Counts.Active)
	}
	if eu.Stats().Totals.Send != 0 || us.Stats().Totals.Send != 1 {
		t.Errorf("stats: prod-eu sent %d, prod-us %d", eu.Stats().Totals.Send, us.Stats().Totals.Send)
	}

	for name, cfg := range map[string]emulator.Config{
		"duplicate":       {Namespaces: []emulator.NamespaceConfig{{Name: "a"}, {Name: "A"}}},
		"unnamed":         {Namespaces: []emulator.NamespaceConfig{{}}},
		"bad name":        {Namespaces: []emulator.NamespaceConfig{{Name: "prod eu"}}},
		"top-level addrs": {AMQPAddr: "127.0.0.1:0", Namespaces: []emulator.NamespaceConfig{{Name: "a"}}},
	} {
		if emu, err := emulator.Start(ctx, cfg); err == nil {
			emu.Close()
			t.Errorf("%s: Start accepted %+v", name, cfg)
		}
	}
}

// TestGivenCertificate: a certificate given in Config.TLS is the one both
// listeners serve and CertificatePEM returns; a client trusting it reaches
// the admin endpoint over HTTPS by the certificate's name, and a plain
// HTTP request is not served.
func TestGivenCertificate(t *testing.T) {
	cert, err := emulator.GenerateCertificate([]string{"sb.example.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	emu := emulatortest.Start(t, emulator.Config{TLS: &emulator.TLSConfig{Certificate: &cert}})
	block, _ := pem.Decode(emu.CertificatePEM())
	if block == nil || !bytes.Equal(block.Bytes, cert.Certificate[0]) {
		t.Fatal("CertificatePEM is not the given certificate")
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "sb.example.test"}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(emu.AdminURL() + "/$namespaceinfo")
	if err != nil {
		t.Fatalf("HTTPS to the admin endpoint: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned request = %d, want 401", resp.StatusCode)
	}
	if resp.TLS == nil || !bytes.Equal(resp.TLS.PeerCertificates[0].Raw, cert.Certificate[0]) {
		t.Error("the admin endpoint did not serve the given certificate")
	}
	conn, err := tls.Dial("tcp", emu.AMQPAddr().String(), &tls.Config{RootCAs: pool, ServerName: "sb.example.test"})
	if err != nil {
		t.Fatalf("TLS to the AMQP endpoint: %v", err)
	}
	conn.Close()
	if resp, err := http.Get(strings.Replace(emu.AdminURL(), "https://", "http://", 1) + "/$namespaceinfo"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS admin endpoint = %d, want 400 (Go's answer to HTTP on a TLS port)", resp.StatusCode)
		}
	}
}
