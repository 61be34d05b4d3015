package dlq

import (
	"context"
	"fmt"
	"math"
	"time"
)

// peeked is one page a pass peeked, or several contiguous ones merged.
type peeked struct {
	from, through int64 // the range covered; through is MaxInt64 at the end
	msgs          []Message
	at            time.Time
	err           error
}

// pass reads (entity, q) from sequence number from until an empty page,
// writing each page as it goes. Peeking the next page overlaps with writing
// the current one. keep selects the messages to catalog; every page's range
// is covered for gone detection either way.
func (in *Ingester) pass(ctx context.Context, entity string, q SubQueue, from int64, c *cursorState, keep func(*Message) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan peeked, 8)
	go in.peekPages(ctx, entity, q, from, pages)

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
		held = in.mergeWaiting(&p, pages)
		if err := in.writePage(ctx, entity, q, p, c, keep); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// peekPages peeks (entity, q) page by page from sequence number from into
// pages, until an empty page (sent too: it ends the range), an error (sent),
// or ctx ends; then it closes pages.
func (in *Ingester) peekPages(ctx context.Context, entity string, q SubQueue, from int64, pages chan<- peeked) {
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
}

// mergeWaiting joins the pages already waiting in pages to p (their ranges
// are contiguous), up to a batch: fewer, larger transactions write the
// search index and the WAL far more cheaply. Nothing waits for a page that
// has not arrived, so live updates are not delayed. It returns a page it
// took but could not merge (an error, or one that would overfill the
// batch), which is the next to handle.
func (in *Ingester) mergeWaiting(p *peeked, pages <-chan peeked) *peeked {
	for len(p.msgs) > 0 {
		select {
		case more, ok := <-pages:
			if !ok {
				return nil
			}
			if more.err != nil || len(p.msgs)+len(more.msgs) > in.cfg.BatchSize {
				return &more
			}
			p.msgs = append(p.msgs, more.msgs...)
			p.through = more.through
			if len(more.msgs) == 0 {
				return nil // the final, empty page: this batch covers to the end
			}
		default:
			return nil
		}
	}
	return nil
}

// writePage catalogs the kept messages of p, advances the cursor's
// present count and highest number seen, and publishes what changed.
func (in *Ingester) writePage(ctx context.Context, entity string, q SubQueue, p peeked, c *cursorState, keep func(*Message) bool) error {
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
	return nil
}
