package servicebus

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// EmulatorAdminPort is where the admin API of a development emulator
// (Microsoft's, and ours) listens, on the AMQP endpoint's host.
const EmulatorAdminPort = "5300"

// ErrClosed is returned by every method of a Client after Close.
var ErrClosed = errors.New("servicebus: client closed")

// Options configure Open. The zero value is usable.
type Options struct {
	// AdminEndpoint is the base URL of the admin (HTTP/ATOM) API, for
	// example http://127.0.0.1:5300. Empty means https://<namespace>/, or
	// http://<endpoint host>:5300 when the connection string says
	// UseDevelopmentEmulator=true.
	AdminEndpoint string
	// Logger gets debug records about receivers and warnings about
	// messages the adapter cannot represent. Nil discards them.
	Logger *slog.Logger
	// Retry tunes the SDKs' own retries; zero fields take the defaults.
	Retry Retry
	// Timeouts bound every Service Bus call; zero fields take
	// DefaultTimeout.
	Timeouts Timeouts
	// Name names the namespace in errors and logs ("Service Bus refused
	// the credential for prod-us"); default its host[:port].
	Name string
	// Transport is TransportAMQP (AMQP over TCP, port 5671; the default
	// when empty) or TransportWebSockets (AMQP over WebSockets on 443, for
	// networks that allow only HTTPS, through the HTTPS proxy of the
	// environment).
	Transport string
	// CustomEndpoint is where to connect instead of the namespace's host,
	// for private endpoints, proxies and tests: host[:port], or a URL with
	// a scheme (amqps:// over TCP; https:// or http:// over WebSockets).
	// Token audiences and TLS names stay the namespace's. Over WebSockets
	// it is also the admin API's base URL unless AdminEndpoint is set.
	CustomEndpoint string
	// TLSConfig is the client TLS configuration of the AMQP, WebSocket and
	// admin connections (for a private CA, or the emulator's TLS
	// listeners); nil uses the system roots. TLSCAFile, when set, is a PEM
	// file of certificates to trust instead of the system roots (it
	// replaces TLSConfig's RootCAs).
	TLSConfig *tls.Config
	TLSCAFile string
}

// Retry is how often and how fast the Service Bus SDKs retry a failing
// operation before the adapter reports the error. The defaults are short on
// purpose: the SDK's own defaults (3 retries from 4 s, capped at 2 min for
// AMQP; 3 from 0.8 s, capped at 60 s for the admin API) let a dead
// connection take about 30 s to fail, during which the dashboard knows
// nothing. The ingester has its own backoff, so the adapter fails fast and
// lets it decide.
//
// The defaults: two retries, 250 ms then about 750 ms apart (with the SDK's
// jitter), at most 2 s, so an unreachable namespace is reported in about a
// second.
type Retry struct {
	// MaxRetries after the first try; 0 means the default, negative means
	// none.
	MaxRetries int
	// Delay before the first retry, doubling each time; 0 means the default.
	Delay time.Duration
	// MaxDelay caps the delay; 0 means the default.
	MaxDelay time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.MaxRetries == 0 {
		r.MaxRetries = 2
	}
	if r.Delay == 0 {
		r.Delay = 250 * time.Millisecond
	}
	if r.MaxDelay == 0 {
		r.MaxDelay = 2 * time.Second
	}
	return r
}

// Client is a dlq.Broker and a replay.Broker over the azservicebus SDK and
// its admin client. It is safe for concurrent use.
type Client struct {
	ns         connstr.ConnectionString
	name       string // Options.Name or ns.Namespace(), for messages and logs
	credential bool   // signed in with a token credential, not a key
	adminBase  string // where admin requests go, for messages
	amqpAt     string // where AMQP connections go, for messages: host[:port] or a websocket URL
	log        *slog.Logger
	admin      *admin.Client
	timeouts   Timeouts
	// newSB makes an SDK client: one AMQP connection, made by its first
	// call. See connFailed.
	newSB func() (*azservicebus.Client, error)

	connMu sync.Mutex
	sb     *azservicebus.Client
	conn   uint64 // counts replacements of sb

	mu        sync.Mutex
	closed    bool
	receivers map[receiverKey]*peekReceiver
}

var _ dlq.Broker = (*Client)(nil)

