package web

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gorilla/websocket"
)

// liveClient is one websocket connection as the hub sees it.
type liveClient struct {
	sub  subscription
	send chan []byte // closed by the hub (under mu) to end the connection
	// closeCode is the close frame's code, set before send is closed.
	closeCode int
	// actor is whose connection it is, for the per-actor cap: the
	// identity's actor, or for the local user of --auth none (everyone)
	// the peer's address.
	actor string
}

// closeTooMany is the close code of a connection refused over a cap (an
// application code: 4000 + HTTP's 429); its reason says which cap, and
// live.js shows it.
const closeTooMany = 4429

// refusal is why register refused a connection: the close frame's code
// and reason (at most 123 bytes, as a close frame allows).
type refusal struct {
	code   int
	reason string
}

// register adds c, or says why not: the hub is closed, or a cap on live
// connections (all of them, or one actor's) is reached.
func (h *Hub) register(c *liveClient) *refusal {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &refusal{code: websocket.CloseGoingAway}
	}
	if len(h.clients) >= h.cfg.MaxConnections {
		h.logRefusal("live: refusing connections: the cap on live connections is reached", "max_live_connections", h.cfg.MaxConnections, c.actor)
		return &refusal{code: closeTooMany, reason: fmt.Sprintf("live updates are off: the dashboard has %d live pages open, its limit", h.cfg.MaxConnections)}
	}
	if h.perActor[c.actor] >= h.cfg.MaxPerActor {
		h.logRefusal("live: refusing connections: an actor's cap on live connections is reached", "max_live_connections_per_actor", h.cfg.MaxPerActor, c.actor)
		return &refusal{code: closeTooMany, reason: fmt.Sprintf("live updates are off: you have %d live pages open, the most one user may; close some", h.cfg.MaxPerActor)}
	}
	h.perActor[c.actor]++
	h.clients[c] = struct{}{}
	return nil
}

// unregister removes c (its connection ended) and ends its writer.
func (h *Hub) unregister(c *liveClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c, websocket.CloseNormalClosure)
}

func (h *Hub) removeLocked(c *liveClient, code int) {
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	if h.perActor[c.actor]--; h.perActor[c.actor] <= 0 {
		delete(h.perActor, c.actor)
	}
	c.closeCode = code
	close(c.send)
}

// Close ends every connection (a going-away close frame) and refuses new
// ones. The server calls it when it shuts down: http.Server.Shutdown does
// not wait for hijacked connections.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		h.removeLocked(c, websocket.CloseGoingAway)
	}
}

// logRefusal logs a refusal over a cap, at most once a minute (a page
// refused tries again, and many pages may be refused).
func (h *Hub) logRefusal(msg, capKey string, limit int, actor string) {
	if now := time.Now(); now.Sub(h.refusedLogAt) >= time.Minute {
		h.refusedLogAt = now
		h.log.Warn(msg, capKey, limit, "actor", actor)
	}
}

// clientCount is how many connections are registered.
func (h *Hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// sendTo queues frame for every client that want selects, dropping those
// whose buffer is full. Sends never block: the lock is held only while
// frames are put in buffers.
func (h *Hub) sendTo(want func(subscription) bool, frames ...[]byte) {
	if len(frames) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if !want(c.sub) {
			continue
		}
		for _, f := range frames {
			select {
			case c.send <- f:
				continue
			default:
			}
			h.log.Info("live: dropping a connection that reads too slowly", "page", c.sub.page)
			h.removeLocked(c, websocket.CloseTryAgainLater)
			break
		}
	}
}

// scopes returns the distinct scopes of the clients that want selects.
func (h *Hub) scopes(want func(subscription) bool) []scope {
	seen := map[string]scope{}
	for _, s := range h.subscriptions(want) {
		seen[s.scopeKey] = s.scope
	}
	return slices.Collect(maps.Values(seen))
}

// subscriptions returns the distinct subscriptions of the clients that want
// selects.
func (h *Hub) subscriptions(want func(subscription) bool) []subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]subscription{}
	for c := range h.clients {
		if want(c.sub) {
			seen[c.sub.key] = c.sub
		}
	}
	return slices.Collect(maps.Values(seen))
}
