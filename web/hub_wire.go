package web

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/a-h/templ"
)

// Live updates: the wire format.
//
// GET /live upgrades to a websocket whose subscription is its query (see
// live_subscription.go); the browser never sends anything that matters. The server sends
// JSON text frames, one op each:
//
//	{"op":"replace","id":"freshness","html":"<section id=\"freshness\" ...>"}
//	    replace the element with that id by html (the fragment keeps the id)
//	{"op":"prepend","id":"message-rows","html":"<tr id=\"message-42\" ...>..."}
//	    insert html at the start of the element with that id (new rows, newest
//	    first; rows the page already has are skipped)
//	{"op":"recount","id":"matching"}
//	    the count of the list changed (new messages matched a page that is
//	    not its first, or messages left the broker): fetch the element with
//	    that id again (the message list's count, from GET /messages/count);
//	    a prepend implies it
//	{"op":"recount","id":"group"}
//	    the failure group of a group page changed (its counts, status or
//	    name): the page fetches itself and swaps in its data-live-part
//	    elements (never its triage form)
//	{"op":"resync"}
//	    something was missed or changed shape: refetch the page
//
// Ids come from views.FragmentID; the script ignores ids the page does not
// have. Replay jobs' fragments are described in hub_jobs.go. A close frame means "reconnect later": 1001 on shutdown, 1013 when
// the connection was dropped for reading too slowly; 4429 (closeTooMany) with a
// reason when a cap on live connections refused it: the script shows the reason and tries
// again after 30 s. After any reconnect the
// script refetches the page, so what it shows is never older than the last
// reconnect. The first connection sends seq, the hub's change count when the
// page's request began (data-live-seq); if changes were published since, the
// hub's first frame is a resync, so nothing published between the page's read
// and its socket opening is lost.

// liveOp is one frame of the wire format.
type liveOp struct {
	Op   string `json:"op"`
	ID   string `json:"id,omitempty"`
	HTML string `json:"html,omitempty"`
}

func encodeOp(op liveOp) []byte {
	b, err := json.Marshal(op)
	if err != nil {
		// Strings only: encoding cannot fail.
		panic("live: " + err.Error())
	}
	return b
}

var (
	resyncFrame       = encodeOp(liveOp{Op: "resync"})
	recountFrame      = encodeOp(liveOp{Op: "recount", ID: "matching"})
	groupRecountFrame = encodeOp(liveOp{Op: "recount", ID: "group"})
)

// render renders c into a string.
func (h *Hub) render(ctx context.Context, c templ.Component) (string, error) {
	var buf bytes.Buffer
	if err := c.Render(ctx, &buf); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// replace is the frame replacing id by c; false (logged) if c does not
// render.
func (h *Hub) replace(ctx context.Context, id string, c templ.Component) ([]byte, bool) {
	html, err := h.render(ctx, c)
	if err != nil {
		h.log.Warn("live: cannot render a fragment", "fragment_id", id, "error", err.Error())
		return nil, false
	}
	return encodeOp(liveOp{Op: "replace", ID: id, HTML: html}), true
}