// Open checks the connection string and builds the clients. It does no I/O:
// the first call that needs the namespace connects, so a namespace that is
// down makes Entities and Peek fail (with ErrUnreachable), not Open.
//
// Connection strings have the forms
//
//	Endpoint=sb://<host>[:port]/;SharedAccessKeyName=<name>;SharedAccessKey=<key>
//	Endpoint=sb://<host>[:port]/;SharedAccessSignature=<sas>
//
// optionally with ;UseDevelopmentEmulator=true (plain AMQP on port 5672 unless
// the endpoint names one, and the admin API on http://<host>:5300). Errors
// never contain the connection string or any of its secrets.
//
// With Options.Transport TransportWebSockets every AMQP connection is a
// WebSocket to /$servicebus/websocket on the namespace's HTTP server, the
// admin API's (wss://<namespace>, or ws://<host>:5300 for a development
// emulator; CustomEndpoint or AdminEndpoint move it), subprotocol
// AMQPWSB10, through the environment's HTTPS proxy.
func Open(ctx context.Context, connectionString string, opts Options) (*Client, error) {
	_ = ctx // reserved: Open does no I/O today
	cs, err := connstr.Parse(connectionString)
	if err != nil {
		return nil, fmt.Errorf("connection string %w", err)
	}
	amqpTLS, err := opts.amqpTLS(cs.Host, cs.Port)
	if err != nil {
		return nil, err
	}
	if cs.UseDevelopmentEmulator {
		amqpTLS = nil // the SDK dials plain AMQP
	}
	return open(cs, opts, sdkConstructors{
		admin: func(o *admin.ClientOptions) (*admin.Client, error) {
			return admin.NewClientFromConnectionString(connectionString, o)
		},
		sb: func(o *azservicebus.ClientOptions) (*azservicebus.Client, error) {
			o.TLSConfig = amqpTLS
			return azservicebus.NewClientFromConnectionString(connectionString, o)
		},
	})
}

// OpenWithCredential is Open for a namespace reached with a token
// credential (Microsoft Entra ID: azidentity's credentials; devcred for the
// emulator) instead of a key: both the AMQP client and the admin client get
// their tokens from cred, for the audience https://servicebus.azure.net.
// fullyQualifiedNamespace is the namespace host, for example
// contoso.servicebus.windows.net (a port is allowed, for an emulator). The
// SDK always dials AMQPS with a credential, so an emulator must serve TLS
// (dlqdash emulator --tls-ca-out; trust it with opts.TLSCAFile). The
// admin API is https://<namespace>/ unless opts.AdminEndpoint says
// otherwise. Like Open it does no I/O; a refused credential shows on the
// first call, as an error matching dlq.ErrUnauthorized that names the
// namespace and the role it needs.
func OpenWithCredential(ctx context.Context, fullyQualifiedNamespace string, cred azcore.TokenCredential, opts Options) (*Client, error) {
	_ = ctx // reserved: no I/O
	if cred == nil {
		return nil, errors.New("open with a credential: the credential is nil")
	}
	cs, err := parseNamespace(fullyQualifiedNamespace)
	if err != nil {
		return nil, err
	}
	amqpTLS, err := opts.amqpTLS(cs.Host, cs.Port)
	if err != nil {
		return nil, err
	}
	cred = tokenCredential{cred}
	fqdn := cs.Namespace()
	return open(cs, opts, sdkConstructors{
		credential: true,
		admin: func(o *admin.ClientOptions) (*admin.Client, error) {
			return admin.NewClient(fqdn, cred, o)
		},
		sb: func(o *azservicebus.ClientOptions) (*azservicebus.Client, error) {
			o.TLSConfig = amqpTLS
			return azservicebus.NewClient(fqdn, cred, o)
		},
	})
}

// parseNamespace checks a fully qualified namespace: host[:port], an sb://
// or https:// prefix and a trailing slash tolerated.
func parseNamespace(fqdn string) (connstr.ConnectionString, error) {
	bad := fmt.Errorf("fully qualified namespace %q: want a host such as contoso.servicebus.windows.net (optionally :port), without a path", fqdn)
	s := strings.TrimSpace(fqdn)
	for _, prefix := range []string{"sb://", "https://", "amqps://"} {
		if len(s) > len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
			s = s[len(prefix):]
			break
		}
	}
	s = strings.TrimSuffix(s, "/")
	if s == "" || strings.ContainsAny(s, "/?#@;= ") {
		return connstr.ConnectionString{}, bad
	}
	cs := connstr.ConnectionString{Host: s}
	if host, port, err := net.SplitHostPort(s); err == nil {
		p, perr := strconv.Atoi(port)
		if host == "" || perr != nil || p <= 0 || p > 65535 {
			return connstr.ConnectionString{}, bad
		}
		cs.Host, cs.Port = host, p
	} else if strings.Contains(s, ":") {
		return connstr.ConnectionString{}, bad
	}
	return cs, nil
}

