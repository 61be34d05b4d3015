package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// Live updates: the wire format.
//
// GET /live upgrades to a websocket whose subscription is its query (see
// live.go); the browser never sends anything that matters. The server sends
// JSON text frames, one op each:
//
//	{"op":"replace","id":"freshness","html":"<section id=\"freshness\" ...>"}
//	    replace the element with that id by html (the fragment keeps the id)
//	{"op":"prepend","id":"message-rows","html":"<tr id=\"message-42\" ...>..."}
//	    insert html at the start of the element with that id (new rows, newest
//	    first; rows the page already has are skipped)
//	{"op":"resync"}
//	    something was missed or changed shape: refetch the page
//
// Ids come from views.FragmentID; the script ignores ids the page does not
// have. Replay jobs' fragments are described in hub_jobs.go. A close frame means "reconnect later": 1001 on shutdown, 1013 when
// the connection was dropped for reading too slowly. After any reconnect the
// script refetches the page, so what it shows is never older than the last
// reconnect. The first connection sends seq, the hub's change count when the
// page's request began (data-live-seq); if changes were published since, the
// hub's first frame is a resync, so nothing published between the page's read
// and its socket opening is lost.

// Hub defaults.
const (
	// hubQueue is how many changes Publish buffers before dropping them (and
	// making every page resync).
	hubQueue = 1024
	// clientBuffer is how many frames wait for one connection's writer
	// before the connection is dropped as too slow.
	clientBuffer = 256
	// coalesceWindow gathers the changes of one ingester pass (published
	// within a few milliseconds) into one update per fragment.
	coalesceWindow = 100 * time.Millisecond
	// chartEvery and groupsEvery throttle the overview's depth chart and
	// the failure groups table: each costs a catalog read per update.
	chartEvery  = 5 * time.Second
	groupsEvery = 2 * time.Second
	// maxRowOps is the most message ids one update re-renders; beyond it a
	// page refetches instead (a replay or a purge touching thousands).
	maxRowOps = 500
)

// HubConfig is what NewHub needs. Zero sizes and durations take the defaults
// above.
type HubConfig struct {
	Catalog Catalog
	// JobItems lists a job's messages, for the live table of a job's page;
	// nil leaves that table to refresh when the job finishes.
	JobItems JobItemLister
	Logger   *slog.Logger
	// Mode and Namespace word the freshness panel, as on the overview.
	Mode, Namespace string

	Queue        int           // changes buffered by Publish
	ClientBuffer int           // frames buffered per connection
	Window       time.Duration // coalescing window
	ChartEvery   time.Duration
	GroupsEvery  time.Duration
}

// Hub fans the catalog's changes out to the websocket connections of open
// pages as server-rendered fragments. Publish never blocks; Run renders and
// sends; a connection that cannot keep up is closed, never waited for (its
// page reconnects and refetches).
type Hub struct {
	cfg     HubConfig
	catalog Catalog
	log     *slog.Logger

	in       chan dlq.Change
	overflow atomic.Bool  // a change was dropped: every page must resync
	seq      atomic.Int64 // changes published so far (Seq)
	dropped  atomic.Int64 // changes dropped, for the log and tests

	mu      sync.Mutex
	clients map[*liveClient]struct{}
	closed  bool

	// Job changes (PublishJob): the latest state of each job changed since
	// the last flush, and a signal that there is one.
	jobMu     sync.Mutex
	jobs      map[int64]replay.Job
	jobSignal chan struct{}
	// finishedJobs are the jobs the hub has seen finish (Run's goroutine
	// only): a stale running state published late is not sent after it.
	finishedJobs map[int64]bool
	// itemsSentAt throttles the job pages' message tables (Run's goroutine
	// only).
	itemsSentAt map[int64]time.Time
}

// NewHub builds a hub; Run starts it.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = hubQueue
	}
	if cfg.ClientBuffer <= 0 {
		cfg.ClientBuffer = clientBuffer
	}
	if cfg.Window <= 0 {
		cfg.Window = coalesceWindow
	}
	if cfg.ChartEvery <= 0 {
		cfg.ChartEvery = chartEvery
	}
	if cfg.GroupsEvery <= 0 {
		cfg.GroupsEvery = groupsEvery
	}
	return &Hub{
		cfg:     cfg,
		catalog: cfg.Catalog,
		log:     cfg.Logger,
		in:      make(chan dlq.Change, cfg.Queue),
		clients: map[*liveClient]struct{}{},

		jobs:         map[int64]replay.Job{},
		jobSignal:    make(chan struct{}, 1),
		finishedJobs: map[int64]bool{},
		itemsSentAt:  map[int64]time.Time{},
	}
}

