package dlq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"
)

// Config configures an Ingester. Zero durations and sizes take the defaults
// shown.
type Config struct {
	Broker  Broker
	Catalog Catalog
	Logger  *slog.Logger
	// Namespace names the namespace in Status (host[:port], never a secret).
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
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Ingester keeps the catalog current with the broker (see the package doc).
type Ingester struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	status   Status
	entities map[string]Entity
	settings map[string]Settings
	cursors  map[cursorKey]*cursorState
	busy     map[string]bool      // entities being read by a worker
	retryAt  map[string]time.Time // per-entity backoff after errors
	failures map[string]int
	depthAt  map[string]time.Time // last depth sample
	depthOf  map[string]Counts

	slots chan struct{} // one per concurrent entity read
	wg    sync.WaitGroup
}

type cursorKey struct {
	entity string
	q      SubQueue
}

// cursorState is a Cursor plus what only lives in memory.
type cursorState struct {
	Cursor
	pendingFull bool // counts did not reconcile: a full pass is due when allowed
	// removed counts messages this process removed from the subqueue (see
	// Removed) that the catalog still holds as present until a full pass.
	removed int64
}

// expected is how many messages the broker should hold by the catalog.
func (c *cursorState) expected() int64 { return max(c.Present-c.removed, 0) }

