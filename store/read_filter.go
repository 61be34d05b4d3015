package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/internal/search"
)

// How a dlq.Filter becomes SQL. Every filter is an AND term over messages m.
// Which index drives a list page is chosen here, not by SQLite's planner:
// each index of 0003_read_indexes.sql is ordered by the list's sort key
// within its filter value, so the index whose value has the fewest rows
// finds a page with the fewest steps, and the counter tables (catalog_counts,
// groups) say how many rows each value has without counting anything.

// driver is an index that can drive a list page.
type driver struct {
	index string
	rows  int64 // estimated rows under the filter value
	// term is an extra AND term that lets SQLite use the index (a partial
	// index's condition, or a column the filter implies), with its args.
	term     string
	termArgs []any
}

// compiled is a filter as SQL.
type compiled struct {
	empty bool // nothing can match (an unknown entity or group, say)
	// where are terms every index can check without the table row.
	where []string
	args  []any
	// last are terms that need the table row: checked after where.
	last []term
	// reasonGroups, for a reason filter, is a term over group_id that
	// lets an index other than messages_by_reason check it.
	reasonGroups *term
	// query is the search every match satisfies; nil for none.
	query match
	// phrases are searches every match satisfies too, implied by the
	// property terms in last: they may narrow the rows to check.
	phrases []match
	drivers []driver
	// until is the exclusive upper bound on the sort key, if any. It is
	// not in where: a page after a cursor has a bound of its own, and
	// SQLite ranges over one upper bound only, so the tighter one is used.
	until *int64
	// since is the inclusive lower bound on the sort key, if any (also in
	// where, as a term on the message row).
	since *int64
	// props are the property filters message_properties answers, each
	// with the index of its EXISTS term in last: any one of them can drive
	// a page (its term is then implied).
	props []propFilter
}

// propFilter is a property filter message_properties answers.
type propFilter struct {
	key, value string
	last       int // its term's index in compiled.last
}

// upperBound adds the sort key's upper bound: until, or the cursor's key, or
// whichever is tighter, on the messages' own sort key.
func upperBound(where []string, args []any, until *int64, after *pageKey) ([]string, []any) {
	return upperBoundOn(sortKey, "m.id", where, args, until, after)
}

// upperBoundOn is upperBound on the sort key and id expressions of the
// driving table (key, id).
func upperBoundOn(key, id string, where []string, args []any, until *int64, after *pageKey) ([]string, []any) {
	switch {
	case after != nil && (until == nil || *until > after.at):
		// Rows at or below the cursor's key are all below until.
		where = append(where, key+" <= ?", "("+key+" < ? OR "+id+" < ?)")
		args = append(args, after.at, after.at, after.id)
	case until != nil:
		where = append(where, key+" < ?")
		args = append(args, *until)
	}
	return where, args
}

type term struct {
	sql  string
	args []any
}

func (c *compiled) and(term string, args ...any) {
	c.where = append(c.where, term)
	c.args = append(c.args, args...)
}

