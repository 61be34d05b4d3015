package dlq

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Config configures an Ingester. Zero durations and sizes take the defaults
// shown.
type Config struct {
	Broker  Broker
	Catalog Catalog
	Logger  *slog.Logger
	// Namespace is the name of the namespace the ingester reads (as
	// configured; never a secret): Status and every Change carry it. The
	// Catalog is that namespace's (store.Store.Namespace), so the entities
	// it writes are the namespace's own.
	Namespace string
	// Publish receives every Change. It must not block (the web hub drops
	// slow subscribers instead). Nil discards.
	Publish func(Change)
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	Poll            time.Duration // count reads; default 1 s
	SettingsEvery   time.Duration // settings reads; default 30 s
	Sweep           time.Duration // full pass of every entity at least this often; default 5 min
	MinFullInterval time.Duration // full passes of one entity at least this far apart; default 10 s
	MainInterval    time.Duration // main-entity (deferred, scheduled) passes at least this far apart; default 10 s
	PageSize        int           // messages per peek; default 250
	BatchSize       int           // most messages written in one transaction; default 1000
	Workers         int           // entities read at once; default 4
	Retention       time.Duration // keep gone messages this long; default 30 days; negative keeps them forever
	PruneEvery      time.Duration // default 1 min
	PruneBatch      int           // messages deleted per transaction; default 500
	DepthEvery      time.Duration // a depth sample at least this often even when unchanged; default 5 min
	DepthMinGap     time.Duration // and at most this often when changing; default 5 s
	MaxBackoff      time.Duration // longest wait after broker errors; default 1 min
	// Stale is how long without a successful read makes Status unhealthy
	// even while a read is still waiting for the broker; default
	// max(3 × Poll, 5 s).
	Stale time.Duration
	// PollTimeout is the deadline of each broker read of a poll (the
	// entity listing, the settings listing); default max(30 s, Stale).
	PollTimeout time.Duration
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Poll, time.Second)
	def(&c.SettingsEvery, 30*time.Second)
	def(&c.Sweep, 5*time.Minute)
	def(&c.MinFullInterval, 10*time.Second)
	def(&c.MainInterval, 10*time.Second)
	def(&c.Retention, 30*24*time.Hour)
	def(&c.PruneEvery, time.Minute)
	def(&c.DepthEvery, 5*time.Minute)
	def(&c.DepthMinGap, 5*time.Second)
	def(&c.MaxBackoff, time.Minute)
	def(&c.Stale, max(3*c.Poll, 5*time.Second))
	def(&c.PollTimeout, max(30*time.Second, c.Stale))
	if c.PageSize <= 0 {
		c.PageSize = 250
	}
	if c.BatchSize < c.PageSize {
		c.BatchSize = max(4*c.PageSize, 1000)
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.PruneBatch <= 0 {
		c.PruneBatch = 500
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Publish == nil {
		c.Publish = func(Change) {}
	}
	if publish, ns := c.Publish, c.Namespace; ns != "" {
		c.Publish = func(ch Change) {
			ch.Namespace = ns
			publish(ch)
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Ingester keeps the catalog current with the broker (see the package doc).
type Ingester struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	status    Status     // as the poll loop last recorded it (see freshnessLocked)
	started   time.Time  // when Run started; zero before
	waiting   bool       // a broker read of the poll loop is in flight
	attemptAt *time.Time // start of the first read since the last success
	entities  map[string]Entity
	settings  map[string]Settings
	cursors   map[cursorKey]*cursorState
	busy      map[string]bool      // entities being read by a worker
	retryAt   map[string]time.Time // per-entity backoff after errors
	failures  map[string]int
	depthAt   map[string]time.Time // last depth sample
	depthOf   map[string]Counts

	pubMu     sync.Mutex // orders freshness changes
	published *Status    // the last freshness published

	slots chan struct{} // one per concurrent entity read
	wg    sync.WaitGroup
}

// New builds an Ingester; Run starts it.
func New(cfg Config) *Ingester {
	cfg.defaults()
	return &Ingester{
		cfg:      cfg,
		log:      cfg.Logger,
		status:   Status{Namespace: cfg.Namespace},
		entities: map[string]Entity{},
		settings: map[string]Settings{},
		cursors:  map[cursorKey]*cursorState{},
		busy:     map[string]bool{},
		retryAt:  map[string]time.Time{},
		failures: map[string]int{},
		depthAt:  map[string]time.Time{},
		depthOf:  map[string]Counts{},
		slots:    make(chan struct{}, cfg.Workers),
	}
}

// Status reports the ingester's freshness at this moment: unhealthy as soon
// as a read fails, or once no read has succeeded for Config.Stale, even
// while a read is still waiting for the broker.
func (in *Ingester) Status() Status {
	now := in.cfg.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.freshnessLocked(now)
}

// Run reads the broker until ctx ends. It returns nil when ctx ends, and an
// error only when the catalog itself fails to load.
func (in *Ingester) Run(ctx context.Context) error {
	cursors, err := in.cfg.Catalog.Cursors(ctx)
	if err != nil {
		return fmt.Errorf("catalog: load read state: %w", err)
	}
	last, err := in.cfg.Catalog.LastSuccess(ctx)
	if err != nil {
		return fmt.Errorf("catalog: load last success: %w", err)
	}
	in.mu.Lock()
	for _, c := range cursors {
		in.cursors[cursorKey{c.Entity, c.SubQueue}] = &cursorState{Cursor: c}
	}
	in.status.LastSuccessAt = last
	in.started = in.cfg.Now()
	initial := in.status
	in.mu.Unlock()
	// Pages show the initial status already: only changes from it are
	// published.
	in.pubMu.Lock()
	in.published = &initial
	in.pubMu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		in.wg.Wait()
	}()
	if in.cfg.Retention > 0 {
		in.wg.Go(func() { in.pruneLoop(ctx) })
	}
	in.wg.Go(func() { in.watchFreshness(ctx) })

	var settingsAt time.Time
	failures := 0
	for {
		wait := in.cfg.Poll
		now := in.cfg.Now()
		if now.Sub(settingsAt) >= in.cfg.SettingsEvery {
			if err := in.readSettings(ctx); err != nil {
				in.fail(err)
			} else {
				settingsAt = now
			}
		}
		if err := in.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			wait = in.backoff(failures, err)
			in.fail(err)
			in.log.Warn("catalog: cannot read Service Bus; showing the last snapshot", "error", err.Error(),
				"retry_in", wait.String())
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}
