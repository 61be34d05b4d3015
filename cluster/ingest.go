package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// ErrNotIngesting is what the catalog of an Ingester answers to a write
// while this replica does not hold the namespace's lease: the write is
// another replica's to make.
var ErrNotIngesting = errors.New("this replica does not ingest the namespace")

// IngesterConfig is what NewIngester needs.
type IngesterConfig struct {
	Namespace string
	Self      string // this replica's id
	Leases    Leases
	// Catalog opens the namespace's catalog for one term of its lease:
	// every write transaction of it fenced with the term (the PostgreSQL
	// store: replica.LeaseFence), or the plain catalog (SQLite).
	Catalog func(lease string, term int64) dlq.Catalog
	// New builds the namespace's ingester over catalog (dlq.New): one
	// for the life of the replica, run once per term.
	New func(catalog dlq.Catalog) *dlq.Ingester
	// LastSuccess reads the namespace's last successful read as the
	// catalog has it (written by whichever replica ingests): the
	// freshness a replica that does not ingest reports.
	LastSuccess func(ctx context.Context) (*time.Time, error)
	// Stale is how old that last success may be while the namespace is
	// healthy (the ingester's own bound: max(3 × poll, 5 s)).
	Stale time.Duration
	// CheckEvery is how often a replica that does not ingest reads the
	// lease's holder and the last success; 0 means 1 s.
	CheckEvery time.Duration
	// Publish, when set, receives the namespace's freshness
	// (dlq.ChangeFreshness) whenever it changes while another replica
	// ingests, as the ingester publishes its own where it runs: the open
	// pages' freshness panel turns when the ingesting replica stops
	// reading. It must not block.
	Publish func(dlq.Change)
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Ingester runs a namespace's dlq.Ingester only while this replica holds
// the namespace's ingest lease (IngestLease), stopping it the moment the
// lease is lost, with its writes fenced by the lease's term. It is the
// namespace's status source on every replica: the ingester's own freshness
// where it runs, the catalog's last success (written by the replica that
// ingests) elsewhere.
type Ingester struct {
	cfg   IngesterConfig
	lease string
	ing   *dlq.Ingester
	cat   termCatalog

	leading atomic.Bool
	mu      sync.Mutex
	holder  string // as last read while following
	known   bool   // holder and last were read at least once
	last    *time.Time
	readErr error
	// published is the follower's freshness last published (follow's
	// goroutine only).
	published *dlq.Status
}

// NewIngester builds the ingester of cfg.Namespace; Run starts it.
func NewIngester(cfg IngesterConfig) *Ingester {
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Ingester{cfg: cfg, lease: IngestLease(cfg.Namespace)}
	g.ing = cfg.New(&g.cat)
	if l, ok := cfg.Leases.(interface{ local() bool }); ok && l.local() {
		// One replica alone: it ingests from the start.
		g.leading.Store(true)
	}
	return g
}

// Dlq is the namespace's dlq.Ingester (for Removed).
func (g *Ingester) Dlq() *dlq.Ingester { return g.ing }

// Removed forwards to the ingester (dlq.Ingester.Removed): the replay
// engine of this replica removed messages. Another replica's ingester
// notices them gone with its next full pass.
func (g *Ingester) Removed(entity string, q dlq.SubQueue, n int) { g.ing.Removed(entity, q, n) }

// Leading reports whether this replica ingests the namespace now.
func (g *Ingester) Leading() bool { return g.leading.Load() }

// Run campaigns for the namespace's lease until ctx ends, running the
// ingester during each term it holds it. An ingester that fails by itself
// (its catalog cannot be loaded) ends Run with the error, as it ends a
// replica alone.
func (g *Ingester) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { g.follow(ctx) })
	return g.cfg.Leases.Run(ctx, g.lease, func(ctx context.Context, term int64) error {
		g.cat.set(g.cfg.Catalog(g.lease, term))
		g.leading.Store(true)
		g.cfg.Logger.Info("catalog: this replica ingests the namespace", "namespace", g.cfg.Namespace, "replica", g.cfg.Self, "term", term)
		defer func() {
			g.leading.Store(false)
			g.cat.set(nil)
			if cause := context.Cause(ctx); ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
				g.cfg.Logger.Warn("catalog: this replica stopped ingesting the namespace", "namespace", g.cfg.Namespace,
					"replica", g.cfg.Self, "term", term, "reason", cause.Error())
			}
		}()
		return g.ing.Run(ctx)
	})
}

