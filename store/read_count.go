package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlqdash/dlqdash/dlq"
)

// CountMessages counts the messages matching f, up to max: it returns
// min(matches, max). A list page can then say "more than N" without counting
// a million rows: the count walks the same index a list page would, so it
// costs at most max index steps (plus the full-text work a search needs).
// max <= 0 counts everything (slow over broad filters on a large catalog).
func (s *Store) CountMessages(ctx context.Context, f dlq.Filter, max int64) (int64, error) {
	if strings.TrimSpace(f.Query) != "" && max > 0 {
		n, ok, err := s.countSearchHits(ctx, f, max)
		if err != nil {
			return 0, fmt.Errorf("count messages: %w", err)
		}
		if ok {
			return n, nil
		}
	}
	// A search countSearchHits declined is one whose other filters keep
	// few rows: its count is planned for max rows, so the planner weighs
	// collecting the hits once against asking the search index about each
	// row walked (planned as a page, it asked about 30,000 rows to count a
	// common word to 10,001: 2.7 s at a million). Without a search the
	// plan does not depend on the size.
	limit := DefaultListLimit
	if strings.TrimSpace(f.Query) != "" && max > 0 {
		limit = int(min(max, MaxListLimit*100))
	}
	p, err := s.planList(ctx, f, limit)
	if err != nil {
		return 0, fmt.Errorf("count messages: %w", err)
	}
	if p.empty {
		return 0, nil
	}
	where, args := p.bounded(nil)
	inner := "SELECT 1 FROM " + p.from() + whereClause(where)
	if max > 0 {
		inner += " LIMIT ?"
		args = append(args, max)
	}
	var n int64
	if err := s.reader.QueryRowContext(ctx, "SELECT count(*) FROM ("+inner+") AS matches", args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count messages: %w", err)
	}
	return n, nil
}

// searchDriveMax bounds the search hits a count reads (and counts, to
// decide): beyond it, walking the filter's own index is cheaper.
var searchDriveMax int64 = 100_000

// costDrive is the cost of reading one search hit's row by id, in the
// units of the list planner's costs (microseconds at a million: 1.2 for
// hits close together, 6 for hits spread over the catalog).
const costDrive = 3

// countSearchHits counts a search's matches, up to max, by reading its
// hits from the search index and each hit's row by id, stopping at max
// matches: for a search only (or with filters most hits pass), max rows
// read by id instead of an index walk that asks the search index about
// every row (450 µs each at a million) or collects every hit first. It
// declines (ok false) when walking the filter's narrowest index is cheaper
// (searchDrive).
func (s *Store) countSearchHits(ctx context.Context, f dlq.Filter, max int64) (n int64, ok bool, err error) {
	sd, err := s.searchDrive(ctx, f, max)
	if err != nil || sd.declined {
		return 0, false, err
	}
	if sd.empty {
		return 0, true, nil
	}
	err = s.reader.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 `+sd.from+` LIMIT ?) AS hits`, append(sd.args, max)...).Scan(&n)
	return n, true, err
}

// searchDriven is a search's matches read from its hits: FROM and WHERE
// (args), the search index f the outer loop, the messages m each looked up
// by id. CROSS JOIN keeps that order, and a LIMIT stops the walk.
type searchDriven struct {
	from     string
	args     []any
	empty    bool // nothing matches
	declined bool // walking the filter's index is cheaper
}

// searchDrive plans reading want matches of f, which has a search, from
// its hits, or declines when walking the filter's narrowest index against
// the collected hits is cheaper: the hits it would read are about want
// divided by the share of the catalog the other filters keep, or all the
// hits if fewer.
func (s *Store) searchDrive(ctx context.Context, f dlq.Filter, want int64) (searchDriven, error) {
	// The hits come from the search index, written behind the ingest: wait
	// for it to cover the newest message, as planList does.
	if err := s.waitIndexed(ctx, -1); err != nil {
		return searchDriven{}, err
	}
	c, err := compileFilter(ctx, s.eng, s.reader, f)
	if err != nil {
		return searchDriven{}, err
	}
	if c.empty {
		return searchDriven{empty: true}, nil
	}
	var total int64
	if err := s.reader.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&total); err != nil {
		return searchDriven{}, err
	}
	total = max64(total, 1)
	d := total // the rows of the narrowest index the filters have
	for _, dr := range c.drivers {
		d = min(d, max64(dr.rows, 1))
	}
	always := searchDriveMax < 0 // tests: always read the hits
	hits, err := s.ftsCount(ctx, c.query, max64(searchDriveMax+1, 0))
	if always {
		hits, err = s.ftsCount(ctx, c.query, total)
	}
	if err != nil {
		return searchDriven{}, err
	}
	if hits == 0 {
		return searchDriven{empty: true}, nil
	}
	read := min(float64(hits), float64(want)*float64(total)/float64(d))
	walked := min(float64(d), float64(want)*float64(total)/float64(hits))
	probeCost, collectCost := float64(costProbe), float64(costCollect)
	if s.eng.postgres {
		probeCost, collectCost = pgCostProbe, pgCostCollect
	}
	walk := min(float64(hits)*collectCost+walked*costWalk, walked*(probeCost+costWalk))
	if hits <= int64(ftsFetchMax) {
		walk = min(walk, float64(hits)*costFetch)
	}
	if !always && (read > float64(searchDriveMax) || read*costDrive > walk) {
		return searchDriven{declined: true}, nil
	}
	hit := "f.messages_fts MATCH ?"
	if s.eng.postgres {
		hit = "f.doc @@ CAST(? AS tsquery)"
	}
	where, args := append([]string{hit}, c.where...), append([]any{s.eng.searchArg(c.query)}, c.args...)
	for _, t := range c.last {
		where = append(where, t.sql)
		args = append(args, t.args...)
	}
	if c.until != nil {
		where = append(where, sortKey+" < ?")
		args = append(args, *c.until)
	}
	join := "CROSS JOIN" // SQLite: keeps the search index the outer loop
	if s.eng.postgres {
		join = "JOIN" // PostgreSQL plans the join order itself
	}
	return searchDriven{from: "FROM messages_fts f " + join + " messages m ON m.id = f.rowid" + whereClause(where), args: args}, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