// Publish hands a change to the hub. It never blocks: when the hub is
// behind and its queue is full the change is dropped, and every page is
// told to resync once the hub catches up.
func (h *Hub) Publish(c dlq.Change) {
	h.seq.Add(1)
	select {
	case h.in <- c:
	default:
		h.dropped.Add(1)
		h.overflow.Store(true)
	}
}

// Seq counts the changes published so far. A page records it when its
// request starts and sends it back when it opens /live: a change published
// in between, which neither the page nor the new connection has, makes the
// hub tell that page to resync.
func (h *Hub) Seq() int64 { return h.seq.Load() }

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

func onPage(page string) func(subscription) bool {
	return func(s subscription) bool { return s.page == page }
}

func everyPage(subscription) bool { return true }

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

var resyncFrame = encodeOp(liveOp{Op: "resync"})

// batch is the changes gathered in one coalescing window.
type batch struct {
	any      bool
	resync   bool
	jobs     bool            // PublishJob was called
	status   *dlq.Status     // the latest freshness
	counts   map[string]bool // entities whose counts row changed
	entities bool            // entities were added or deleted
	newIDs   []int64
	changed  map[int64]bool // gone or updated: rows to re-render
	groups   bool           // group counters changed
	waiting  bool           // deferred or scheduled messages changed
}

func (b *batch) add(c dlq.Change) {
	b.any = true
	if b.counts == nil {
		b.counts, b.changed = map[string]bool{}, map[int64]bool{}
	}
	switch c.Kind {
	case dlq.ChangeFreshness:
		b.status = c.Status
	case dlq.ChangeCounts:
		b.counts[c.Entity] = true
	case dlq.ChangeEntities:
		b.entities = true
	case dlq.ChangeNew:
		b.newIDs = append(b.newIDs, c.IDs...)
		b.groups = true
	case dlq.ChangeGone, dlq.ChangeUpdated:
		for _, id := range c.IDs {
			b.changed[id] = true
		}
		b.groups = b.groups || c.Kind == dlq.ChangeGone
	}
	if c.SubQueue == dlq.SubQueueMain && c.Entity != "" {
		// The overview's deferred column comes from the catalog, which
		// these changes move; so does the inventory.
		b.counts[c.Entity] = true
		b.waiting = true
	}
}

// throttle lets an update through at most once per every.
type throttle struct {
	every time.Duration
	last  time.Time
	due   bool
}

// ready reports whether a due update may go now, and marks it sent.
func (t *throttle) ready(now time.Time) bool {
	if !t.due || now.Sub(t.last) < t.every {
		return false
	}
	t.due, t.last = false, now
	return true
}

// Run renders and sends updates until ctx ends, then closes every
// connection.
func (h *Hub) Run(ctx context.Context) error {
	defer h.Close()
	var b batch
	chart := throttle{every: h.cfg.ChartEvery}
	groups := throttle{every: h.cfg.GroupsEvery}
	// The inventory lists deferred and scheduled messages oldest or
	// soonest first, where new rows are not simply prepended: it refetches,
	// at most as often as the groups table updates.
	inventory := throttle{every: h.cfg.GroupsEvery}
	var batchAt time.Time // when the open window closes
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	rearm := func(now time.Time) {
		var next time.Time
		consider := func(t time.Time) {
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
		if b.any {
			consider(batchAt)
		}
		for _, t := range []*throttle{&chart, &groups, &inventory} {
			if t.due {
				consider(t.last.Add(t.every))
			}
		}
		if next.IsZero() {
			timer.Stop()
			return
		}
		timer.Reset(max(next.Sub(now), 0))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-h.in:
			now := time.Now()
			if !b.any {
				batchAt = now.Add(h.cfg.Window)
			}
			b.add(c)
			rearm(now)
		case <-h.jobSignal:
			now := time.Now()
			if !b.any {
				batchAt = now.Add(h.cfg.Window)
			}
			b.any, b.jobs = true, true
			rearm(now)
		case <-timer.C:
			now := time.Now()
			if b.any && !now.Before(batchAt) {
				inventory.due = inventory.due || b.waiting && !b.resync
				h.flush(ctx, &b, &chart, &groups)
				b = batch{}
			}
			if chart.ready(now) {
				h.sendChart(ctx)
			}
			if groups.ready(now) {
				h.sendGroups(ctx)
			}
			if inventory.ready(now) {
				h.sendTo(onPage("inventory"), resyncFrame)
			}
			rearm(now)
		}
		// Checked after every receive: a change dropped while the queue
		// was full is followed by the queue's backlog, so this runs.
		if h.overflow.Swap(false) {
			h.log.Warn("live: the update queue overflowed; every page refetches", "dropped", h.dropped.Load())
			now := time.Now()
			if !b.any {
				batchAt = now.Add(h.cfg.Window)
			}
			b.any, b.resync = true, true
			rearm(now)
		}
	}
}

