package servicebus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"

	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// TestEndpoints: where each transport connects, and where the admin API
// goes, for Azure, a development emulator and custom endpoints.
func TestEndpoints(t *testing.T) {
	const (
		azure = "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0"
		emu   = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;UseDevelopmentEmulator=true"
	)
	for _, tc := range []struct {
		conn              string
		opts              Options
		admin, custom, ws string
		viaCustom         bool
	}{
		{azure, Options{}, "", "", "", false},
		{azure, Options{CustomEndpoint: "10.0.0.4:5671"}, "", "10.0.0.4:5671", "", false},
		{azure, Options{Transport: TransportWebSockets}, "", "", "wss://contoso.servicebus.windows.net/$servicebus/websocket", false},
		{azure, Options{Transport: TransportWebSockets, CustomEndpoint: "10.0.0.4"},
			"https://10.0.0.4", "", "wss://10.0.0.4/$servicebus/websocket", true},
		{azure, Options{Transport: TransportWebSockets, CustomEndpoint: "https://gw:8443", AdminEndpoint: "https://admin.example"},
			"https://admin.example", "", "wss://gw:8443/$servicebus/websocket", true},
		{emu, Options{}, "http://127.0.0.1:5300", "", "", false},
		{emu, Options{Transport: TransportWebSockets}, "http://127.0.0.1:5300", "", "ws://127.0.0.1:5300/$servicebus/websocket", false},
		{emu, Options{Transport: TransportWebSockets, AdminEndpoint: "http://127.0.0.1:9000"},
			"http://127.0.0.1:9000", "", "ws://127.0.0.1:9000/$servicebus/websocket", false},
		{emu, Options{Transport: TransportWebSockets, CustomEndpoint: "127.0.0.1:9001"},
			"http://127.0.0.1:9001", "", "ws://127.0.0.1:9001/$servicebus/websocket", true},
	} {
		cs, err := connstr.Parse(tc.conn)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := tc.opts.endpoints(cs)
		if err != nil {
			t.Errorf("%s %+v: %v", cs.Host, tc.opts, err)
			continue
		}
		ws := ""
		if ep.webSocket != nil {
			ws = ep.webSocket.String()
		}
		if ep.admin != tc.admin || ep.custom != tc.custom || ws != tc.ws || ep.viaCustom != tc.viaCustom {
			t.Errorf("%s %+v: admin %q, custom %q, websocket %q (custom %v); want %q, %q, %q (%v)",
				cs.Host, tc.opts, ep.admin, ep.custom, ws, ep.viaCustom, tc.admin, tc.custom, tc.ws, tc.viaCustom)
		}
	}
}

const (
	envProxyChild = "DLQDASH_TEST_WS_PROXY_CHILD"
	envProxyCA    = "DLQDASH_TEST_WS_PROXY_CA"
)

// TestWebSocketDialerProxyAndTLS: the dialer goes through the HTTPS proxy
// of the environment (CONNECT to the namespace's host on 443) and trusts
// the roots of Options.TLSConfig, and without them refuses the server's
// certificate. http.ProxyFromEnvironment reads the environment once per
// process and never proxies loopback, so the dialing runs in a child
// process, for the namespace example.com (a name httptest's certificate
// holds), and the proxy takes every CONNECT to the local TLS server.
func TestWebSocketDialerProxyAndTLS(t *testing.T) {
	if os.Getenv(envProxyChild) != "" {
		proxyChild(t)
		return
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != webSocketPath {
			http.NotFound(w, r)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{webSocketSubprotocol}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for { // echo
			typ, b, err := ws.Read(r.Context())
			if err != nil || ws.Write(r.Context(), typ, b) != nil {
				return
			}
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake of the second dial
	srv.StartTLS()
	defer srv.Close()

	var mu sync.Mutex
	var connects []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		connects = append(connects, r.Host)
		mu.Unlock()
		up, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		down, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer down.Close()
		_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, buf); done <- struct{}{} }()
		go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
		<-done
	}))
	defer proxy.Close()

	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWebSocketDialerProxyAndTLS$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envProxyChild+"=1", envProxyCA+"="+string(ca),
		"HTTPS_PROXY="+proxy.URL, "https_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the dialing child failed: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(connects) != 2 || connects[0] != "example.com:443" {
		t.Errorf("the proxy saw CONNECT %q, want example.com:443 twice (with and without the roots)\n%s", connects, out)
	}
}

// proxyChild dials wss://example.com/$servicebus/websocket through the
// environment's proxy, with and without the test server's root.
func proxyChild(t *testing.T) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(os.Getenv(envProxyCA))) {
		t.Fatal("no CA in " + envProxyCA)
	}
	cs, err := connstr.Parse("Endpoint=sb://example.com/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := Options{Transport: TransportWebSockets}.endpoints(cs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	d := newWebSocketDialer(ep.webSocket, cs, ep.viaCustom, &tls.Config{RootCAs: roots})
	nc, err := d.dial(ctx, azservicebus.NewWebSocketConnArgs{Host: "wss://example.com/$servicebus/websocket"})
	if err != nil {
		t.Fatalf("dial through the proxy with the roots: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("AMQP\x03\x01\x00\x00")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if _, err := io.ReadFull(nc, got); err != nil || string(got) != "AMQP\x03\x01\x00\x00" {
		t.Fatalf("echo %q, %v", got, err)
	}

	d = newWebSocketDialer(ep.webSocket, cs, ep.viaCustom, nil)
	if nc, err := d.dial(ctx, azservicebus.NewWebSocketConnArgs{}); err == nil {
		nc.Close()
		t.Fatal("dialed without trusting the server's certificate")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("dial without the roots: %v, want a certificate error", err)
	}
}
