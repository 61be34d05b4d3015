package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// A search's page from its newest hits (SQLite; issue 18).
//
// The strategies of planList find a page of a search by walking an index
// against the hits, or by fetching every hit: a word in a third of a
// million messages collected all 333,000 of its hits for a page of 50
// (95-130 ms, 78 % of it in FTS5's doclist iterator). But a page lists
// the messages with the largest sort keys, and ids grow with the ingest:
// the newest hits by id are cheap to read from FTS5 (rowids in descending
// order, well under a millisecond for the common word), and key_bounds
// (key_bounds.go) says how large any older hit's sort key can be.
//
// So ListMessages first looks for a search's first page there: it reads
// the newest hits (newestHits of them), then every hit in the lowest of
// their blocks of 1,024 ids, and finds the page among them: the
// candidates. Every other hit has a smaller id and a sort
// key at most the bound of the block below the candidates'. When the
// candidates yield a full page and one row more, and that row's key is at
// least the bound, no other hit can sort before it (an equal key sorts
// after by its smaller id): the page and its next cursor are exact. When
// the candidates are every hit, so is the page. Otherwise (the filter's
// other terms rejected most candidates, or the hits' ids and keys are far
// out of order, as after a first read of a namespace entity by entity)
// ListMessages plans the page as before; the attempt cost three small
// queries, about 3 ms for the common word.

// newestHits is how many of the newest hits a page is first looked for
// in: four pages' worth, at least newestMin.
func newestHits(limit int) int { return max(4*(limit+1), newestMin) }

// newestMin is a variable for tests, whose catalogs are small.
var newestMin = 256

// newestPlan is a page of f planned over its newest hits.
type newestPlan struct {
	plan listPlan
	// complete: the candidates are every hit.
	complete bool
	// bound is the largest sort key any other hit can have.
	bound int64
}

// planNewest plans f's page over its newest hits, reading through tx, for
// listNewest (which checks the engine and the key bounds); ok is false
// when f is not a search this can answer (no search, property filters, a
// time window ending before now, a filter too narrow to fill a page from
// the candidates, or more candidates than are worth listing by id). Its queries need not share a
// snapshot: a message indexed after the candidates were read has a larger
// id than any of them and is left to the next query, as in planList's
// strategies, and the bound of a block below the newest hits no longer
// changes.
func (s *Store) planNewest(ctx context.Context, tx queryer, f dlq.Filter, limit int) (np newestPlan, ok bool, err error) {
	c, err := compileFilter(ctx, s.eng, tx, f)
	if err != nil {
		return newestPlan{}, false, err
	}
	// A time window ending before now, or a filter too narrow to fill a
	// page from the candidates (its rows, spread like the hits), leaves
	// the page to planList without the search queries.
	if c.empty || c.query == nil || len(c.props) > 0 || len(c.phrases) > 0 || c.until != nil {
		return newestPlan{}, false, nil
	}
	want := newestHits(limit)
	if rows := narrowest(c.drivers); rows >= 0 {
		var total int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&total); err != nil {
			return newestPlan{}, false, fmt.Errorf("search: %w", err)
		}
		if float64(rows)*float64(want) < float64(limit+1)*float64(max(total, 1)) {
			return newestPlan{}, false, nil
		}
	}
	arg := s.eng.searchArg(c.query)
	ids, err := hitIDs(ctx, tx, `SELECT rowid FROM messages_fts WHERE `+s.eng.searchMatch()+` ORDER BY rowid DESC LIMIT ?`, arg, want)
	if err != nil {
		return newestPlan{}, false, err
	}
	np.complete = len(ids) < want
	if !np.complete {
		// Every hit of the lowest candidate's block, so that the other
		// hits are all in the blocks below it.
		low := ids[len(ids)-1] >> keyBlockShift
		more, err := hitIDs(ctx, tx, `SELECT rowid FROM messages_fts WHERE `+s.eng.searchMatch()+` AND rowid >= ? AND rowid < ?`,
			arg, low<<keyBlockShift, ids[len(ids)-1])
		if err != nil {
			return newestPlan{}, false, err
		}
		ids = append(ids, more...)
		if len(ids) > ftsFetchMax {
			return newestPlan{}, false, nil
		}
		var b sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max_key FROM key_bounds WHERE block < ? ORDER BY block DESC LIMIT 1`, low).Scan(&b); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return newestPlan{}, false, fmt.Errorf("search: %w", err)
		}
		// No block below: no other hit.
		np.complete, np.bound = !b.Valid, b.Int64
	}
	np.plan = s.hitsPlan(c, ids)
	return np, true, nil
}

// narrowest is the fewest rows any of the drivers has, -1 when none knows.
func narrowest(drivers []driver) int64 {
	n := int64(-1)
	for _, d := range drivers {
		if d.rows >= 0 && (n < 0 || d.rows < n) {
			n = d.rows
		}
	}
	return n
}

// exact reports whether recs, the page (and one row more) the plan found
// among its candidates, is the page of every hit.
func (np newestPlan) exact(recs []dlq.Record, limit int) bool {
	return np.complete || (len(recs) > limit && keyOf(&recs[limit]).at >= np.bound)
}

// listNewest is ListMessages' first page over f's newest hits: ok is false
// when the page cannot be found there (planNewest, newestPlan.exact).
// Property filters are left to planList, and so are deep pages: a
// cursor is usually far below the newest hits, and the attempt cost such
// a page (a word in a third of the messages, 100,000 deep) 57 -> 77 ms,
// most of it the pages it read leaving the read connection's cache.
func (s *Store) listNewest(ctx context.Context, f dlq.Filter, limit int) (recs []dlq.Record, ok bool, err error) {
	if s.eng.postgres || !s.keyBounds || forceSearch != "" || f.Query == "" || len(f.Properties) > 0 {
		return nil, false, nil
	}
	if err := s.waitIndexed(ctx, -1); err != nil {
		return nil, false, err
	}
	np, ok, err := s.planNewest(ctx, s.reader, f, limit)
	if err != nil || !ok {
		return nil, false, err
	}
	recs, err = queryPage(ctx, s.reader, np.plan, nil, limit)
	if err != nil {
		return nil, false, err
	}
	if !np.exact(recs, limit) {
		s.newestMissed.Add(1)
		return nil, false, nil
	}
	s.newestFound.Add(1)
	return recs, true, nil
}

// hitIDs runs q (a search's rowids; its arguments args) and returns them.
func hitIDs(ctx context.Context, db queryer, q string, args ...any) ([]int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	ids := make([]int64, 0, 64)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return ids, nil
}
