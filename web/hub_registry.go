package web

import (
	"maps"
	"slices"

	"github.com/gorilla/websocket"
)

// liveClient is one websocket connection as the hub sees it.
type liveClient struct {
	sub  subscription
	send chan []byte // closed by the hub (under mu) to end the connection
	// closeCode is the close frame's code, set before send is closed.
	closeCode int
}

// register adds c; false after Close.
func (h *Hub) register(c *liveClient) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.clients[c] = struct{}{}
	return true
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
