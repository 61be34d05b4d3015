package store

import (
	"context"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// ListWaiting returns a page of the present messages in state (deferred or
// scheduled) in the order they wait: deferred messages oldest enqueued
// first (an orphan, never received by its sequence number, is old), and
// scheduled ones by when they are due, soonest first; ties by id. Pages are
// keyset-paginated like ListMessages; next is "" after the last page.
//
// Deferred pages walk messages_by_state in its order, scheduled ones
// messages_by_due (migration 0005): no page sorts.
func (s *Store) ListWaiting(ctx context.Context, state dlq.State, limit int, cursor string) ([]dlq.Record, string, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var key, index string
	switch state {
	case dlq.StateDeferred:
		key, index = sortKey, "messages_by_state"
	case dlq.StateScheduled:
		key, index = "coalesce(m.scheduled_enqueue_at, -1)", "messages_by_due"
	default:
		return nil, "", &InvalidArgumentError{Param: "state", Msg: fmt.Sprintf("waiting messages are deferred or scheduled, not %q", state)}
	}
	code, _ := stateCode(state)
	where := []string{"m.state = ?", "m.state <> 0", "m.gone_at IS NULL"} // the second term lets the partial index serve
	args := []any{code}
	if cursor != "" {
		k, err := decodeWaitCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		where = append(where, key+" >= ?", "("+key+" > ? OR m.id > ?)")
		args = append(args, k.at, k.at, k.id)
	}
	q := "SELECT " + recordColumns + ", " + key + " FROM messages m " + s.eng.indexedBy(index) + " " + recordJoins +
		whereClause(where) + " ORDER BY " + key + ", m.id LIMIT ?"
	args = append(args, limit+1)
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list waiting: %w", err)
	}
	defer rows.Close()
	var (
		recs []dlq.Record
		keys []int64
	)
	for rows.Next() {
		var at int64
		r, err := scanRecord(withExtra{rows, &at}, false)
		if err != nil {
			return nil, "", fmt.Errorf("list waiting: %w", err)
		}
		recs, keys = append(recs, r), append(keys, at)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list waiting: %w", err)
	}
	var next string
	if len(recs) > limit {
		recs = recs[:limit]
		next = encodeWaitCursor(pageKey{at: keys[limit-1], id: recs[limit-1].ID})
	}
	return recs, next, nil
}

// withExtra scans one more column after the ones scanRecord asks for.
type withExtra struct {
	rows  interface{ Scan(...any) error }
	extra any
}

func (w withExtra) Scan(dest ...any) error { return w.rows.Scan(append(dest, w.extra)...) }

const waitCursorPrefix = "w1."

func encodeWaitCursor(k pageKey) string { return encodeKey(waitCursorPrefix, k) }

func decodeWaitCursor(c string) (pageKey, error) {
	return decodeKey(waitCursorPrefix, c, "follow the next page link as it is")
}