// Removed tells the ingester that this process (the replay engine) removed
// n messages from entity's subqueue q. Until a full pass marks them gone,
// it expects n fewer there, so that messages arriving meanwhile (a replayed
// copy dead-lettered again) still read as new instead of cancelling the
// removal out in the count; and a full pass is due as soon as it is allowed.
func (in *Ingester) Removed(entity string, q SubQueue, n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := in.cursors[cursorKey{entity, q}]
	if c == nil || n <= 0 {
		return
	}
	c.removed += int64(n)
	c.pendingFull = true
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

// Status reports the ingester's freshness.
func (in *Ingester) Status() Status {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.status
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
	in.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		in.wg.Wait()
	}()
	if in.cfg.Retention > 0 {
		in.wg.Go(func() { in.pruneLoop(ctx) })
	}

	var settingsAt time.Time
	failures := 0
	for {
		wait := in.cfg.Poll
		now := in.cfg.Now()
		if now.Sub(settingsAt) >= in.cfg.SettingsEvery {
			if err := in.readSettings(ctx); err != nil {
				in.fail(ctx, err)
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
			in.fail(ctx, err)
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

// backoff is the wait after n consecutive failures: doubling from the poll
// interval up to MaxBackoff, never shorter than a throttled broker asked.
func (in *Ingester) backoff(n int, err error) time.Duration {
	d := in.cfg.Poll << min(n, 16)
	d = min(d, in.cfg.MaxBackoff)
	var te *ThrottledError
	if errors.As(err, &te) && te.RetryAfter > d {
		d = te.RetryAfter
	}
	return d
}

func (in *Ingester) fail(ctx context.Context, err error) {
	now := in.cfg.Now().UTC()
	in.mu.Lock()
	changed := in.status.Healthy || in.status.Error != err.Error()
	if in.status.Healthy || in.status.ErrorSince == nil {
		in.status.ErrorSince = &now
	}
	in.status.Healthy = false
	in.status.Error = err.Error()
	st := in.status
	in.mu.Unlock()
	if changed {
		in.cfg.Publish(Change{Kind: ChangeFreshness, Status: &st, At: now})
	}
}

// succeed records a successful read at now, the time SyncEntities stored.
func (in *Ingester) succeed(now time.Time) {
	now = now.UTC()
	in.mu.Lock()
	changed := !in.status.Healthy
	in.status.Healthy = true
	in.status.Error = ""
	in.status.ErrorSince = nil
	in.status.LastSuccessAt = &now
	st := in.status
	in.mu.Unlock()
	if changed {
		in.cfg.Publish(Change{Kind: ChangeFreshness, Status: &st, At: now})
	}
}

func (in *Ingester) readSettings(ctx context.Context) error {
	st, err := in.cfg.Broker.Settings(ctx)
	if err != nil {
		return fmt.Errorf("read entity settings: %w", err)
	}
	in.mu.Lock()
	clear(in.settings)
	for _, s := range st {
		in.settings[s.Path] = s
	}
	in.mu.Unlock()
	// Settings of entities the catalog has not listed yet are saved at the
	// next settings read; SaveSettings ignores unknown paths.
	if err := in.cfg.Catalog.SaveSettings(ctx, st); err != nil {
		return fmt.Errorf("catalog: save settings: %w", err)
	}
	return nil
}

// poll reads every entity's counts, records them, and hands entities whose
// subqueues need a pass to the workers.
func (in *Ingester) poll(ctx context.Context) error {
	ents, err := in.cfg.Broker.Entities(ctx)
	if err != nil {
		return fmt.Errorf("list entities: %w", err)
	}
	now := in.cfg.Now()
	sync, err := in.cfg.Catalog.SyncEntities(ctx, ents, now)
	if err != nil {
		return fmt.Errorf("catalog: record entities: %w", err)
	}
	in.succeed(now)
	if len(sync.Added) > 0 || len(sync.Deleted) > 0 {
		in.cfg.Publish(Change{Kind: ChangeEntities, At: now})
	}
	if len(sync.Gone) > 0 {
		in.cfg.Publish(Change{Kind: ChangeGone, IDs: sync.Gone, At: now})
	}

	in.mu.Lock()
	for _, p := range sync.Deleted {
		in.log.Info("catalog: entity deleted; its messages are kept as gone", "entity", p)
		delete(in.entities, p)
		for _, q := range []SubQueue{SubQueueMain, SubQueueDeadLetter, SubQueueTransferDeadLetter} {
			delete(in.cursors, cursorKey{p, q})
		}
	}
	for _, p := range sync.Added {
		// Recreated entities number from 1 again: forget any old cursors.
		for _, q := range []SubQueue{SubQueueMain, SubQueueDeadLetter, SubQueueTransferDeadLetter} {
			if c := in.cursors[cursorKey{p, q}]; c != nil && c.LastPassAt != nil {
				delete(in.cursors, cursorKey{p, q})
			}
		}
	}
	var changed []Entity
	var due []string
	for _, e := range ents {
		old, ok := in.entities[e.Path]
		in.entities[e.Path] = e
		if !ok || old.Counts != e.Counts {
			changed = append(changed, e)
		}
		if e.Kind != KindTopic && !in.busy[e.Path] && now.After(in.retryAt[e.Path]) && in.needsPassLocked(e, now) {
			due = append(due, e.Path)
		}
	}
	in.mu.Unlock()

	for _, e := range changed {
		c := e.Counts
		in.cfg.Publish(Change{Kind: ChangeCounts, Entity: e.Path, Counts: &c, At: now})
	}
	for _, e := range ents {
		in.sampleDepth(ctx, e, now)
	}

	// Each due entity gets its own goroutine, which waits for a worker
	// slot: the poll loop never waits for a slow entity, and busy keeps
	// one reader per entity.
	for _, p := range due {
		in.mu.Lock()
		in.busy[p] = true
		in.mu.Unlock()
		in.wg.Go(func() { in.runEntity(ctx, p) })
	}
	return nil
}

func (in *Ingester) sampleDepth(ctx context.Context, e Entity, now time.Time) {
	in.mu.Lock()
	last, seen := in.depthAt[e.Path]
	prev := in.depthOf[e.Path]
	take := !seen || now.Sub(last) >= in.cfg.DepthEvery || (prev != e.Counts && now.Sub(last) >= in.cfg.DepthMinGap)
	if take {
		in.depthAt[e.Path], in.depthOf[e.Path] = now, e.Counts
	}
	in.mu.Unlock()
	if !take {
		return
	}
	if err := in.cfg.Catalog.RecordDepth(ctx, e.Path, e.Counts, now); err != nil && ctx.Err() == nil {
		in.log.Warn("catalog: cannot record a depth sample", "entity", e.Path, "error", err.Error())
	}
}

// cursorLocked returns the cursor of (entity, q), creating an unread one.
func (in *Ingester) cursorLocked(entity string, q SubQueue) *cursorState {
	k := cursorKey{entity, q}
	c := in.cursors[k]
	if c == nil {
		c = &cursorState{Cursor: Cursor{Entity: entity, SubQueue: q, MaxSeen: -1, BrokerCount: -1}}
		in.cursors[k] = c
	}
	return c
}

func brokerCount(e Entity, q SubQueue) int64 {
	switch q {
	case SubQueueDeadLetter:
		return e.Counts.DeadLetter
	case SubQueueTransferDeadLetter:
		return e.Counts.TransferDeadLetter
	}
	// The main entity's pass is due when either count moved; one number
	// holds both (Service Bus counts are 32-bit), so that a message moving
	// from scheduled to active is a change too.
	return e.Counts.Active<<32 | e.Counts.Scheduled&0xffffffff
}

// fullAllowed is the duty-cycle bound on full passes (package doc).
func (in *Ingester) fullAllowed(c *cursorState, now time.Time) bool {
	if c.LastFullAt == nil {
		return true
	}
	return now.Sub(*c.LastFullAt) >= max(in.cfg.MinFullInterval, 4*c.FullDuration)
}

func (in *Ingester) sweepDue(c *cursorState, now time.Time) bool {
	return c.LastFullAt == nil || now.Sub(*c.LastFullAt) >= in.cfg.Sweep
}

func (in *Ingester) mainReadable(entity string) bool {
	s, ok := in.settings[entity]
	return !ok || !s.RequiresSession
}

// needsPassLocked reports whether any subqueue of e needs reading now.
func (in *Ingester) needsPassLocked(e Entity, now time.Time) bool {
	for _, q := range []SubQueue{SubQueueDeadLetter, SubQueueTransferDeadLetter} {
		if in.dlqPlan(in.cursorLocked(e.Path, q), brokerCount(e, q), now) != passNone {
			return true
		}
	}
	return in.mainReadable(e.Path) && in.mainDue(in.cursorLocked(e.Path, SubQueueMain), brokerCount(e, SubQueueMain), now)
}

type passKind int

const (
	passNone passKind = iota
	passTail          // after the highest number seen, then from the floor if counts disagree
	passFull          // from sequence number 0
)

func (in *Ingester) dlqPlan(c *cursorState, count int64, now time.Time) passKind {
	switch {
	case c.BrokerCount < 0:
		return passFull
	case (c.pendingFull || in.sweepDue(c, now)) && in.fullAllowed(c, now):
		return passFull
	case count > c.expected():
		// More on the broker than cataloged: new arrivals, at the tail or
		// (late dead letters) above the floor.
		return passTail
	case count < c.expected() && in.fullAllowed(c, now):
		// Fewer on the broker than cataloged: something left, and only a
		// full pass can tell what.
		return passFull
	case count < c.expected():
		c.pendingFull = true
	}
	return passNone
}

func (in *Ingester) mainDue(c *cursorState, count int64, now time.Time) bool {
	if c.BrokerCount < 0 {
		return true
	}
	if c.LastPassAt != nil && now.Sub(*c.LastPassAt) < in.cfg.MainInterval {
		return false
	}
	if !in.fullAllowed(c, now) {
		return false
	}
	return count != c.BrokerCount || c.pendingFull || in.sweepDue(c, now)
}

func (in *Ingester) runEntity(ctx context.Context, p string) {
	select {
	case in.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	err := in.readEntity(ctx, p)
	<-in.slots
	in.mu.Lock()
	delete(in.busy, p)
	if err != nil && ctx.Err() == nil {
		in.failures[p]++
		in.retryAt[p] = in.cfg.Now().Add(in.backoff(in.failures[p], err))
	} else {
		delete(in.failures, p)
		delete(in.retryAt, p)
	}
	in.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		if errors.Is(err, ErrEntityNotFound) {
			in.log.Info("catalog: entity vanished while being read; the next listing marks it deleted", "entity", p)
		} else {
			in.log.Warn("catalog: cannot read entity; will retry", "entity", p, "error", err.Error())
		}
	}
}

// readEntity runs the passes one entity needs: the main entity first (its
// lowest sequence number is the DLQ floor), then the DLQ and transfer DLQ.
func (in *Ingester) readEntity(ctx context.Context, path string) error {
	now := in.cfg.Now()
	in.mu.Lock()
	e := in.entities[path]
	mainOK := in.mainReadable(path)
	mainCur := in.cursorLocked(path, SubQueueMain)
	doMain := mainOK && in.mainDue(mainCur, brokerCount(e, SubQueueMain), now)
	in.mu.Unlock()

	var errs []error
	if doMain {
		if err := in.passMain(ctx, e, mainCur); err != nil {
			if errors.Is(err, ErrEntityNotFound) {
				return err
			}
			errs = append(errs, err)
		}
	}
	for _, q := range []SubQueue{SubQueueDeadLetter, SubQueueTransferDeadLetter} {
		in.mu.Lock()
		c := in.cursorLocked(path, q)
		plan := in.dlqPlan(c, brokerCount(e, q), in.cfg.Now())
		in.mu.Unlock()
		if plan == passNone {
			continue
		}
		if err := in.passDLQ(ctx, e, c, plan, mainOK); err != nil {
			if errors.Is(err, ErrEntityNotFound) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// passMain reads the whole main entity, cataloging its deferred and
// scheduled messages and noting its lowest active or deferred number.
func (in *Ingester) passMain(ctx context.Context, e Entity, c *cursorState) error {
	start := in.cfg.Now()
	low := int64(math.MaxInt64)
	err := in.pass(ctx, e.Path, SubQueueMain, 0, c, func(m *Message) bool {
		if m.State != StateScheduled {
			low = min(low, m.SequenceNumber)
		}
		return m.State == StateDeferred || m.State == StateScheduled
	})
	if err != nil {
		return in.saveFailed(ctx, c, err)
	}
	in.mu.Lock()
	if low == math.MaxInt64 {
		low = 0 // empty: nothing below bounds the DLQ, but "unknown" is the safe reading
	}
	c.MainLow = low
	in.mu.Unlock()
	return in.passDone(ctx, c, brokerCount(e, SubQueueMain), true, start)
}

// floorNow measures, before a DLQ pass, the floor that pass will have
// established when it ends: min(lowest active or deferred number in the main
// entity, highest DLQ number seen so far + 1). See the package doc.
func (in *Ingester) floorNow(ctx context.Context, e Entity, c *cursorState, mainOK bool) (int64, error) {
	in.mu.Lock()
	maxSeen := c.MaxSeen
	in.mu.Unlock()
	if !mainOK {
		return 0, nil
	}
	next := maxSeen + 1
	from := int64(0)
	for {
		// A short look at the head of the main entity: the first messages
		// are usually active; scheduled ones are skipped (they get a new
		// number when they activate).
		page, err := in.cfg.Broker.Peek(ctx, e.Path, SubQueueMain, from, 32)
		if err != nil {
			return 0, fmt.Errorf("peek the head of %s: %w", e.Path, err)
		}
		if len(page) == 0 {
			return next, nil
		}
		for _, m := range page {
			if m.State != StateScheduled {
				return min(m.SequenceNumber, next), nil
			}
		}
		from = page[len(page)-1].SequenceNumber + 1
	}
}

func (in *Ingester) passDLQ(ctx context.Context, e Entity, c *cursorState, plan passKind, mainOK bool) error {
	count := brokerCount(e, c.SubQueue)
	start := in.cfg.Now()
	keep := func(*Message) bool { return true }

	if plan == passTail {
		in.mu.Lock()
		from := max(c.MaxSeen+1, c.Floor)
		in.mu.Unlock()
		if err := in.pass(ctx, e.Path, c.SubQueue, from, c, keep); err != nil {
			return in.saveFailed(ctx, c, err)
		}
		// More than the count is fine: arrivals after the count was read.
		in.mu.Lock()
		reconciled := c.expected() >= count
		in.mu.Unlock()
		if reconciled {
			return in.passDone(ctx, c, count, false, start)
		}
	}

	// From the floor (or from 0 for a full pass).
	floor, err := in.floorNow(ctx, e, c, mainOK)
	if err != nil {
		return in.saveFailed(ctx, c, err)
	}
	in.mu.Lock()
	from := c.Floor
	in.mu.Unlock()
	full := plan == passFull
	if full {
		from = 0
	}
	if err := in.pass(ctx, e.Path, c.SubQueue, from, c, keep); err != nil {
		return in.saveFailed(ctx, c, err)
	}
	in.mu.Lock()
	c.Floor = max(c.Floor, floor)
	if !full && c.expected() < count {
		// Still missing something after reading from the floor: only a
		// full pass can settle it (a partitioned entity, whose peek is not
		// strictly ordered, is one way to get here).
		c.pendingFull = true
	}
	in.mu.Unlock()
	return in.passDone(ctx, c, count, full, start)
}

func (in *Ingester) passDone(ctx context.Context, c *cursorState, count int64, full bool, start time.Time) error {
	end := in.cfg.Now()
	in.mu.Lock()
	c.BrokerCount = count
	c.LastPassAt = &end
	if full {
		c.LastFullAt = &end
		c.FullDuration = end.Sub(start)
		c.pendingFull = false
		c.removed = 0 // the pass marked them gone
	}
	c.LastError = ""
	cur := c.Cursor
	in.mu.Unlock()
	return in.cfg.Catalog.SaveCursor(ctx, cur)
}

func (in *Ingester) saveFailed(ctx context.Context, c *cursorState, err error) error {
	if ctx.Err() != nil {
		// Shutting down mid-pass is not a read error: the cursor as last
		// saved stays, and the pass runs again after the restart.
		return err
	}
	in.mu.Lock()
	c.LastError = err.Error()
	cur := c.Cursor
	in.mu.Unlock()
	if serr := in.cfg.Catalog.SaveCursor(context.WithoutCancel(ctx), cur); serr != nil && ctx.Err() == nil {
		in.log.Warn("catalog: cannot save read state", "entity", c.Entity, "error", serr.Error())
	}
	return err
}

// pass reads (entity, q) from sequence number from until an empty page,
// writing each page as it goes. Peeking the next page overlaps with writing
// the current one. keep selects the messages to catalog; every page's range
// is covered for gone detection either way.
func (in *Ingester) pass(ctx context.Context, entity string, q SubQueue, from int64, c *cursorState, keep func(*Message) bool) error {
	type peeked struct {
		from, through int64
		msgs          []Message
		at            time.Time
		err           error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan peeked, 8)
	go func() {
		defer close(pages)
		next := from
		for {
			msgs, err := in.cfg.Broker.Peek(ctx, entity, q, next, in.cfg.PageSize)
			p := peeked{from: next, msgs: msgs, at: in.cfg.Now(), err: err}
			if err == nil {
				if len(msgs) == 0 {
					p.through = math.MaxInt64
				} else {
					p.through = msgs[len(msgs)-1].SequenceNumber
				}
			}
			select {
			case pages <- p:
			case <-ctx.Done():
				return
			}
			if err != nil || len(msgs) == 0 {
				return
			}
			next = p.through + 1
		}
	}()

	// held is a page taken from the channel but not merged (an error, or
	// one that would overfill a batch): it is the next to handle.
	var held *peeked
	for {
		var p peeked
		if held != nil {
			p, held = *held, nil
		} else {
			var ok bool
			if p, ok = <-pages; !ok {
				break
			}
		}
		if p.err != nil {
			return fmt.Errorf("peek %s (%s) from %d: %w", entity, q, p.from, p.err)
		}
		// Pages already waiting join this one in a single transaction (their
		// ranges are contiguous): fewer, larger transactions write the
		// search index and the WAL far more cheaply. Nothing waits for a
		// page that has not arrived, so live updates are not delayed.
	merge:
		for len(p.msgs) > 0 {
			select {
			case more, ok := <-pages:
				if !ok {
					break merge
				}
				if more.err != nil || len(p.msgs)+len(more.msgs) > in.cfg.BatchSize {
					held = &more
					break merge
				}
				p.msgs = append(p.msgs, more.msgs...)
				p.through = more.through
				if len(more.msgs) == 0 {
					break merge // the final, empty page: this batch covers to the end
				}
			default:
				break merge
			}
		}
		kept := p.msgs[:0:0]
		for i := range p.msgs {
			if keep(&p.msgs[i]) {
				kept = append(kept, p.msgs[i])
			}
		}
		res, err := in.cfg.Catalog.ApplyPage(ctx, Page{Entity: entity, SubQueue: q, From: p.from, Through: p.through,
			Messages: kept, SeenAt: p.at})
		if err != nil {
			return fmt.Errorf("catalog: write %s (%s): %w", entity, q, err)
		}
		in.mu.Lock()
		c.Present += int64(len(res.New) - len(res.Gone))
		if len(p.msgs) > 0 {
			// Not p.through: a batch that ends with the final, empty page
			// covers to the end, beyond any number seen.
			c.MaxSeen = max(c.MaxSeen, p.msgs[len(p.msgs)-1].SequenceNumber)
		}
		in.mu.Unlock()
		at := p.at
		if len(res.New) > 0 {
			in.cfg.Publish(Change{Kind: ChangeNew, Entity: entity, SubQueue: q, IDs: res.New, At: at})
		}
		if len(res.Gone) > 0 {
			in.cfg.Publish(Change{Kind: ChangeGone, Entity: entity, SubQueue: q, IDs: res.Gone, At: at})
		}
		if res.Updated > 0 {
			in.cfg.Publish(Change{Kind: ChangeUpdated, Entity: entity, SubQueue: q, At: at})
		}
	}
	return ctx.Err()
}

func (in *Ingester) pruneLoop(ctx context.Context) {
	t := time.NewTicker(in.cfg.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutoff := in.cfg.Now().Add(-in.cfg.Retention)
		total := 0
		for ctx.Err() == nil {
			n, err := in.cfg.Catalog.PruneGone(ctx, cutoff, in.cfg.PruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					in.log.Warn("catalog: retention prune failed; will retry", "error", err.Error())
				}
				break
			}
			total += n
			if n < in.cfg.PruneBatch {
				break
			}
		}
		if total > 0 {
			in.log.Info("catalog: pruned messages gone longer than the retention", "messages", total,
				"retention", in.cfg.Retention.String())
		}
		in.mergeSearchIndex(ctx)
	}
}

// mergeSearchIndex merges the search index in small steps while no entity
// is being read: bulk passes leave many small segments (the index merges
// lazily so that writes stay fast), and searches slow down with their
// number. A step that another write arrives during just waits its turn.
func (in *Ingester) mergeSearchIndex(ctx context.Context) {
	for range 50 { // at most ~50 × 200 pages a minute
		in.mu.Lock()
		busy := len(in.busy) > 0
		in.mu.Unlock()
		if busy || ctx.Err() != nil {
			return
		}
		more, err := in.cfg.Catalog.MergeSearchIndex(ctx, 200)
		if err != nil {
			if ctx.Err() == nil {
				in.log.Warn("catalog: merging the search index failed; will retry", "error", err.Error())
			}
			return
		}
		if !more {
			return
		}
	}
}
