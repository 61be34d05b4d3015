package cluster_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/cluster"
	"github.com/dlqdash/dlqdash/dlq"
)

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newGated is a namespace "prod" ingested by replica "a" only while leases
// lets it, each term writing through a catalog that carries the term.
func newGated(leases cluster.Leases, w *writes) (*cluster.Ingester, *[]int64) {
	g, opened, _ := newGatedPublishing(leases, w)
	return g, opened
}

// published collects the freshness changes a gated ingester publishes.
type published struct {
	mu  sync.Mutex
	all []dlq.Status
}

func (p *published) add(c dlq.Change) {
	if c.Kind != dlq.ChangeFreshness || c.Status == nil {
		return
	}
	p.mu.Lock()
	p.all = append(p.all, *c.Status)
	p.mu.Unlock()
}

func (p *published) last() (dlq.Status, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.all) == 0 {
		return dlq.Status{}, 0
	}
	return p.all[len(p.all)-1], len(p.all)
}

func newGatedPublishing(leases cluster.Leases, w *writes) (*cluster.Ingester, *[]int64, *published) {
	pub := &published{}
	var opened []int64
	g := cluster.NewIngester(cluster.IngesterConfig{
		Namespace: "prod",
		Self:      "a",
		Leases:    leases,
		Catalog: func(lease string, term int64) dlq.Catalog {
			if lease != "ingest/prod" {
				panic("catalog opened for lease " + lease)
			}
			opened = append(opened, term)
			return &termCatalog{w: w, term: term}
		},
		New: func(c dlq.Catalog) *dlq.Ingester {
			return dlq.New(dlq.Config{Broker: emptyBroker{}, Catalog: c, Namespace: "prod", Poll: 10 * time.Millisecond})
		},
		LastSuccess: w.lastSuccess,
		Stale:       time.Second,
		CheckEvery:  20 * time.Millisecond,
		Publish:     pub.add,
	})
	return g, &opened, pub
}

// The ingester runs only while its replica holds the namespace's lease:
// nothing is written before the lease is granted, every write of a term
// goes through that term's catalog, writing stops when the lease is lost,
// and the next term writes with its own term; while another replica holds
// the lease, the status names it and follows the catalog's last success.
func TestIngesterRunsOnlyWhileHoldingTheLease(t *testing.T) {
	w := newWrites()
	leases := newHandLeases()
	leases.setHolder("b")
	g, opened, pub := newGatedPublishing(leases, w)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// Replica b ingests and has never succeeded: not healthy, and it says
	// who ingests.
	waitFor(t, 5*time.Second, "the follower's status", func() bool { return g.Status().Replica == "b" })
	if st := g.Status(); st.Healthy || !strings.Contains(st.Error, "replica b ingests it") {
		t.Errorf("status while b ingests and never read: %+v", st)
	}
	// ... and the open pages hear it once (it does not change).
	waitFor(t, 5*time.Second, "the follower's freshness published", func() bool { _, n := pub.last(); return n > 0 })
	time.Sleep(100 * time.Millisecond)
	if st, n := pub.last(); n != 1 || st.Healthy || st.Replica != "b" {
		t.Errorf("published %d freshness changes, the last %+v; want one, unhealthy, naming b", n, st)
	}
	time.Sleep(100 * time.Millisecond)
	if by, _ := w.counts(); len(by) != 0 || g.Leading() {
		t.Fatalf("wrote %v (leading %v) without the lease", by, g.Leading())
	}

	// Term 1.
	w.setCurrent(1)
	leases.setHolder("a")
	leases.grants <- 1
	<-leases.leading
	waitFor(t, 5*time.Second, "writes of term 1", func() bool { by, _ := w.counts(); return by[1] >= 3 })
	if st := g.Status(); !g.Leading() || st.Replica != "a" || !st.Healthy {
		t.Errorf("status while a ingests: %+v (leading %v)", st, g.Leading())
	}

	// Lost: another replica takes term 2; a stops writing.
	leases.take()
	waitFor(t, 5*time.Second, "a to stop leading", func() bool { return !g.Leading() })
	leases.setHolder("b")
	w.setCurrent(2)
	before, _ := w.counts()
	time.Sleep(150 * time.Millisecond)
	after, refused := w.counts()
	if after[1] != before[1] || refused[1] != 0 {
		t.Errorf("term 1 kept writing after the lease was lost: %d then %d writes, %d refused", before[1], after[1], refused[1])
	}
	// b's reads keep the namespace fresh: a reports it healthy, naming b.
	w.mu.Lock()
	now := time.Now().UTC()
	w.last = &now
	w.mu.Unlock()
	waitFor(t, 5*time.Second, "the follower's healthy status", func() bool {
		st := g.Status()
		return st.Healthy && st.Replica == "b"
	})
	waitFor(t, 5*time.Second, "the healthy freshness published", func() bool { st, _ := pub.last(); return st.Healthy && st.Replica == "b" })
	// b stops reading: past Stale, the pages hear that the namespace is
	// stale, naming b.
	waitFor(t, 5*time.Second, "the stale freshness published", func() bool {
		st, _ := pub.last()
		return !st.Healthy && strings.Contains(st.Error, "replica b ingests it")
	})

	// Term 3 comes back to a: its writes carry term 3.
	w.setCurrent(3)
	leases.setHolder("a")
	leases.grants <- 3
	<-leases.leading
	waitFor(t, 5*time.Second, "writes of term 3", func() bool { by, _ := w.counts(); return by[3] >= 3 })
	if got := *opened; len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("catalogs opened for terms %v, want [1 3]", got)
	}
}

// A replica alone (Solo) ingests from the moment it is built: its status
// is the ingester's own, naming it, and every write goes through the
// catalog of term 1.
func TestSoloIngestsAtOnce(t *testing.T) {
	w := newWrites()
	w.setCurrent(1)
	g, opened := newGated(cluster.Solo{ID: "a"}, w)
	if !g.Leading() || g.Status().Replica != "a" {
		t.Fatalf("a solo replica before Run: leading %v, status %+v", g.Leading(), g.Status())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	waitFor(t, 5*time.Second, "writes", func() bool { by, _ := w.counts(); return by[1] >= 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := *opened; len(got) != 1 || got[0] != 1 {
		t.Errorf("catalogs opened for terms %v, want [1]", got)
	}
}

// Outside a term the ingester's catalog refuses writes: nothing reaches
// the store from a replica that does not hold the lease.
func TestCatalogRefusesWritesOutsideATerm(t *testing.T) {
	w := newWrites()
	leases := newHandLeases()
	var cat dlq.Catalog
	cluster.NewIngester(cluster.IngesterConfig{Namespace: "prod", Self: "a", Leases: leases,
		Catalog: func(string, int64) dlq.Catalog { return &termCatalog{w: w} },
		New: func(c dlq.Catalog) *dlq.Ingester {
			cat = c
			return dlq.New(dlq.Config{Broker: emptyBroker{}, Catalog: c})
		},
		LastSuccess: w.lastSuccess})
	if _, err := cat.SyncEntities(t.Context(), nil, time.Now()); !errors.Is(err, cluster.ErrNotIngesting) {
		t.Errorf("a write outside a term: %v, want ErrNotIngesting", err)
	}
}
