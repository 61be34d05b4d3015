package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// Property values the scale seeder adds to every message, at known rates,
// for the read side's two-property filters (issue 18): orderType is one of
// OrderTypes, picked by the message's index (not the generator's random
// stream, so the generated catalog stays what Generate makes).
var OrderTypes = []string{"standard", "express", "subscription", "wholesale", "return", "preorder", "gift", "sample"}

// ScaleOptions tune a Seeder. The zero value is what the ingester does when
// peeks keep up: pages of up to 1,000 messages of one (entity, subqueue).
// The seeder holds at most 5,000 messages not yet written: past that it
// writes its fullest page, shorter than Page.
type ScaleOptions struct {
	// Page is how many messages of one (entity, subqueue) go into one
	// ApplyPage (one transaction); zero means 1,000, the most the ingester
	// writes at once.
	Page int
	// Total sizes the generated time span and sequence (Generate's n);
	// zero means the n of the first Seed. Messages past it continue the
	// same stream, later in time.
	Total int
	// Every and Progress: Progress is called after the page that takes
	// the number of messages written (committed) past a multiple of
	// Every, with that number; zero Every means never.
	Every    int
	Progress func(done int)
}

// Seeder writes the synthetic catalog of Generate (16 entities, 39 failure
// groups, varied bodies and properties, plus an orderType property) into a
// store through the ingester's own write path: SyncEntities for the
// entities, then ApplyPage for pages of new messages of one (entity,
// subqueue) in sequence-number order, exactly as the ingester writes a pass
// that reads a DLQ's tail. Every message is present (none gone): it is a
// namespace whose dead-letter queues were just found full.
//
// Use it for scale measurements of the write side (how fast a million dead
// letters go in) and to fill a catalog for the read side, including while
// readers run: Seed can be called again to continue the same stream (for
// example 1,000 messages every second from another goroutine; a Seeder is
// not safe for concurrent use itself).
type Seeder struct {
	st      *store.Store
	opts    ScaleOptions
	g       *generator
	next    int // index of the next record
	written int // messages committed
	// pendingN is how many messages wait in pending pages.
	pendingN int
	pending  map[[2]string]*scalePage
	order    [][2]string
	seenAt   time.Time
}

type scalePage struct {
	entity string
	q      dlq.SubQueue
	msgs   []dlq.Message
}

// NewSeeder lists the generated entities in st (SyncEntities) and returns a
// seeder for it.
func NewSeeder(ctx context.Context, st *store.Store, opts ScaleOptions) (*Seeder, error) {
	if opts.Page <= 0 {
		opts.Page = 1000
	}
	now := time.Now()
	var ents []Entity
	for _, e := range genEntities {
		ents = append(ents, Entity{Path: e.path, Kind: e.kind})
	}
	if err := addEntities(ctx, st, now, ents...); err != nil {
		return nil, fmt.Errorf("seed: list entities: %w", err)
	}
	return &Seeder{st: st, opts: opts, pending: map[[2]string]*scalePage{}, seenAt: now}, nil
}

// Seeded is how many messages of the stream the seeder has generated
// (written, or skipped); all of them are committed when Seed returns.
func (s *Seeder) Seeded() int { return s.next }

// Written is how many messages the seeder's Seeds have committed: after a
// Seed that failed (its context ended, say), the pages it had written
// before count, those it had not do not, so Written can be less than
// Seeded. Like Seeded, read it between Seeds, not during one.
func (s *Seeder) Written() int { return s.written }

// Skip advances the stream by n messages without writing them: a seeder
// over a catalog an earlier seeder filled with n messages continues after
// them (the same records again would only be seen again, not added).
func (s *Seeder) Skip(n int) {
	if s.g == nil {
		total := s.opts.Total
		if total <= 0 {
			total = n
		}
		s.g = newGenerator(total)
	}
	for range n {
		s.g.record(s.next)
		s.next++
	}
}

// Seed writes the next n messages of the stream and returns once all of
// them are committed. Pages are written as they fill (Page messages of one
// entity and subqueue), and what is left at the end of Seed as shorter
// pages.
//
// The messages are made on a goroutine of their own while the pages
// before them are written, as the ingester peeks its next pages while it
// writes one (dlq.Ingester's pass): the generator stands for the peeks,
// and a scale figure is the catalog's, not the generator's plus the
// catalog's one after the other. After an error the Seeder is spent: the
// pages it had made are dropped.
func (s *Seeder) Seed(ctx context.Context, n int) error {
	if s.g == nil {
		total := s.opts.Total
		if total <= 0 {
			total = n
		}
		s.g = newGenerator(total)
	}
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan scalePage, seedAhead)
	made := make(chan struct{})
	var complete bool // written before made closes
	go func() {
		defer close(made)
		defer close(pages)
		complete = s.make(run, n, pages)
	}()
	var err error
	for p := range pages {
		if err = s.apply(run, p); err != nil {
			break
		}
	}
	cancel()
	<-made
	if err == nil && !complete {
		// The generator stopped because ctx ended (run is canceled here
		// only once every page is read): the pages it had not handed
		// over are not written.
		err = fmt.Errorf("seed: stopped before every message was written: %w", ctx.Err())
	}
	return err
}

