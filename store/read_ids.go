package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dlqdash/dlqdash/dlq"
)

// MaxByIDs bounds the ids of one MessagesByID call.
const MaxByIDs = 1000

// MessagesByID returns those of the messages ids that match f, newest first
// (the order of ListMessages), without bodies. It is how the live dashboard
// decides which of a batch of new messages belong on a page: its cost
// follows len(ids), not the catalog's size, because the ids drive the query
// and every filter term (the full-text search too) is only checked on them.
// Unknown ids are left out; more than MaxByIDs ids is an
// *InvalidArgumentError.
func (s *Store) MessagesByID(ctx context.Context, ids []int64, f dlq.Filter) ([]dlq.Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > MaxByIDs {
		return nil, &InvalidArgumentError{Param: "ids", Msg: fmt.Sprintf("at most %d ids, got %d", MaxByIDs, len(ids))}
	}
	if usesIndexes(f) {
		if err := s.waitIndexed(ctx, slices.Max(ids)); err != nil {
			return nil, fmt.Errorf("messages by id: %w", err)
		}
	}
	c, err := compileFilter(ctx, s.eng, s.reader, f)
	var unknown *dlq.UnknownEntityError
	if errors.As(err, &unknown) {
		return nil, nil // a live list of an entity not (yet) seen: none of them
	}
	if err != nil {
		return nil, fmt.Errorf("messages by id: %w", err)
	}
	if c.empty {
		return nil, nil
	}
	// NOT INDEXED: the id list drives, through rowid lookups; every other
	// term is a check on those rows.
	where := append([]string{"m.id IN (" + s.eng.jsonInts() + ")"}, c.where...)
	args := append([]any{idList(ids)}, c.args...)
	if c.until != nil {
		where = append(where, sortKey+" < ?")
		args = append(args, *c.until)
	}
	for _, t := range c.last {
		where = append(where, t.sql)
		args = append(args, t.args...)
	}
	// The search and the property phrases are asked about each id alone
	// (a rowid lookup in the search index), never as a full match.
	// (c.phrases need no check: the property terms in c.last imply them.)
	if c.query != nil {
		where = append(where, s.eng.searchProbe())
		args = append(args, s.eng.searchArg(c.query))
	}
	q := "SELECT " + recordColumns + " FROM messages m " + s.eng.notIndexed() + " " + recordJoins + whereClause(where) +
		" ORDER BY " + sortKey + " DESC, m.id DESC"
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("messages by id: %w", err)
	}
	defer rows.Close()
	var recs []dlq.Record
	for rows.Next() {
		r, err := scanRecord(rows, false)
		if err != nil {
			return nil, fmt.Errorf("messages by id: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages by id: %w", err)
	}
	return recs, nil
}
