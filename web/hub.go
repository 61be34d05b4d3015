package web

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// The hub: what it is, how changes come in (Publish, PublishJob) and how
// they go out (Run, flush). Its other parts: the connections and their
// subscriptions (hub_registry.go), the coalescing of changes
// (hub_batch.go), the wire format and fragment rendering (hub_wire.go), the
// fragments of each page (hub_fragments.go, hub_jobs.go).

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
	// newRowsEvery throttles the message lists' new rows: each distinct
	// list costs a catalog query (a full-text search, often), so each is
	// queried at most this often, the new ids gathered in between.
	newRowsEvery = 250 * time.Millisecond
	// maxListQueries caps the catalog queries of one round of new rows:
	// with more distinct lists open, rounds come less often (newRowsEvery
	// times the number of caps they need), so the hub's query rate stays
	// under maxListQueries per newRowsEvery however many pages are open.
	maxListQueries = 32
	// DefaultMaxLiveConnections and DefaultMaxLivePerActor cap the open
	// websockets, all of them and one actor's (a person, a token; the
	// local user of --auth none per address).
	DefaultMaxLiveConnections = 500
	DefaultMaxLivePerActor    = 50
)

// HubConfig is what NewHub needs. Zero sizes and durations take the defaults
// above.
type HubConfig struct {
	Catalog Catalog
	// JobItems lists a job's messages, for the live table of a job's page;
	// nil leaves that table to refresh when the job finishes.
	JobItems JobItemLister
	// Outcomes finds the jobs whose copies are among new catalog messages
	// (dead-lettered again), so that their pages show it live; nil leaves
	// that to the next job change.
	Outcomes JobOutcomes
	Logger   *slog.Logger
	// Mode and Namespace word the freshness panel, as on the overview.
	Mode, Namespace string
	// Namespaces are the configured namespaces (web.Config.Namespaces):
	// with more than one, message rows carry a namespace column.
	Namespaces []string
	// Statuses, with more than one namespace, is each one's status, for
	// the overview's live namespaces panel; nil leaves the panel as the
	// page was rendered.
	Statuses func() []dlq.Status

	Queue        int           // changes buffered by Publish
	ClientBuffer int           // frames buffered per connection
	Window       time.Duration // coalescing window
	ChartEvery   time.Duration
	GroupsEvery  time.Duration
	NewRowsEvery time.Duration // how often a message list's new rows may be queried

	// MaxConnections and MaxPerActor cap the live connections, in all
	// and per actor; over either a connection is closed at once with
	// closeTooMany and a reason the page shows.
	MaxConnections int
	MaxPerActor    int

	// Remote wakes the hub when another replica changed the catalog or a
	// job (replica.Listener.Wake: LISTEN/NOTIFY, carrying no data). What
	// changed is not known here, so every open page refetches what it
	// shows from the tables (a group's page its live parts only, as for a
	// change here: never its triage form), at most once per RemoteEvery
	// (default 1 s); a wake-up that is lost loses nothing the next one does
	// not bring.
	// Nil: no other replica (SQLite).
	Remote      <-chan struct{}
	RemoteEvery time.Duration
	// Published, when set, is called after every Publish (a change made
	// here, committed): serve tells the other replicas with it
	// (cluster.Notifier). It must not block.
	Published func()
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
	// perActor counts each actor's connections (the per-actor cap);
	// refusedLogAt is when a refusal over a cap was last logged.
	perActor     map[string]int
	refusedLogAt time.Time

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
	// groupSigs are, per scope and group key, what the open group pages
	// were last told of their group (Run's goroutine only).
	groupSigs map[string]string
	// pendingNew are new message ids not yet sent to the message lists,
	// held back by the newRowsEvery throttle (Run's goroutine only).
	pendingNew []int64
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
	if cfg.NewRowsEvery <= 0 {
		cfg.NewRowsEvery = newRowsEvery
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxLiveConnections
	}
	if cfg.MaxPerActor <= 0 {
		cfg.MaxPerActor = DefaultMaxLivePerActor
	}
	if cfg.RemoteEvery <= 0 {
		cfg.RemoteEvery = time.Second
	}
	return &Hub{
		cfg:     cfg,
		catalog: cfg.Catalog,
		log:     cfg.Logger,
		in:      make(chan dlq.Change, cfg.Queue),
		clients: map[*liveClient]struct{}{},

		perActor: map[string]int{},

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
	if h.cfg.Published != nil && c.Kind != dlq.ChangeFreshness {
		// Freshness is this replica's own view, not a change to the
		// tables.
		h.cfg.Published()
	}
}

// Seq counts the changes published so far. A page records it when its
// request starts and sends it back when it opens /live: a change published
// in between, which neither the page nor the new connection has, makes the
// hub tell that page to resync.
func (h *Hub) Seq() int64 { return h.seq.Load() }

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
	newRows := throttle{every: h.cfg.NewRowsEvery}
	// Another replica's changes: every page refetches (HubConfig.Remote).
	remote := throttle{every: h.cfg.RemoteEvery}
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
		for _, t := range []*throttle{&chart, &groups, &inventory, &newRows, &remote} {
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
		case <-h.cfg.Remote:
			remote.due = true
			rearm(time.Now())
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
				h.flush(ctx, &b, &chart, &groups, &newRows)
				b = batch{}
			}
			if newRows.ready(now) {
				ids := h.pendingNew
				h.pendingNew = nil
				lists := h.sendNew(ctx, ids)
				newRows.every = h.cfg.NewRowsEvery * time.Duration(max(1, (lists+maxListQueries-1)/maxListQueries))
			}
			if chart.ready(now) {
				h.sendChart(ctx)
			}
			if groups.ready(now) {
				h.sendGroups(ctx)
			}
			if inventory.ready(now) {
				h.sendTo(onPage(views.LiveInventory), resyncFrame)
			}
			if remote.ready(now) {
				h.sendRemote()
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

// sendRemote tells the open pages that another replica changed the
// catalog or a job (HubConfig.Remote). Every page refetches itself
// (resync), except a failure group's: its triage form may be half filled
// in, and a refetch would put back the saved values of every field but the
// one being typed in, each time any replica ingests something. It fetches
// its live parts (counts, status, chart) instead, as it does for a change
// made here (sendGroupPages).
func (h *Hub) sendRemote() {
	group := onPage(views.LiveGroup)
	h.sendTo(func(s subscription) bool { return !group(s) }, resyncFrame)
	h.sendTo(group, groupRecountFrame)
}

// flush sends what b changed to the pages that show it.
func (h *Hub) flush(ctx context.Context, b *batch, chart, groups, newRows *throttle) {
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
		chart.due, groups.due, newRows.due = false, false, false
		h.pendingNew = nil
		h.sendTo(everyPage, resyncFrame)
		return
	}
	if b.status != nil {
		for _, sc := range h.scopes(everyPage) {
			st := *b.status
			if !sc.all {
				// Access rules: the summary of the namespaces the
				// connection may view (none known: nothing is sent).
				if h.cfg.Statuses == nil {
					continue
				}
				st = dlq.Summarize(scopeStatuses(sc, h.cfg.Statuses()))
			}
			f := &views.Freshness{Healthy: st.Healthy, LastSuccessAt: st.LastSuccessAt, ErrorSince: st.ErrorSince, Error: st.Error}
			home := views.Home{Mode: h.cfg.Mode, Namespace: h.cfg.Namespace, Freshness: f}
			if frame, ok := h.replace(ctx, views.FragmentID("freshness", ""), views.FreshnessPanel(home)); ok {
				h.sendTo(inScope(everyPage, sc), frame)
			}
		}
		h.sendNamespaces(ctx, nil)
	}
	switch {
	case b.entities:
		// Rows come and go: the overview's table changes shape.
		h.sendTo(onPage(views.LiveOverview), resyncFrame)
		chart.due = true
	case len(b.counts) > 0:
		h.sendOverview(ctx, b.counts)
		chart.due = true
	}
	if len(b.newIDs) > 0 {
		// Sent by Run when the throttle lets them (newRowsEvery).
		h.pendingNew = append(h.pendingNew, b.newIDs...)
		newRows.due = true
		h.sendOutcomes(ctx, b.newIDs)
	}
	if len(b.changed) > 0 {
		h.sendChanged(ctx, slices.Sorted(maps.Keys(b.changed)))
	}
	if b.groups || b.entities {
		groups.due = true
	}
}
