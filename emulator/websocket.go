package emulator

import (
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpws"
)

// withWebSockets serves AMQP over WebSockets at /$servicebus/websocket on
// the admin HTTP server, as Azure serves both on port 443, and everything
// else with admin. Connections that arrive this way are the AMQP server's
// like any other: faults, stats and Close cover them.
func withWebSockets(admin http.Handler, srv *amqpserver.Server, logger *slog.Logger) http.Handler {
	ws := amqpws.NewHandler(func(nc net.Conn) error {
		return srv.ServeConn(nc, amqpserver.TransportWebSocket)
	}, logger)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// uamqp (the Python SDK up to 7.8) asks for the path with a
		// trailing slash, which Azure serves too.
		if strings.EqualFold(strings.TrimSuffix(r.URL.Path, "/"), amqpws.Path) {
			ws.ServeHTTP(w, r)
			return
		}
		admin.ServeHTTP(w, r)
	})
}

// WebSocketURL is the AMQP over WebSockets endpoint, served by the admin
// listener: ws://HOST:PORT/$servicebus/websocket (subprotocol AMQPWSB10),
// wss:// when the admin listener serves HTTPS.
func (e *Emulator) WebSocketURL() string { return e.servers[0].WebSocketURL() }

// ConnCounts are the AMQP connections an emulator served, by transport.
type ConnCounts = amqpserver.ConnCounts

// Connections counts the AMQP connections served since Start, over TCP and
// over WebSockets, and those open now.
func (e *Emulator) Connections() ConnCounts { return e.servers[0].Connections() }

// WebSocketURL is the namespace's AMQP over WebSockets endpoint.
func (s *NamespaceServer) WebSocketURL() string {
	return "ws" + strings.TrimPrefix(s.AdminURL(), "http") + amqpws.Path
}

// Connections counts the namespace's AMQP connections by transport.
func (s *NamespaceServer) Connections() ConnCounts { return s.amqp.Connections() }