// sdkConstructors make the two SDK clients of a Client, from a connection
// string or a credential.
type sdkConstructors struct {
	credential bool
	admin      func(*admin.ClientOptions) (*admin.Client, error)
	sb         func(*azservicebus.ClientOptions) (*azservicebus.Client, error)
}

func open(cs connstr.ConnectionString, opts Options, mk sdkConstructors) (*Client, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := opts.Retry.withDefaults()

	adminOpts := &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    int32(retry.MaxRetries),
			RetryDelay:    retry.Delay,
			MaxRetryDelay: retry.MaxDelay,
			// 429 and 503 mean "back off": they are reported at once as
			// ErrThrottled with the server's Retry-After, for the
			// ingester's backoff, instead of being retried here.
			StatusCodes: []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout},
		},
		Telemetry: policy.TelemetryOptions{ApplicationID: "dlqdash"},
	}}
	ep, err := opts.endpoints(cs)
	if err != nil {
		return nil, err
	}
	base := ep.admin
	adminBase := "https://" + cs.Namespace() + "/"
	adminTLS, err := opts.tlsConfig()
	if err != nil {
		return nil, err
	}
	var baseURL *url.URL
	if base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, errors.New("admin endpoint: want a base URL like http://127.0.0.1:5300 (scheme and host[:port] only)")
		}
		baseURL = u
		adminBase = u.Scheme + "://" + u.Host + "/"
	}
	if baseURL != nil || adminTLS != nil {
		adminOpts.Transport = newRewriteTransport(baseURL, adminTLS)
	}
	adminClient, err := mk.admin(adminOpts)
	if err != nil {
		return nil, fmt.Errorf("admin client: %s", cs.Redact(err.Error()))
	}
	var newWebSocketConn func(context.Context, azservicebus.NewWebSocketConnArgs) (net.Conn, error)
	if ep.webSocket != nil {
		newWebSocketConn = newWebSocketDialer(ep.webSocket, cs, ep.viaCustom, adminTLS).dial
	}
	newSB := func() (*azservicebus.Client, error) {
		sb, err := mk.sb(&azservicebus.ClientOptions{
			ApplicationID:    "dlqdash",
			CustomEndpoint:   ep.custom,
			NewWebSocketConn: newWebSocketConn,
			RetryOptions: azservicebus.RetryOptions{
				MaxRetries:    int32(retry.MaxRetries),
				RetryDelay:    retry.Delay,
				MaxRetryDelay: retry.MaxDelay,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("service bus client: %s", cs.Redact(err.Error()))
		}
		return sb, nil
	}
	sbClient, err := newSB()
	if err != nil {
		return nil, err
	}
	name := cmp.Or(opts.Name, cs.Namespace())
	return &Client{
		ns:         cs,
		name:       name,
		credential: mk.credential,
		adminBase:  adminBase,
		amqpAt:     ep.amqpTarget(cs),
		log:        log.With("namespace", name),
		newSB:      newSB,
		sb:         sbClient,
		admin:      adminClient,
		timeouts:   opts.Timeouts.withDefaults(),
		receivers:  map[receiverKey]*peekReceiver{},
	}, nil
}

// tlsConfig is the client TLS configuration of Options (TLSConfig, with
// TLSCAFile's certificates as its roots), or nil for the defaults.
func (o Options) tlsConfig() (*tls.Config, error) {
	if o.TLSConfig == nil && o.TLSCAFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSConfig != nil {
		cfg = o.TLSConfig.Clone()
	}
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s: no PEM certificate in it", o.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// amqpTLS is the TLS configuration for the AMQP client of host:port. go-amqp
// checks the server's certificate against the namespace as given, port
// included ("127.0.0.1:5671"), which no certificate names: with a port the
// server name is set to the host.
func (o Options) amqpTLS(host string, port int) (*tls.Config, error) {
	cfg, err := o.tlsConfig()
	if err != nil || port == 0 {
		return cfg, err
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg, nil
}

// tokenCredential marks the errors of a credential's GetToken, so that a
// credential that cannot get a token (no managed identity here, an expired
// client secret) is reported as such, not as a network error.
type tokenCredential struct{ azcore.TokenCredential }

func (c tokenCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.TokenCredential.GetToken(ctx, o)
	if err != nil {
		return tok, &CredentialError{Err: err}
	}
	return tok, nil
}

// CredentialError is a token credential's failure to get a token.
type CredentialError struct{ Err error }

// credentialErrorText starts the text of every CredentialError.
const credentialErrorText = "the credential could not get a token: "

func (e *CredentialError) Error() string { return credentialErrorText + e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

// Namespace is the namespace's host[:port], safe to log and show.
func (c *Client) Namespace() string { return c.ns.Namespace() }

// Name is the namespace's name in messages: Options.Name, else Namespace.
func (c *Client) Name() string { return c.name }

// Close closes every cached receiver and the AMQP connection. It is safe to
// call more than once and concurrently with other methods, which then fail
// with ErrClosed. It waits for peeks in progress to end, at most until ctx
// is done.
//
// Receivers and senders opened by OpenReceiver and OpenSender belong to
// their callers, who close them; Close does not track them. Once the
// connection is closed their calls fail with ErrClosed, and closing them
// afterwards is harmless.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	receivers := make([]*peekReceiver, 0, len(c.receivers))
	for k, r := range c.receivers {
		receivers = append(receivers, r)
		delete(c.receivers, k)
	}
	c.mu.Unlock()

	var errs []error
	for _, r := range receivers {
		if err := r.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	c.connMu.Lock()
	sb := c.sb
	c.connMu.Unlock()
	if err := sb.Close(ctx); err != nil {
		errs = append(errs, c.mapError("close", err))
	}
	return errors.Join(errs...)
}

// sdk is the current SDK client and its generation.
func (c *Client) sdk() (*azservicebus.Client, uint64) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	return c.sb, c.conn
}

// connGen is the current SDK client's generation.
func (c *Client) connGen() uint64 {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	return c.conn
}

// connFailed replaces the SDK client of generation conn, on which err
// happened, when err says the broker closed its AMQP connection with a
// condition the SDK does not reconnect after (*amqp.ConnError with any
// condition but amqp:connection:forced and amqp:internal-error).
//
// The SDK reconnects by itself after most connection errors, but not after
// one that carries a condition it deems fatal: a connection the broker
// closed with amqp:not-allowed (which go-amqp provokes: when a session's
// begin is dropped because its context ended before the frame was
// written, it later sends an end for a channel the broker never saw),
// amqp:not-implemented and the like. It then keeps the dead connection
// and every call on it, by any sender or receiver, fails with the same
// error for good. A new SDK client connects afresh on its first call; the
// senders and receivers of the old one move to it on their next call (see
// link), and the old one is closed in the background.
func (c *Client) connFailed(conn uint64, err error) {
	var connErr *amqp.ConnError
	if err == nil || !errors.As(err, &connErr) || connErr.RemoteErr == nil {
		return // not closed by the broker: the SDK reconnects by itself
	}
	switch connErr.RemoteErr.Condition {
	case amqp.ErrCondConnectionForced, amqp.ErrCondInternalError:
		return // conditions the SDK reconnects after
	}
	if c.isClosed() {
		return
	}
	c.connMu.Lock()
	if c.conn != conn {
		c.connMu.Unlock()
		return // replaced already
	}
	fresh, ferr := c.newSB()
	if ferr != nil {
		c.connMu.Unlock()
		return
	}
	old := c.sb
	c.sb, c.conn = fresh, c.conn+1
	c.connMu.Unlock()
	c.log.Warn("service bus connection replaced after it failed", "error", cause(err), "generation", conn+1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeouts.Attach)
		defer cancel()
		_ = old.Close(ctx)
	}()
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// rewriteTransport sends the admin client's requests, which always go to
// https://<namespace>/..., to another base URL (docs/servicebus-protocol.md §12.3),
// or, with a nil base, where they go, over its own TLS configuration. It runs
// after the SAS policy, so the signature still names the namespace URL, as
// the emulator and the service expect.
type rewriteTransport struct {
	base   *url.URL
	client *http.Client
}

func newRewriteTransport(base *url.URL, tlsCfg *tls.Config) *rewriteTransport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsCfg
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = time.Minute
	return &rewriteTransport{base: base, client: &http.Client{
		Transport: t,
		// The admin API never redirects; following one could send the
		// Authorization header elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (t *rewriteTransport) Do(req *http.Request) (*http.Response, error) {
	// Clone so that a retry (which re-signs the original request) starts
	// from the namespace URL again.
	if t.base == nil {
		return t.client.Do(req)
	}
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host = t.base.Scheme, t.base.Host
	out.Host = ""
	return t.client.Do(out)
}
