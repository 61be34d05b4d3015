//go:build scale

package store

import (
	"context"

	"github.com/dlqdash/dlqdash/dlq"
)

// WriterExecForTest runs q on the writer's one connection (so that a
// PRAGMA stays in force for the store's writes): the scale harness's
// -scale.writer-sql tries settings without rebuilding.
func WriterExecForTest(ctx context.Context, s *Store, q string) error {
	_, err := s.writer.ExecContext(ctx, q)
	return err
}

// ListPageQueryForTest is the query ListMessages runs for the first page of
// f (the record's columns, the limit as the last argument), for EXPLAIN
// ANALYZE; "" when the plan knows nothing can match.
func ListPageQueryForTest(ctx context.Context, s *Store, f dlq.Filter) (string, []any, error) {
	p, err := s.planList(ctx, f, DefaultListLimit)
	if err != nil || p.empty {
		return "", nil, err
	}
	where, args := p.bounded(nil)
	key, id := p.keys()
	return "SELECT " + recordColumns + " FROM " + p.from() + " " + recordJoins + whereClause(where) +
		" ORDER BY " + key + " DESC, " + id + " DESC LIMIT ?", append(args, DefaultListLimit+1), nil
}
