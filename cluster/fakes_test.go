package cluster_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// emptyBroker is a namespace without entities: each poll of an ingester
// over it lists nothing and records the read (SyncEntities), the write the
// tests count.
type emptyBroker struct{}

func (emptyBroker) Entities(context.Context) ([]dlq.Entity, error)   { return nil, nil }
func (emptyBroker) Settings(context.Context) ([]dlq.Settings, error) { return nil, nil }
func (emptyBroker) Peek(context.Context, string, dlq.SubQueue, int64, int) ([]dlq.Message, error) {
	return nil, nil
}

var errStale = errors.New("stale term")

// writes is what the catalogs of every term wrote, as a database that
// fences them would: a write with a term other than current is refused.
type writes struct {
	mu      sync.Mutex
	current int64
	byTerm  map[int64]int
	refused map[int64]int
	last    *time.Time
}

func newWrites() *writes { return &writes{byTerm: map[int64]int{}, refused: map[int64]int{}} }

func (w *writes) setCurrent(term int64) {
	w.mu.Lock()
	w.current = term
	w.mu.Unlock()
}

func (w *writes) counts() (byTerm, refused map[int64]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, r := map[int64]int{}, map[int64]int{}
	for k, v := range w.byTerm {
		b[k] = v
	}
	for k, v := range w.refused {
		r[k] = v
	}
	return b, r
}

func (w *writes) lastSuccess(context.Context) (*time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, nil
}

// termCatalog is a dlq.Catalog whose writes carry term.
type termCatalog struct {
	w    *writes
	term int64
}

func (c *termCatalog) write() error {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if c.term != c.w.current {
		c.w.refused[c.term]++
		return errStale
	}
	c.w.byTerm[c.term]++
	return nil
}

func (c *termCatalog) Cursors(context.Context) ([]dlq.Cursor, error) { return nil, nil }
func (c *termCatalog) SyncEntities(_ context.Context, _ []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	if err := c.write(); err != nil {
		return dlq.EntitySync{}, err
	}
	c.w.mu.Lock()
	at = at.UTC()
	c.w.last = &at
	c.w.mu.Unlock()
	return dlq.EntitySync{}, nil
}
func (c *termCatalog) SaveSettings(context.Context, []dlq.Settings) error { return c.write() }
func (c *termCatalog) ApplyPage(context.Context, dlq.Page) (dlq.PageResult, error) {
	return dlq.PageResult{}, c.write()
}
func (c *termCatalog) SaveCursor(context.Context, dlq.Cursor) error { return c.write() }
func (c *termCatalog) RecordDepth(context.Context, string, dlq.Counts, time.Time) error {
	return c.write()
}
func (c *termCatalog) PruneGone(context.Context, time.Time, int) (int, error) { return 0, c.write() }
func (c *termCatalog) MergeSearchIndex(context.Context, int) (bool, error)    { return false, nil }
func (c *termCatalog) LastSuccess(ctx context.Context) (*time.Time, error) {
	return c.w.lastSuccess(ctx)
}

// handLeases is a lease the test hands out and takes back: Run waits for a
// grant, leads until it is revoked, and waits for the next.
type handLeases struct {
	grants  chan int64
	mu      sync.Mutex
	revoke  context.CancelCauseFunc
	holder  string
	leading chan int64 // receives each term as lead starts
}

func newHandLeases() *handLeases {
	return &handLeases{grants: make(chan int64), leading: make(chan int64, 8)}
}

var errRevoked = errors.New("lease lost (revoked by the test)")

func (h *handLeases) Run(ctx context.Context, _ string, lead func(context.Context, int64) error) error {
	for {
		var term int64
		select {
		case <-ctx.Done():
			return nil
		case term = <-h.grants:
		}
		lctx, cancel := context.WithCancelCause(ctx)
		h.mu.Lock()
		h.revoke = cancel
		h.mu.Unlock()
		h.leading <- term
		err := lead(lctx, term)
		revoked := context.Cause(lctx) == errRevoked
		cancel(nil)
		if !revoked {
			return err
		}
	}
}

func (h *handLeases) take() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.revoke != nil {
		h.revoke(errRevoked)
		h.revoke = nil
	}
}

func (h *handLeases) setHolder(id string) {
	h.mu.Lock()
	h.holder = id
	h.mu.Unlock()
}

func (h *handLeases) Holder(context.Context, string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holder, nil
}
