package dlq

import (
	"context"
	"fmt"
	"math"
	"time"
)

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
