package store

import (
	"context"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// CountMessages counts the messages matching f, up to max: it returns
// min(matches, max). A list page can then say "more than N" without counting
// a million rows: the count walks the same index a list page would, so it
// costs at most max index steps (plus the full-text work a search needs).
// max <= 0 counts everything (slow over broad filters on a large catalog).
func (s *Store) CountMessages(ctx context.Context, f dlq.Filter, max int64) (int64, error) {
	// Planned as the list page it goes with (a page of DefaultListLimit):
	// for a common word, a plan made for max rows collects every hit of the
	// search first, which took three times as long as walking the page's
	// index until max matches.
	p, err := s.planList(ctx, f, DefaultListLimit)
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