// flush sends what b changed to the pages that show it.
func (h *Hub) flush(ctx context.Context, b *batch, chart, groups *throttle) {
	if b.jobs {
		// Taken even when every page resyncs, so that they are not sent
		// again with the next window's changes.
		jobs := h.takeJobs()
		if !b.resync {
			h.sendJobs(ctx, jobs)
		}
		for _, j := range jobs {
			if b.resync && j.Status.Finished() {
				h.finishedJobs[j.ID] = true // the resync shows it finished
			}
		}
	}
	if b.resync {
		// Every page refetches everything: nothing throttled is left due.
		chart.due, groups.due = false, false
		h.sendTo(everyPage, resyncFrame)
		return
	}
	if b.status != nil {
		st := b.status
		f := &views.Freshness{Healthy: st.Healthy, LastSuccessAt: st.LastSuccessAt, ErrorSince: st.ErrorSince, Error: st.Error}
		home := views.Home{Mode: h.cfg.Mode, Namespace: h.cfg.Namespace, Freshness: f}
		if frame, ok := h.replace(ctx, views.FragmentID("freshness", ""), views.FreshnessPanel(home)); ok {
			h.sendTo(everyPage, frame)
		}
	}
	switch {
	case b.entities:
		// Rows come and go: the overview's table changes shape.
		h.sendTo(onPage("overview"), resyncFrame)
		chart.due = true
	case len(b.counts) > 0:
		h.sendOverview(ctx, b.counts)
		chart.due = true
	}
	if len(b.newIDs) > 0 {
		h.sendNew(ctx, b.newIDs)
	}
	if len(b.changed) > 0 {
		h.sendChanged(ctx, slices.Sorted(maps.Keys(b.changed)))
	}
	if b.groups || b.entities {
		groups.due = true
	}
}

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
		h.log.Warn("live: cannot render a fragment", "id", id, "error", err.Error())
		return nil, false
	}
	return encodeOp(liveOp{Op: "replace", ID: id, HTML: html}), true
}

// failed logs a catalog read the hub could not do and makes the pages that
// needed it refetch: they may not miss the update.
func (h *Hub) failed(ctx context.Context, what string, err error, want func(subscription) bool) {
	if ctx.Err() != nil {
		return // shutting down: Close ends every connection anyway
	}
	h.log.Warn("live: cannot read the catalog for an update; pages refetch", "update", what, "error", err.Error())
	h.sendTo(want, resyncFrame)
}

// sendOverview re-renders the rows of the entities whose counts changed and
// the totals.
func (h *Hub) sendOverview(ctx context.Context, changed map[string]bool) {
	if len(h.subscriptions(onPage("overview"))) == 0 {
		return
	}
	ents, err := h.catalog.ListEntities(ctx)
	if err != nil {
		h.failed(ctx, "overview", err, onPage("overview"))
		return
	}
	home := views.Home{Entities: overviewEntities(ents)}
	var frames [][]byte
	for _, e := range home.Entities {
		if !changed[e.Path] {
			continue
		}
		if f, ok := h.replace(ctx, views.FragmentID("entity", e.Path), views.EntityCounts(e)); ok {
			frames = append(frames, f)
		}
	}
	if f, ok := h.replace(ctx, views.FragmentID("totals", ""), views.Totals(home)); ok {
		frames = append(frames, f)
	}
	h.sendTo(onPage("overview"), frames...)
}

// overviewEntities are the entities the overview lists: every one not
// deleted, with the broker's counts and the catalog's deferred count.
func overviewEntities(ents []dlq.EntitySummary) []views.EntityRow {
	var out []views.EntityRow
	for _, e := range ents {
		if e.DeletedAt != nil {
			continue
		}
		out = append(out, views.EntityRow{Path: e.Path, Kind: string(e.Kind), Status: e.Status,
			Active: e.Counts.Active, DeadLetter: e.Counts.DeadLetter, TransferDeadLetter: e.Counts.TransferDeadLetter,
			Scheduled: e.Counts.Scheduled, Deferred: e.Deferred})
	}
	return out
}

