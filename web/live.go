package web

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/views"
)

// One websocket connection: one reader, one writer. The timing constants
// and invariants are those of gorilla/websocket's chat example: every write
// has a deadline, the writer pings on a ticker, and each pong (or any frame)
// extends the read deadline, so a peer that vanished without a FIN is
// noticed within pongWait.
const (
	writeWait  = 10 * time.Second  // the longest one write may take
	pongWait   = 60 * time.Second  // the longest the peer may stay silent
	pingPeriod = pongWait * 9 / 10 // pings well within pongWait
	readLimit  = 4 << 10           // frames from the browser are discarded; larger ones end the connection
	liveBuffer = 4 << 10           // the connection's read and write buffers
)

// sameOrigin accepts a websocket upgrade from a page of this server: the
// Origin header's host must be the request's Host. Browsers always send
// Origin on websocket upgrades, so a cross-site page cannot open /live with
// the user's cookies (cross-site websocket hijacking). A request without
// Origin did not come from a browser page and is accepted: it carries no
// ambient credentials of a user, and /live shows what the pages show.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// serveLive answers GET /live: it upgrades to a websocket and sends the
// subscription's updates until either side closes.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request) error {
	if s.hub == nil {
		return ErrNotFound // nothing publishes changes
	}
	if !sameOrigin(r) {
		return errCrossOrigin
	}
	sub, err := parseSubscription(r)
	if err != nil {
		return err
	}
	if !s.canSeeBodies(r.Context()) {
		sub.hideBodies, sub.filter.QueryNotBodies = true, true
		sub.key += "#hide_bodies"
	}
	if !auth.FromContext(r.Context()).Role.Includes(auth.Operator) {
		sub.readOnly = true
		sub.key += "#read_only"
	}
	// Access rules: what the connection is sent is limited to the
	// namespaces the identity may view, as the pages are.
	sub.scope = scopeFrom(r.Context())
	if sub.scopeKey = sub.scope.key(); sub.scopeKey != "" {
		sub.key += "#" + sub.scopeKey
		if sub.page == views.LiveMessages {
			if _, err := s.filterScope(r, &sub.filter); err != nil {
				return err
			}
		}
		if sub.page == views.LiveJob && !sub.readOnly && s.jobs != nil {
			// A job's controls by the role in its namespace.
			if j, err := s.jobs.Job(r.Context(), sub.id); err == nil && !s.mayControl(r.Context(), j) {
				sub.readOnly = true
				sub.key += "#read_only"
			}
		}
	}
	up := websocket.Upgrader{
		ReadBufferSize:  liveBuffer,
		WriteBufferSize: liveBuffer,
		CheckOrigin:     sameOrigin,
		// Upgrade answers a request that is not a websocket handshake
		// itself (400), with a plain-text body.
	}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return nil // already answered
	}
	c := &liveClient{sub: sub, send: make(chan []byte, s.hub.cfg.ClientBuffer), actor: liveActor(r)}
	if no := s.hub.register(c); no != nil {
		// Refused after the upgrade, not before: a browser shows a
		// script a close frame's reason, never a refused handshake's.
		conn.SetWriteDeadline(time.Now().Add(writeWait))
		conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(no.code, no.reason))
		conn.Close()
		return nil
	}
	if sub.seq >= 0 && s.hub.Seq() > sub.seq {
		// Changes were published after the page was read and before this
		// connection was registered: the page refetches itself.
		c.send <- resyncFrame
	}
	// The connection lives longer than one request: its credentials are
	// checked again at every ping, so that it ends within a ping period of
	// a sign-out, a revocation, an expiry or the loss of a role.
	allowed := func() bool {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeWait)
		defer cancel()
		id, err := s.identity(r.WithContext(ctx))
		// A changed role changes what the page may show: it reconnects.
		if err != nil || id.Anonymous() || !id.Role.Includes(auth.Viewer) || s.scopeOf(id).key() != sub.scopeKey {
			return false
		}
		ctx = context.WithValue(auth.WithIdentity(ctx, id), scopeKey{}, sub.scope)
		readOnly := !id.Role.Includes(auth.Operator)
		if sub.page == views.LiveJob && sub.scopeKey != "" && !readOnly && s.jobs != nil {
			if j, err := s.jobs.Job(ctx, sub.id); err == nil {
				readOnly = !s.mayControl(ctx, j)
			}
		}
		return s.canSeeBodies(ctx) == !sub.hideBodies && readOnly == sub.readOnly
	}
	go writeLive(conn, c, s.livePing, allowed)
	readLive(conn)
	s.hub.unregister(c)
	return nil
}

// liveActor is whom a connection counts against for the per-actor cap:
// the actor, but for the local user (--auth none, everyone) the peer's
// address, so that one browser cannot take every connection.
func liveActor(r *http.Request) string {
	id := auth.FromContext(r.Context())
	if id.Via == auth.ViaNone || id.Anonymous() {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		return "local@" + host
	}
	return id.Actor()
}

// readLive reads until the connection fails, discarding whatever the
// browser sends: the subscription is the upgrade URL's, there are no
// commands. Reading is what makes gorilla answer pings, handle pongs and
// notice a close.
func readLive(conn *websocket.Conn) {
	conn.SetReadLimit(readLimit)
	conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error {
		return conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		if _, _, err := conn.NextReader(); err != nil {
			return
		}
		// Any frame shows the peer is there.
		conn.SetReadDeadline(time.Now().Add(pongWait))
	}
}

// writeLive is the connection's only writer: frames from the hub, pings on
// a ticker (each after allowed() confirms the credentials still hold; a
// policy-violation close otherwise), and a close frame when the hub closes
// send. It closes the
// connection when it returns, which ends readLive too.
func writeLive(conn *websocket.Conn, c *liveClient, period time.Duration, allowed func() bool) {
	ping := time.NewTicker(period)
	defer func() {
		ping.Stop()
		conn.Close()
	}()
	for {
		select {
		case frame, ok := <-c.send:
			conn.SetWriteDeadline(time.Now().Add(writeWait))
			if !ok {
				conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(c.closeCode, ""))
				return
			}
			if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
				return
			}
		case <-ping.C:
			if !allowed() {
				conn.SetWriteDeadline(time.Now().Add(writeWait))
				conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "signed out"))
				return
			}
			conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		}
	}
}