// compileFilter turns f into SQL terms. It reads the small tables (entities,
// groups, counters) to resolve names to ids and to estimate each driver.
func compileFilter(ctx context.Context, eng engine, db queryer, f dlq.Filter) (*compiled, error) {
	// Check the inputs before looking anything up: a bad value is an error
	// even where an unknown entity would match nothing anyway.
	var sq, st int
	var err error
	if f.SubQueue != "" {
		if sq, err = subQueueCode(f.SubQueue); err != nil {
			return nil, &InvalidArgumentError{Param: "subqueue", Msg: fmt.Sprintf("unknown subqueue %q: want main, dead_letter or transfer_dead_letter", f.SubQueue)}
		}
	}
	if f.State != "" {
		if st, err = stateCode(f.State); err != nil {
			return nil, &InvalidArgumentError{Param: "state", Msg: fmt.Sprintf("unknown state %q: want active, deferred or scheduled", f.State)}
		}
	}
	var query match
	if strings.TrimSpace(f.Query) != "" {
		words, err := ftsQuery(f.Query)
		if err != nil {
			return nil, err
		}
		cols := allColumns
		if f.QueryNotBodies {
			cols = notBodyColumns
		}
		query = match{{cols: cols, words: words}}
	}
	for _, pm := range f.Properties {
		if pm.Key == "" {
			return nil, &InvalidArgumentError{Param: "property", Msg: "empty property name: want key=value"}
		}
	}

	c := &compiled{query: query}
	entity := int64(-1) // the one entity filtered on, if any
	if !f.IncludeGone {
		c.and("m.gone_at IS NULL")
	}
	rowsOf := func(query string, args ...any) (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, query, args...).Scan(&n)
		return n, err
	}

	if f.Entity != "" {
		// One entity per namespace may have the path: without a namespace,
		// the filter means all of them.
		ids, err := entityIDs(ctx, db, f.Namespace, f.Entity)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			if f.Namespace != "" {
				if known, err := namespaceKnown(ctx, db, f.Namespace); err != nil {
					return nil, err
				} else if !known {
					return &compiled{empty: true}, nil // an unknown namespace matches nothing
				}
			}
			// Entities are never removed from the table (a deleted one
			// keeps deleted_at), so this name was never seen.
			return nil, &dlq.UnknownEntityError{Entity: f.Entity}
		}
		var n int64
		if len(ids) == 1 {
			entity = ids[0]
			c.and("m.entity_id = ?", ids[0])
			if n, err = rowsOf(`SELECT coalesce(sum(present), 0) FROM catalog_counts WHERE entity_id = ?`, ids[0]); err != nil {
				return nil, err
			}
			c.drivers = append(c.drivers, driver{index: "messages_by_entity", rows: n})
		} else {
			// Rarely driven by the entity index: its order is per entity.
			c.and("m.entity_id IN ("+eng.jsonInts()+")", idList(ids))
		}
	} else if f.Namespace != "" {
		c.and("m.entity_id IN (SELECT id FROM entities WHERE namespace = ?)", f.Namespace)
		// A namespace with few of the catalog's messages is found faster
		// through its entities (and a sort of its rows) than by walking
		// the time index past everyone else's: the walk costs about
		// page × total / n steps of 0.3 µs, the sort n rows of some 5 µs,
		// which cross near n = √(3 × total) (BenchmarkListSmallNamespace).
		n, err := rowsOf(`SELECT coalesce(sum(cc.present), 0) FROM catalog_counts cc
			JOIN entities e ON e.id = cc.entity_id WHERE e.namespace = ?`, f.Namespace)
		if err != nil {
			return nil, err
		}
		total, err := rowsOf(`SELECT coalesce(sum(present), 0) FROM catalog_counts`)
		if err != nil {
			return nil, err
		}
		if float64(n) <= max(smallNamespace, math.Sqrt(3*float64(total))) && n < total {
			c.drivers = append(c.drivers, driver{index: "messages_by_entity", rows: n})
		}
	}
	if f.Namespaces != nil {
		// The reader's scope (access rules): a short list, checked
		// against each candidate's entity.
		names, err := json.Marshal(f.Namespaces)
		if err != nil {
			return nil, err
		}
		c.and("m.entity_id IN (SELECT id FROM entities WHERE namespace IN ("+eng.jsonTexts()+"))", string(names))
	}
	if f.SubQueue != "" {
		code := sq
		c.and("m.subqueue = ?", code)
		if code != 1 { // the partial index leaves out dead_letter, the common value
			n, err := rowsOf(`SELECT coalesce(sum(present), 0) FROM catalog_counts WHERE subqueue = ?`, code)
			if err != nil {
				return nil, err
			}
			c.drivers = append(c.drivers, driver{index: "messages_by_subqueue", rows: n, term: "m.subqueue <> 1"})
		}
	}
	if f.State != "" {
		code := st
		c.and("m.state = ?", code)
		if code != 0 { // the partial index leaves out active, the common value
			n, err := rowsOf(`SELECT coalesce(sum(present), 0) FROM catalog_counts WHERE state = ?`, code)
			if err != nil {
				return nil, err
			}
			c.drivers = append(c.drivers, driver{index: "messages_by_state", rows: n, term: "m.state <> 0"})
		}
	}
	counter := "present"
	if f.IncludeGone {
		counter = "total"
	}
	reason := f.Reason
	// entityReason is the reason the filter implies (its own, or its
	// group's), for messages_by_entity_reason.
	entityReason := reason
	if f.Group != "" {
		var id, n int64
		var groupReason string
		err := db.QueryRowContext(ctx, `SELECT id, reason, `+counter+` FROM groups WHERE key = ?`, f.Group).Scan(&id, &groupReason, &n)
		if errors.Is(err, sql.ErrNoRows) {
			return &compiled{empty: true}, nil
		}
		if err != nil {
			return nil, err
		}
		if reason != "" && reason != groupReason {
			return &compiled{empty: true}, nil // a group has one reason
		}
		reason, entityReason = "", groupReason // implied by the group
		c.and("m.group_id = ?", id)
		c.drivers = append(c.drivers, driver{index: "messages_by_group", rows: n})
	}
	if reason != "" {
		n, err := rowsOf(`SELECT coalesce(sum(`+counter+`), 0) FROM groups WHERE reason = ?`, reason)
		if err != nil {
			return nil, err
		}
		c.drivers = append(c.drivers, driver{index: "messages_by_reason", rows: n})
		// The exact term needs the table row; the group term lets every
		// other index reject most non-matching rows on its own (a dead
		// letter's group is derived from its reason).
		c.last = append(c.last, term{"m.dead_letter_reason = ?", []any{reason}})
		c.reasonGroups = &term{"(m.group_id IN (SELECT id FROM groups WHERE reason = ?) OR m.group_id IS NULL)", []any{reason}}
	}
	if entity >= 0 && entityReason != "" {
		// One entity's messages of one reason, counted per group in the
		// entity (a group has one reason). A group filter walks its
		// reason's range, checking the group in the index. Messages with
		// a reason but no group (the main entity's, rare) are not counted.
		n, err := rowsOf(`SELECT coalesce(sum(ge.`+counter+`), 0) FROM group_entities ge
			JOIN groups g ON g.id = ge.group_id WHERE g.reason = ? AND ge.entity_id = ?`, entityReason, entity)
		if err != nil {
			return nil, err
		}
		d := driver{index: "messages_by_entity_reason", rows: n}
		if reason == "" {
			d.term, d.termArgs = "m.dead_letter_reason = ?", []any{entityReason}
		}
		c.drivers = append(c.drivers, d)
	}
	// Time bounds are ranges on the sort key, which every index ends in. A
	// bound excludes messages without an enqueued time (key -1).
	if f.Since != nil || f.Until != nil {
		var since int64
		if f.Since != nil {
			since = max(f.Since.UTC().UnixMilli(), 0)
		}
		c.and(sortKey+" >= ?", since)
		c.since = &since
		if f.Until != nil {
			u := f.Until.UTC().UnixMilli()
			c.until = &u
		}
	}

	for _, pm := range f.Properties {
		if len(pm.Value) <= maxIndexedValue {
			indexed, err := propertyKeyIndexed(ctx, db, pm.Key)
			if err != nil {
				return nil, err
			}
			if indexed {
				c.props = append(c.props, propFilter{key: pm.Key, value: pm.Value, last: len(c.last)})
				c.last = append(c.last, term{propertyExists, []any{pm.Key, pm.Value}})
				continue
			}
		}
		// A value too long for message_properties, or a key without rows
		// (decided not indexed: property_keys.go): the message's JSON.
		// The property's text: a string's characters, anything else its JSON
		// text (every digit of a number, true, false, null).
		c.last = append(c.last, term{eng.jsonProperty() + " = ?", append(eng.jsonPropertyArgs(pm.Key), pm.Value)})
		if p := propertyPhrase(pm); p != nil {
			c.phrases = append(c.phrases, p)
		}
	}
	return c, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// listPlan is a list query without its cursor and limit.