// sendChart re-renders the overview's depth chart.
func (h *Hub) sendChart(ctx context.Context) {
	if len(h.subscriptions(onPage("overview"))) == 0 {
		return
	}
	c, err := depthChart(ctx, h.catalog, time.Now())
	if err != nil {
		h.failed(ctx, "depth chart", err, onPage("overview"))
		return
	}
	if f, ok := h.replace(ctx, views.FragmentID("depth-chart", ""), views.DepthChartFragment(c)); ok {
		h.sendTo(onPage("overview"), f)
	}
}

// sendNew prepends, on the first page of every message list, the new
// messages that match its filter, newest first.
func (h *Hub) sendNew(ctx context.Context, ids []int64) {
	lists := h.subscriptions(func(s subscription) bool { return s.page == "messages" && s.first })
	if len(lists) == 0 {
		return
	}
	if len(ids) > maxRowOps {
		h.sendTo(func(s subscription) bool { return s.page == "messages" && s.first }, resyncFrame)
		return
	}
	for _, sub := range lists {
		same := func(s subscription) bool { return s.key == sub.key }
		recs, err := h.catalog.MessagesByID(ctx, ids, sub.filter)
		if err != nil {
			h.failed(ctx, "new messages", err, same)
			continue
		}
		if len(recs) == 0 {
			continue
		}
		var buf bytes.Buffer
		var rerr error
		for _, r := range recs {
			if rerr = views.MessageRow(withoutPreview(messageItem(r), sub.hideBodies)).Render(ctx, &buf); rerr != nil {
				break
			}
		}
		if rerr != nil {
			h.log.Warn("live: cannot render message rows", "error", rerr.Error())
			h.sendTo(same, resyncFrame)
			continue
		}
		h.sendTo(same, encodeOp(liveOp{Op: "prepend", ID: views.FragmentID("message-rows", ""), HTML: buf.String()}))
	}
}

// sendChanged re-renders the rows of messages that left the broker or
// changed, on every message list (a page without the row ignores it), and
// makes a message's own page refetch.
func (h *Hub) sendChanged(ctx context.Context, ids []int64) {
	changed := map[int64]bool{}
	for _, id := range ids {
		changed[id] = true
	}
	h.sendTo(func(s subscription) bool { return s.page == "message" && changed[s.id] }, resyncFrame)

	lists := onPage("messages")
	if len(h.subscriptions(lists)) == 0 {
		return
	}
	if len(ids) > maxRowOps {
		h.sendTo(lists, resyncFrame)
		return
	}
	recs, err := h.catalog.MessagesByID(ctx, ids, dlq.Filter{IncludeGone: true})
	if err != nil {
		h.failed(ctx, "changed messages", err, lists)
		return
	}
	// Rows are rendered once for all lists, and once more without the
	// body preview if a list is a viewer's who may not read bodies.
	for _, hide := range []bool{false, true} {
		to := func(s subscription) bool { return lists(s) && s.hideBodies == hide }
		if hide && len(h.subscriptions(to)) == 0 {
			break
		}
		var frames [][]byte
		for _, r := range recs {
			id := views.FragmentID("message", strconv.FormatInt(r.ID, 10))
			if f, ok := h.replace(ctx, id, views.MessageRow(withoutPreview(messageItem(r), hide))); ok {
				frames = append(frames, f)
			}
		}
		h.sendTo(to, frames...)
	}
}

// sendGroups re-renders the failure groups page's table body.
func (h *Hub) sendGroups(ctx context.Context) {
	pages := onPage("groups")
	subs := h.subscriptions(pages)
	if len(subs) == 0 {
		return
	}
	all, err := h.catalog.ListGroups(ctx)
	if err != nil {
		h.failed(ctx, "groups", err, pages)
		return
	}
	for _, include := range []bool{false, true} {
		same := func(s subscription) bool { return s.page == "groups" && s.includeGone == include }
		if !slices.ContainsFunc(subs, same) {
			continue
		}
		if f, ok := h.replace(ctx, views.FragmentID("groups", ""), views.GroupRows(failureGroups(selectGroups(all, include, "")))); ok {
			h.sendTo(same, f)
		}
	}
}
