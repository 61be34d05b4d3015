package servicebus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"

	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// Transports of Options.Transport.
const (
	// TransportAMQP is AMQP over TCP: port 5671 with TLS (5672 without, for
	// a development emulator). The default.
	TransportAMQP = "amqp"
	// TransportWebSockets is AMQP over WebSockets on the namespace's HTTPS
	// port (443), at /$servicebus/websocket, for networks that allow only
	// HTTPS, through the HTTPS proxy of the environment if any.
	TransportWebSockets = "websockets"
)

// webSocketPath and webSocketSubprotocol are where and how Service Bus
// serves AMQP over WebSockets (docs/servicebus-protocol.md §2.6).
const (
	webSocketPath        = "/$servicebus/websocket"
	webSocketSubprotocol = "AMQPWSB10"
)

// endpoints are where Open's clients connect, from the connection string
// and Options.
type endpoints struct {
	// admin is the admin API's base URL; empty means the SDK's own,
	// https://<namespace>/.
	admin string
	// custom is ClientOptions.CustomEndpoint (host[:port]) for AMQP over
	// TCP; empty for the namespace itself.
	custom string
	// webSocket is the ws:// or wss:// URL of AMQP over WebSockets; nil
	// with TransportAMQP.
	webSocket *url.URL
	// viaCustom: webSocket is CustomEndpoint, not the namespace's host.
	viaCustom bool
}

// endpoints works out where to connect:
//
//   - AMQP over TCP dials CustomEndpoint when set (the SDK's
//     ClientOptions.CustomEndpoint: a TCP proxy or a private endpoint; the
//     token audience and the TLS name stay the namespace's), else the
//     namespace;
//   - AMQP over WebSockets dials /$servicebus/websocket on the namespace's
//     HTTP server, the one the admin API is on (Azure serves both on 443):
//     CustomEndpoint when set, else AdminEndpoint, else http://<host>:5300
//     with UseDevelopmentEmulator=true, else https://<namespace>;
//   - the admin API goes to AdminEndpoint when set, else, over
//     WebSockets, to CustomEndpoint (the same HTTP server), else as before.
func (o Options) endpoints(cs connstr.ConnectionString) (endpoints, error) {
	var ep endpoints
	switch o.Transport {
	case "", TransportAMQP, TransportWebSockets:
	default:
		return ep, fmt.Errorf("transport %q: want %s or %s", o.Transport, TransportAMQP, TransportWebSockets)
	}
	ws := o.Transport == TransportWebSockets
	ep.admin = o.AdminEndpoint
	if ep.admin == "" && cs.UseDevelopmentEmulator {
		ep.admin = "http://" + net.JoinHostPort(cs.Host, EmulatorAdminPort)
	}

	var custom *url.URL
	if c := strings.TrimSpace(o.CustomEndpoint); c != "" {
		u, err := parseCustomEndpoint(c, ws, cs.UseDevelopmentEmulator)
		if err != nil {
			return ep, err
		}
		custom = u
		ep.custom = u.Host
	}
	if !ws {
		return ep, nil
	}
	ep.custom = "" // the SDK ignores it with NewWebSocketConn; the dialer uses it
	switch {
	case custom != nil:
		ep.webSocket, ep.viaCustom = custom, true
		if o.AdminEndpoint == "" {
			ep.admin = httpScheme(custom.Scheme) + "://" + custom.Host
		}
	case ep.admin != "":
		u, err := url.Parse(ep.admin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return ep, errors.New("admin endpoint: want a base URL like http://127.0.0.1:5300 (scheme and host[:port] only)")
		}
		ep.webSocket = &url.URL{Scheme: wsScheme(u.Scheme), Host: u.Host}
	default:
		ep.webSocket = &url.URL{Scheme: "wss", Host: cs.Namespace()}
	}
	ep.webSocket.Path = webSocketPath
	return ep, nil
}

// amqpTarget names where AMQP connections go, for error messages.
func (ep endpoints) amqpTarget(cs connstr.ConnectionString) string {
	switch {
	case ep.webSocket != nil:
		return ep.webSocket.String() + " (AMQP over WebSockets)"
	case ep.custom != "":
		return ep.custom
	}
	return cs.Namespace()
}