type listPlan struct {
	empty bool
	until *int64 // see compiled.until
	index string // INDEXED BY ..., or NOT INDEXED when full-text hits drive
	// prop, when a property filter drives the page, is that property:
	// the query walks message_properties p in its key's order instead of
	// an index of messages (index is then "").
	prop  *propFilter
	where []string
	args  []any
	// postgres: the plan is for PostgreSQL (engine).
	postgres bool
}

// from is the plan's FROM clause, up to the record joins. SQLite's CROSS
// JOIN keeps message_properties the outer loop; PostgreSQL plans the join
// order itself (and has no CROSS JOIN ... ON).
func (p *listPlan) from() string {
	if p.prop != nil {
		if p.postgres {
			return "message_properties p JOIN messages m ON m.id = p.message_id"
		}
		return "message_properties p CROSS JOIN messages m ON m.id = p.message_id"
	}
	return "messages m " + p.index
}

// keys are the sort key and id expressions of the driving table, which
// ORDER BY and the cursor's bound must use for the walk to be a range.
func (p *listPlan) keys() (key, id string) {
	if p.prop != nil {
		return "p.at", "p.message_id"
	}
	return sortKey, "m.id"
}

// bounded is the plan's terms with its upper bound (until or the cursor
// after).
func (p *listPlan) bounded(after *pageKey) ([]string, []any) {
	key, id := p.keys()
	return upperBoundOn(key, id, slices.Clone(p.where), slices.Clone(p.args), p.until, after)
}