// follow reads who ingests and the last success while this replica does
// not, for Status.
func (g *Ingester) follow(ctx context.Context) {
	t := time.NewTicker(g.cfg.CheckEvery)
	defer t.Stop()
	for {
		if !g.leading.Load() {
			holder, err := g.cfg.Leases.Holder(ctx, g.lease)
			var last *time.Time
			if err == nil {
				last, err = g.cfg.LastSuccess(ctx)
			}
			if ctx.Err() != nil {
				return
			}
			g.mu.Lock()
			if err != nil {
				g.readErr = err
			} else {
				g.holder, g.last, g.known, g.readErr = holder, last, true, nil
			}
			g.mu.Unlock()
			g.publishFollower()
		} else {
			g.published = nil // the ingester publishes its own
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publishFollower publishes the follower's status when a page would show
// it differently from the last one published.
func (g *Ingester) publishFollower() {
	if g.cfg.Publish == nil || g.leading.Load() {
		return
	}
	st := g.Status()
	if p := g.published; p != nil && p.Healthy == st.Healthy && p.Error == st.Error && p.Replica == st.Replica &&
		(st.Healthy || sameTime(p.LastSuccessAt, st.LastSuccessAt)) {
		return
	}
	g.published = &st
	c := st
	g.cfg.Publish(dlq.Change{Kind: dlq.ChangeFreshness, Namespace: g.cfg.Namespace, Status: &c, At: g.cfg.Now()})
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// Status is the namespace's freshness: where this replica ingests, the
// ingester's own; elsewhere, healthy while the catalog's last success is
// no older than Stale, with Replica naming the replica that ingests.
func (g *Ingester) Status() dlq.Status {
	if g.leading.Load() {
		st := g.ing.Status()
		st.Replica = g.cfg.Self
		return st
	}
	g.mu.Lock()
	holder, last, known, readErr := g.holder, g.last, g.known, g.readErr
	g.mu.Unlock()
	if !known && readErr == nil {
		// Not read yet (the first second): the ingester's own idle status.
		return g.ing.Status()
	}
	st := dlq.Status{Namespace: g.cfg.Namespace, LastSuccessAt: last, Replica: holder}
	now := g.cfg.Now()
	if readErr != nil {
		st.Error = fmt.Sprintf("cannot read who ingests the namespace: %v", readErr)
		return st
	}
	if last != nil && now.Sub(*last) <= g.cfg.Stale {
		st.Healthy = true
		return st
	}
	who := "no replica holds its ingest lease (another takes over within seconds of the last one stopping)"
	if holder != "" {
		who = "replica " + holder + " ingests it"
	}
	if last == nil {
		st.Error = "the namespace has never been read: " + who
		return st
	}
	since := last.Add(g.cfg.Stale).UTC()
	st.ErrorSince = &since
	st.Error = fmt.Sprintf("no successful read from the namespace for %s: %s", now.Sub(*last).Round(time.Second), who)
	return st
}

// termCatalog is the catalog of the current term, for the ingester built
// once: each term sets it, and a write outside a term is refused.
type termCatalog struct {
	cur atomic.Pointer[dlq.Catalog]
}

func (t *termCatalog) set(c dlq.Catalog) {
	if c == nil {
		t.cur.Store(nil)
		return
	}
	t.cur.Store(&c)
}

func (t *termCatalog) get() (dlq.Catalog, error) {
	c := t.cur.Load()
	if c == nil {
		return nil, ErrNotIngesting
	}
	return *c, nil
}

func (t *termCatalog) Cursors(ctx context.Context) ([]dlq.Cursor, error) {
	c, err := t.get()
	if err != nil {
		return nil, err
	}
	return c.Cursors(ctx)
}

func (t *termCatalog) SyncEntities(ctx context.Context, listed []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	c, err := t.get()
	if err != nil {
		return dlq.EntitySync{}, err
	}
	return c.SyncEntities(ctx, listed, at)
}

func (t *termCatalog) SaveSettings(ctx context.Context, settings []dlq.Settings) error {
	c, err := t.get()
	if err != nil {
		return err
	}
	return c.SaveSettings(ctx, settings)
}

func (t *termCatalog) ApplyPage(ctx context.Context, p dlq.Page) (dlq.PageResult, error) {
	c, err := t.get()
	if err != nil {
		return dlq.PageResult{}, err
	}
	return c.ApplyPage(ctx, p)
}

func (t *termCatalog) SaveCursor(ctx context.Context, cur dlq.Cursor) error {
	c, err := t.get()
	if err != nil {
		return err
	}
	return c.SaveCursor(ctx, cur)
}

func (t *termCatalog) RecordDepth(ctx context.Context, entity string, counts dlq.Counts, at time.Time) error {
	c, err := t.get()
	if err != nil {
		return err
	}
	return c.RecordDepth(ctx, entity, counts, at)
}

func (t *termCatalog) PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	c, err := t.get()
	if err != nil {
		return 0, err
	}
	return c.PruneGone(ctx, cutoff, batch)
}

func (t *termCatalog) MergeSearchIndex(ctx context.Context, pages int) (bool, error) {
	c, err := t.get()
	if err != nil {
		return false, err
	}
	return c.MergeSearchIndex(ctx, pages)
}

func (t *termCatalog) LastSuccess(ctx context.Context) (*time.Time, error) {
	c, err := t.get()
	if err != nil {
		return nil, err
	}
	return c.LastSuccess(ctx)
}
