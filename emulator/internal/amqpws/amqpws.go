// Package amqpws is the emulator's AMQP over WebSockets endpoint: the HTTP
// handler that Azure Service Bus serves at /$servicebus/websocket on port
// 443, for networks that allow only HTTPS. A client upgrades a GET to a
// WebSocket with the subprotocol AMQPWSB10; from then on every binary
// WebSocket message carries AMQP bytes (protocol headers, SASL and AMQP
// frames, split or joined at will), and the handler hands the WebSocket,
// as a net.Conn, to the same AMQP connection handler as the TCP listener.
//
// The azservicebus SDK speaks it through ClientOptions.NewWebSocketConn:
// the SDK asks for wss://<namespace>/$servicebus/websocket and the caller
// dials it. See docs/servicebus-protocol.md, "AMQP over WebSockets".
package amqpws

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// Path is where Azure Service Bus, and the emulator, serve AMQP over
// WebSockets.
const Path = "/$servicebus/websocket"

// Subprotocol is the WebSocket subprotocol of the AMQP WebSocket binding
// that the Service Bus clients (.NET, Java, Python, JavaScript) offer.
const Subprotocol = "AMQPWSB10"

// subprotocols are accepted, first preferred. "amqp" is the name the OASIS
// binding registered, which the Go SDK's own example offers and Azure
// accepts.
var subprotocols = []string{Subprotocol, "amqp"}

// ServeConn serves one AMQP connection over nc until it ends and closes nc;
// it fails at once, without serving, when the server is shutting down.
type ServeConn func(nc net.Conn) error

// NewHandler returns the handler of Path. serve is the AMQP server's
// connection handler; log gets one debug record per connection.
func NewHandler(serve ServeConn, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &handler{serve: serve, log: log}
}

type handler struct {
	serve ServeConn
	log   *slog.Logger
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !headerHasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		http.Error(w, fmt.Sprintf("%s is AMQP over WebSockets: open a WebSocket (GET with Upgrade: websocket) offering the subprotocol %s",
			Path, Subprotocol), http.StatusUpgradeRequired)
		return
	}
	offered := headerTokens(r.Header, "Sec-WebSocket-Protocol")
	if !acceptable(offered) {
		msg := fmt.Sprintf("no WebSocket subprotocol offered: AMQP over WebSockets needs the subprotocol %s (Sec-WebSocket-Protocol: %s)", Subprotocol, Subprotocol)
		if len(offered) > 0 {
			msg = fmt.Sprintf("unsupported WebSocket subprotocol %s: AMQP over WebSockets speaks %s (or amqp)", strings.Join(offered, ", "), Subprotocol)
		}
		h.log.Debug("amqp websocket refused", "remote", r.RemoteAddr, "subprotocols", offered)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: subprotocols,
		// Any origin: clients authenticate in-band with $cbs tokens, never
		// with cookies, so there is no ambient credential for a foreign
		// page to abuse (and browser clients are what this is for).
		InsecureSkipVerify: true,
	})
	if err != nil {
		// Accept has written the error response.
		h.log.Debug("amqp websocket handshake failed", "remote", r.RemoteAddr, "error", err)
		return
	}
	h.log.Debug("amqp websocket connected", "remote", r.RemoteAddr, "subprotocol", ws.Subprotocol())
	// The request context lives until this handler returns, which is when
	// the AMQP connection has ended.
	nc := websocket.NetConn(r.Context(), ws, websocket.MessageBinary)
	if err := h.serve(nc); err != nil {
		_ = ws.Close(websocket.StatusGoingAway, "the emulator is shutting down")
		h.log.Debug("amqp websocket not served", "remote", r.RemoteAddr, "error", err)
		return
	}
}

func acceptable(offered []string) bool {
	for _, o := range offered {
		for _, s := range subprotocols {
			if strings.EqualFold(o, s) {
				return true
			}
		}
	}
	return false
}

// headerTokens are the comma-separated values of every line of header
// name, trimmed, empty ones dropped.
func headerTokens(h http.Header, name string) []string {
	var out []string
	for _, line := range h.Values(name) {
		for _, tok := range strings.Split(line, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				out = append(out, tok)
			}
		}
	}
	return out
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, t := range headerTokens(h, name) {
		if strings.EqualFold(t, token) {
			return true
		}
	}
	return false
}