func (p *listPlan) and(sql string, args ...any) {
	p.where = append(p.where, sql)
	p.args = append(p.args, args...)
}

// Costs of the ways to combine a full-text search with a list page, in
// microseconds, measured on a million-message catalog (modernc SQLite, two
// cores). Only their ratios matter.
const (
	costProbe   = 450  // ask the search index whether one row matches (FTS5 seeks each segment)
	costCollect = 0.35 // collect one hit into the set an index walk checks rows against
	costWalk    = 0.3  // step the driving index one row, checking it in the index
	costFetch   = 5    // fetch one hit by id, to sort the hits
	costCheck   = 2    // read a row and check its properties' JSON
)

// On PostgreSQL asking about one row is a primary-key lookup in
// messages_fts and a match of its tsvector, and collecting a hit reads its
// row's heap block (GIN has no index-only scans, and the rows are wide):
// measured with EXPLAIN (ANALYZE, BUFFERS) at 100k messages, vacuumed, on
// a quiet machine: probing 1,594 rows 2.6 ms, counting 3,227 hits 16.9 ms
// (2,914 blocks read). The other costs are taken as SQLite's. Counting the
// hits would cost what collecting them does, so PostgreSQL estimates them
// instead (ftsEstimate).
const (
	pgCostProbe   = 2
	pgCostCollect = 5
)

// ftsFetchMax bounds the hits fetched by id (their ids travel as a JSON
// array).
var ftsFetchMax = 5000

// forceSearch, set by tests, picks the search strategy ("fetch", "collect",
// "probe", "check") instead of the costs.
var forceSearch string