// seedAhead is how many pages the generator makes ahead of the page being
// written (the ingester peeks up to 8).
const seedAhead = 4

// make generates the next n messages into pages and sends each page to
// pages when it is to be written: full, the fullest when the pending ones
// hold maxPending messages, and every partly filled one at the end. It
// reports whether it sent them all (false: ctx ended first).
func (s *Seeder) make(ctx context.Context, n int, pages chan<- scalePage) bool {
	send := func(p *scalePage) bool {
		s.pendingN -= len(p.msgs)
		out := *p
		p.msgs = make([]dlq.Message, 0, s.opts.Page)
		select {
		case pages <- out:
			return true
		case <-ctx.Done():
			return false
		}
	}
	end := s.next + n
	for s.next < end {
		r := s.g.record(s.next)
		s.next++
		key := [2]string{r.Entity, string(r.SubQueue)}
		p := s.pending[key]
		if p == nil {
			p = &scalePage{entity: r.Entity, q: r.SubQueue}
			s.pending[key] = p
			s.order = append(s.order, key)
		}
		m := r.Message
		m.ApplicationProperties = withOrderType(m.ApplicationProperties, s.next-1)
		p.msgs = append(p.msgs, m)
		s.pendingN++
		switch {
		case len(p.msgs) == s.opts.Page:
			if !send(p) {
				return false
			}
		case s.pendingN >= maxPending:
			// Like an ingester that reads one entity at a time, hold
			// at most a few pages: write the fullest.
			if !send(s.fullest()) {
				return false
			}
		}
	}
	// What is left, as shorter pages.
	for _, key := range s.order {
		if p := s.pending[key]; len(p.msgs) > 0 && !send(p) {
			return false
		}
	}
	return true
}

// maxPending bounds the messages a Seeder holds in pages not yet written,
// so that the harness's own memory stays small beside the store's.
const maxPending = 5000

// fullest is the pending page with the most messages.
func (s *Seeder) fullest() *scalePage {
	var best *scalePage
	for _, key := range s.order {
		if p := s.pending[key]; best == nil || len(p.msgs) > len(best.msgs) {
			best = p
		}
	}
	return best
}

func (s *Seeder) apply(ctx context.Context, p scalePage) error {
	_, err := s.st.ApplyPage(ctx, dlq.Page{Entity: p.entity, SubQueue: p.q, From: p.msgs[0].SequenceNumber,
		Through: p.msgs[len(p.msgs)-1].SequenceNumber, Messages: p.msgs, SeenAt: s.seenAt})
	if err != nil {
		return fmt.Errorf("seed: apply a page of %s: %w", p.entity, err)
	}
	before := s.written
	s.written += len(p.msgs)
	if e := s.opts.Every; e > 0 && s.opts.Progress != nil && s.written/e > before/e {
		s.opts.Progress(s.written)
	}
	return nil
}

// withOrderType adds "orderType" to a properties object (the generator's
// JSON, which always has other keys).
func withOrderType(props []byte, i int) []byte {
	if len(props) < 2 || props[len(props)-1] != '}' {
		return props
	}
	// A multiplicative (Fibonacci) hash of the index spreads the types
	// evenly, each about 1/8 of the messages.
	t := OrderTypes[(uint64(i)*0x9E3779B97F4A7C15>>40)%uint64(len(OrderTypes))]
	out := make([]byte, 0, len(props)+32)
	out = append(out, props[:len(props)-1]...)
	out = append(out, `,"orderType":"`...)
	out = append(out, t...)
	return append(out, `"}`...)
}

// SeedScale writes n messages into st through the ingester's write path
// (see Seeder) and fails the test on any error. It is the one way the
// issue 18 scale harness (store/scale_test.go, build tag scale) fills a
// catalog; read-side measurements seed with it too.
func SeedScale(tb testing.TB, st *store.Store, n int, opts ScaleOptions) *Seeder {
	tb.Helper()
	if opts.Total <= 0 {
		opts.Total = n
	}
	s, err := NewSeeder(tb.Context(), st, opts)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	if err := s.Seed(tb.Context(), n); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	return s
}