// parseCustomEndpoint takes host[:port] or a URL with nothing but a scheme
// and host[:port]: amqps, amqp or sb for AMQP over TCP; https, http, wss or
// ws for WebSockets. A bare host is wss over WebSockets (ws for a
// development emulator).
func parseCustomEndpoint(s string, ws, emulator bool) (*url.URL, error) {
	want := "host[:port], or amqps://host[:port]"
	if ws {
		want = "host[:port], or https://host[:port] (http:// for a development emulator)"
	}
	bad := fmt.Errorf("custom endpoint %q: want %s", s, want)
	var u *url.URL
	var err error
	if strings.Contains(s, "://") {
		u, err = url.Parse(s)
	} else {
		u, err = url.Parse("//" + s)
		if err == nil {
			u.Scheme = "amqps"
			if ws {
				u.Scheme = "wss"
				if emulator {
					u.Scheme = "ws"
				}
			}
		}
	}
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, bad
	}
	u.Path = ""
	switch u.Scheme {
	case "amqps", "amqp", "sb":
		if ws {
			return nil, fmt.Errorf("custom endpoint %q is an AMQP address but the transport is %s: want %s", s, TransportWebSockets, want)
		}
	case "https", "wss", "http", "ws":
		if !ws {
			return nil, fmt.Errorf("custom endpoint %q is an HTTP address but the transport is %s: want %s", s, TransportAMQP, want)
		}
		u.Scheme = wsScheme(u.Scheme)
	default:
		return nil, bad
	}
	return u, nil
}

// wsScheme maps http(s) to ws(s); ws and wss stay.
func wsScheme(s string) string {
	switch s {
	case "http", "ws":
		return "ws"
	}
	return "wss"
}

// httpScheme maps ws(s) to http(s).
func httpScheme(s string) string {
	if s == "ws" {
		return "http"
	}
	return "https"
}

// webSocketDialer makes the SDK's AMQP connections WebSockets.
type webSocketDialer struct {
	url    string
	host   string // the Host header; empty for the URL's
	client *http.Client
}

// newWebSocketDialer dials u with tlsConfig (nil: the system's roots)
// through the proxy of the environment (HTTPS_PROXY, NO_PROXY: see
// http.ProxyFromEnvironment). When u is a custom endpoint (not the
// namespace's own host), the TLS server name and the Host header stay the
// namespace's, as the SDK does for AMQP over TCP.
func newWebSocketDialer(u *url.URL, cs connstr.ConnectionString, custom bool, tlsConfig *tls.Config) *webSocketDialer {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = http.ProxyFromEnvironment
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// A WebSocket upgrade is HTTP/1.1 only.
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	var tc *tls.Config
	if tlsConfig != nil {
		tc = tlsConfig.Clone()
	}
	d := &webSocketDialer{url: u.String()}
	if custom {
		if tc == nil {
			tc = &tls.Config{}
		}
		if tc.ServerName == "" {
			tc.ServerName = cs.Host
		}
		d.host = cs.Namespace()
	}
	if tc != nil {
		tc.NextProtos = nil
	}
	t.TLSClientConfig = tc
	d.client = &http.Client{
		Transport: t,
		// The upgrade never redirects; following one could take the
		// connection elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return d
}

// dial is ClientOptions.NewWebSocketConn. The SDK asks for
// wss://<namespace>/$servicebus/websocket; d dials its own URL, which is
// that one unless a custom, admin or emulator endpoint says otherwise.
func (d *webSocketDialer) dial(ctx context.Context, _ azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
	conn, resp, err := websocket.Dial(ctx, d.url, &websocket.DialOptions{
		HTTPClient:   d.client,
		Host:         d.host,
		Subprotocols: []string{webSocketSubprotocol},
	})
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			if msg := strings.TrimSpace(string(body)); msg != "" {
				return nil, fmt.Errorf("open AMQP over WebSockets at %s: HTTP %s: %s: %w", d.url, resp.Status, msg, err)
			}
			return nil, fmt.Errorf("open AMQP over WebSockets at %s: HTTP %s: %w", d.url, resp.Status, err)
		}
		return nil, fmt.Errorf("open AMQP over WebSockets at %s: %w", d.url, err)
	}
	if conn.Subprotocol() == "" {
		conn.Close(websocket.StatusPolicyViolation, "no subprotocol")
		return nil, fmt.Errorf("open AMQP over WebSockets at %s: the server did not accept the subprotocol %s", d.url, webSocketSubprotocol)
	}
	// The connection lives until go-amqp closes it, not until ctx (the
	// SDK's connect call) ends.
	return websocket.NetConn(context.Background(), conn, websocket.MessageBinary), nil
}