// planList compiles f and chooses how to find a page of it.
func (s *Store) planList(ctx context.Context, f dlq.Filter, limit int) (listPlan, error) {
	if usesIndexes(f) {
		if err := s.waitIndexed(ctx, -1); err != nil {
			return listPlan{}, err
		}
	}
	c, err := compileFilter(ctx, s.eng, s.reader, f)
	if err != nil {
		return listPlan{}, err
	}
	if c.empty {
		return listPlan{empty: true}, nil
	}
	best := driver{index: "messages_by_time", rows: -1}
	for _, d := range c.drivers {
		if best.rows < 0 || d.rows < best.rows {
			best = d
		}
	}
	// A property filter drives when it has fewer messages than the best
	// index of messages (any has fewer than the whole catalog): the
	// rarest of them, counted in message_properties up to what decides.
	var prop *propFilter
	var propRows int64
	for i := range c.props {
		pf := &c.props[i]
		limit := int64(propertyCountCap)
		if best.rows >= 0 {
			limit = min(limit, best.rows+1)
		}
		if prop != nil {
			limit = min(limit, propRows)
		}
		n, err := propertyRows(ctx, s.reader, pf.key, pf.value, limit)
		if err != nil {
			return listPlan{}, err
		}
		if n == 0 {
			return listPlan{empty: true}, nil // no message has it
		}
		if prop == nil || n < propRows {
			prop, propRows = pf, n
		}
	}
	if prop != nil && (best.rows < 0 || propRows < best.rows) {
		best = driver{index: "", rows: propRows}
	} else {
		prop = nil
	}
	p := listPlan{
		postgres: s.eng.postgres,
		until:    c.until,
		index:    s.eng.indexedBy(best.index),
		where:    append([]string(nil), c.where...),
		args:     append([]any(nil), c.args...),
	}
	if prop != nil {
		p.index, p.prop = "", prop
		p.and("p.key = ?", prop.key)
		p.and("p.value = ?", prop.value)
		if c.since != nil {
			p.and("p.at >= ?", *c.since)
		}
	}
	indexTerms := func() {
		if best.term != "" {
			p.and(best.term, best.termArgs...)
		}
		if c.reasonGroups != nil && best.index != "messages_by_reason" && best.index != "messages_by_entity_reason" {
			p.and(c.reasonGroups.sql, c.reasonGroups.args...)
		}
	}
	lastTerms := func() {
		for i, t := range c.last {
			if p.prop != nil && i == p.prop.last {
				continue // the walk of message_properties implies it
			}
			p.and(s.eng.propertyTerm(t.sql, p.prop != nil), t.args...)
		}
	}
	if c.query == nil && len(c.phrases) == 0 {
		indexTerms()
		lastTerms()
		return p, nil
	}

	// A search, or properties the search index can narrow down. Count the
	// hits, up to where the cheapest way is known without the exact
	// number, then pick the cheapest of: fetching the hits by id; walking
	// the driving index against the set of hits; walking it asking the
	// search index about each row; and, when the search only narrows
	// property filters, walking it checking each row's JSON.
	var total int64
	if err := s.reader.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&total); err != nil {
		return listPlan{}, fmt.Errorf("search: %w", err)
	}
	total = max(total, 1)
	page := float64(limit + 1)
	// Beyond capCheck hits, checking JSON beats any use of the hits; beyond
	// capProbe, asking about each row beats collecting them.
	probeCost, collectCost := float64(costProbe), float64(costCollect)
	if s.eng.postgres {
		probeCost, collectCost = pgCostProbe, pgCostCollect
	}
	capCheck := int64(math.Sqrt(page*float64(total)*costCheck/collectCost)) + 1
	capProbe := int64(math.Sqrt(page*float64(total)*probeCost/collectCost)) + 1

	// A property phrase with many hits narrows nothing: leave it to the
	// JSON check. One with none means no message has the property.
	var parts []match
	if c.query != nil {
		parts = append(parts, c.query)
	}
	for _, ph := range c.phrases {
		n, err := s.ftsCount(ctx, ph, capCheck)
		if err != nil {
			return listPlan{}, err
		}
		if n == 0 {
			return listPlan{empty: true}, nil
		}
		if n < capCheck || forceSearch != "" {
			parts = append(parts, ph)
		}
	}
	if len(parts) == 0 {
		indexTerms()
		lastTerms()
		return p, nil
	}
	var expr match
	for _, p := range parts {
		expr = expr.and(p)
	}
	limitHits := capCheck
	if c.query != nil {
		limitHits = capProbe
	}
	count := s.ftsCount
	if s.eng.postgres {
		count = s.ftsEstimate
	}
	hits, err := count(ctx, expr, limitHits)
	if err != nil {
		return listPlan{}, err
	}
	if hits == 0 {
		return listPlan{empty: true}, nil
	}
	d := float64(best.rows)
	if best.rows < 0 {
		d = float64(total)
	}
	walked := min(d, page*float64(total)/float64(hits))
	cost := map[string]float64{
		"probe":   walked * (probeCost + costWalk),
		"collect": float64(hits)*collectCost + walked*costWalk,
	}
	// capped: the count (or PostgreSQL's estimate) stopped at its cap, so
	// the number of hits is not known beyond it.
	capped := hits >= limitHits
	if hits <= int64(ftsFetchMax) && !capped {
		cost["fetch"] = float64(hits) * costFetch
	}
	if c.query == nil {
		cost["check"] = walked * (costCheck + costWalk)
	}
	if s.eng.postgres && capped {
		// The count stopped at the cap: collecting would gather every hit,
		// more than the cap, where probing is cheaper by the cap's
		// definition (on SQLite its tie goes to collect, as measured).
		delete(cost, "collect")
	}
	how := ""
	for _, k := range []string{"fetch", "check", "collect", "probe"} {
		if v, ok := cost[k]; ok && (how == "" || v < cost[how]) {
			how = k
		}
	}
	if _, ok := cost[forceSearch]; ok {
		how = forceSearch
	}
	if how == "fetch" {
		// The page is the first rows of the hits in list order, so it
		// needs every hit: one more than fetched means some were left out.
		// That happens when PostgreSQL's estimate was low (its planner's
		// figure from ANALYZE's sample, which knows nothing of words that
		// came after it) or messages came in since the count: the walk
		// asking about each row finds the page instead.
		ids, err := s.ftsHits(ctx, expr, ftsFetchMax+1)
		if err != nil {
			return listPlan{}, err
		}
		if len(ids) <= ftsFetchMax {
			return s.hitsPlan(c, ids), nil
		}
		how = "probe"
	}
	// Every match is a hit: the walk starts at the hits' bound on the sort
	// key, past newer messages that have none of the words (key_bounds.go).
	if bound, ok, err := s.searchKeyBound(ctx, expr); err != nil {
		return listPlan{}, err
	} else if ok && (p.until == nil || *p.until > bound+1) {
		until := bound + 1
		p.until = &until
	}
	switch how {
	case "check":
		indexTerms()
		lastTerms()
	case "collect":
		indexTerms()
		p.and("m.id IN (SELECT rowid FROM messages_fts WHERE "+s.eng.searchMatch()+")", s.eng.searchArg(expr))
		lastTerms()
	default:
		indexTerms()
		lastTerms()
		p.and(s.eng.searchProbe(), s.eng.searchArg(expr))
	}
	return p, nil
}

// hitsPlan is the page of c among the messages ids (hits of its search):
// NOT INDEXED still allows the rowid lookups. The hits drive, not a
// property: the terms are the filter's alone.
func (s *Store) hitsPlan(c *compiled, ids []int64) listPlan {
	p := listPlan{postgres: s.eng.postgres, until: c.until, index: s.eng.notIndexed(), where: slices.Clone(c.where), args: slices.Clone(c.args)}
	p.and("m.id IN ("+s.eng.jsonInts()+")", idList(ids))
	if c.reasonGroups != nil {
		p.and(c.reasonGroups.sql, c.reasonGroups.args...)
	}
	for _, t := range c.last {
		p.and(s.eng.propertyTerm(t.sql, false), t.args...)
	}
	return p
}

// ftsCount counts the rows matching the search, up to max.
func (s *Store) ftsCount(ctx context.Context, expr match, max int64) (int64, error) {
	var n int64
	err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE `+s.eng.searchMatch()+` LIMIT ?) AS hits`,
		s.eng.searchArg(expr), max).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("search: %w", err)
	}
	return n, nil
}

// ftsEstimate is PostgreSQL's estimate of the rows matching the search, up
// to max: its planner's, from the lexeme frequencies ANALYZE keeps for the
// tsvector column (within a few percent of the count at 100k messages),
// which costs a plan instead of a visit to every hit's row. It is at least
// 1: a search that matches nothing finds so in the page's query.
func (s *Store) ftsEstimate(ctx context.Context, expr match, limit int64) (int64, error) {
	var plan string
	err := s.reader.QueryRowContext(ctx, `EXPLAIN (FORMAT JSON) SELECT 1 FROM messages_fts WHERE `+s.eng.searchMatch(),
		s.eng.searchArg(expr)).Scan(&plan)
	if err != nil {
		return 0, fmt.Errorf("search: %w", err)
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &out); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("search: read the planner's estimate: %v", err)
	}
	return min(max(int64(out[0].Plan.Rows), 1), limit), nil
}

// ftsHits returns the rowids matching the search, at most max.
func (s *Store) ftsHits(ctx context.Context, expr match, max int) ([]int64, error) {
	return hitIDs(ctx, s.reader, `SELECT rowid FROM messages_fts WHERE `+s.eng.searchMatch()+` LIMIT ?`, s.eng.searchArg(expr), max)
}

// idList is ids as a JSON array, for json_each.
func idList(ids []int64) string {
	b := make([]byte, 0, len(ids)*8+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// ftsQuery turns what a person typed into search words that cannot be a
// syntax error (search.Parse: every whitespace-separated word a phrase of
// its tokens, so "order-123" matches those two tokens in a row and AND, OR,
// NOT and column names are plain words; "a b" one phrase; word* a prefix;
// all of them must match), for either engine (match, search.go).
func ftsQuery(q string) ([]searchWord, error) {
	pq, err := search.Parse(q)
	if err != nil {
		var se *search.Error
		if errors.As(err, &se) {
			return nil, &InvalidArgumentError{Param: "q", Msg: se.Msg}
		}
		return nil, err
	}
	words := make([]searchWord, len(pq.Phrases))
	for i, ph := range pq.Phrases {
		words[i] = searchWord{text: ph.Text, prefix: ph.Prefix}
	}
	return words, nil
}

// ftsPhrase quotes s as one FTS5 phrase.
func ftsPhrase(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// hasToken reports whether the unicode61 tokenizer would find a token in s:
// its token characters are letters, numbers and private-use characters.
func hasToken(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r) {
			return true
		}
	}
	return false
}

// propertyPhrase returns an FTS5 expression that every message with the
// property pm matches, to narrow the exact (JSON) check to few rows; "" when
// there is none. The search index holds the properties' JSON text as
// dlq.EncodeProperties writes it (see ingest.go), where a key is followed by
// its value with only punctuation between: the tokens of the key's JSON
// text then those of the value's (escapes included, as they are indexed)
// form a phrase that is there. A string value and a number or boolean
// written as the same text have the same tokens, as they should.
func propertyPhrase(pm dlq.PropertyMatch) match {
	text := jsonText(pm.Key) + " " + jsonText(pm.Value)
	if !hasToken(text) {
		return nil
	}
	return match{{cols: propertiesColumn, words: []searchWord{{text: text}}}}
}

// jsonText is s as JSON writes it inside the quotes.
func jsonText(s string) string {
	j := jsonString(s)
	return j[1 : len(j)-1]
}

// jsonString is s as a JSON string, escaped the way dlq.EncodeProperties
// escapes keys.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// smallNamespace is the fewest messages a namespace filter always finds
// through the namespace's entities rather than the time index.
const smallNamespace = 2000

// entityIDs returns the ids of the entities at path, in namespace ns (any
// when empty).
func entityIDs(ctx context.Context, db queryer, ns, path string) ([]int64, error) {
	q, args := `SELECT id FROM entities WHERE path = ? ORDER BY id`, []any{path}
	if ns != "" {
		q, args = `SELECT id FROM entities WHERE namespace = ? AND path = ?`, []any{ns, path}
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// namespaceKnown reports whether the catalog has an entity in namespace ns.
func namespaceKnown(ctx context.Context, db queryer, ns string) (bool, error) {
	var known bool
	err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM entities WHERE namespace = ?)`, ns).Scan(&known)
	return known, err
}
