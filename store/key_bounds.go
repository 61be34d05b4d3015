package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The search's key bound (SQLite; issue 18).
//
// A list with a search walks an index newest first, checking each row
// against the search's hits. When the newest messages have none of the
// words (a burst in one queue during an incident, while someone searches
// for an older order), that walk went through all of them before it found
// a hit: 300,000 newer messages made a search of a word in 1 % of a million
// messages take 65 ms instead of 13 (BenchmarkListAfterBurst).
//
// Message ids grow with the ingest, and a hit's id is the search index's
// rowid, so the newest hit's id is one cheap question of FTS5 (rowids in
// descending order). key_bounds, in the index file, holds for each block
// of 1,024 ids the largest sort key of any message with an id in that block
// or any block below it. The newest hit's block's bound is then a bound on
// the sort key of every hit, and the walk starts there: a range seek past
// the newer messages instead of a step through each.
//
// The indexer writes the bounds in the transaction that writes the search
// rows (indexSearchRange), so every message with search rows is under its
// block's bound. Sort keys never change and ids are never reused, so a
// bound, once written, stays true: pruning leaves it, and a block written
// again (the index rebuilt from zero) only grows it.

// keyBlockShift makes an id's block: id >> keyBlockShift.
const keyBlockShift = 10

// writeKeyBounds adds the messages with ids in (from, hi] to key_bounds, in
// tx (the indexer's, which writes the index file).
func writeKeyBounds(ctx context.Context, tx *sql.Tx, from, hi int64) error {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT m.id >> %d, max(%s) FROM messages m
		WHERE m.id > ? AND m.id <= ? GROUP BY 1 ORDER BY 1`, keyBlockShift, sortKey), from, hi)
	if err != nil {
		return fmt.Errorf("bound the sort keys: %w", err)
	}
	type block struct{ n, max int64 }
	var blocks []block
	for rows.Next() {
		var b block
		if err := rows.Scan(&b.n, &b.max); err != nil {
			rows.Close()
			return fmt.Errorf("bound the sort keys: %w", err)
		}
		blocks = append(blocks, b)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("bound the sort keys: %w", err)
	}
	if len(blocks) == 0 {
		return nil
	}
	// The blocks below (and a part of the first already written).
	var bound sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max_key FROM idx.key_bounds WHERE block <= ? ORDER BY block DESC LIMIT 1`,
		blocks[0].n).Scan(&bound); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("bound the sort keys: %w", err)
	}
	cum := int64(-1)
	if bound.Valid {
		cum = bound.Int64
	}
	for _, b := range blocks {
		cum = max(cum, b.max)
		if _, err := tx.ExecContext(ctx, `INSERT INTO idx.key_bounds (block, max_key) VALUES (?, ?)
			ON CONFLICT (block) DO UPDATE SET max_key = max(max_key, excluded.max_key)`, b.n, cum); err != nil {
			return fmt.Errorf("bound the sort keys: %w", err)
		}
	}
	return nil
}

// fillKeyBounds writes key_bounds for the messages the index file already
// has search rows of, when it has none: an index file written before the
// bounds were (about a second at a million messages, once). In tx, on the
// indexer's connection at Open.
func fillKeyBounds(ctx context.Context, tx *sql.Tx) error {
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM idx.key_bounds LIMIT 1)`).Scan(&have); err != nil {
		return fmt.Errorf("bound the sort keys: %w", err)
	}
	if have > 0 {
		return nil
	}
	var searched int64
	indexed, args := sqliteEngine.indexedThroughSQL()
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+indexed+`, 0)`, args...).Scan(&searched); err != nil {
		return fmt.Errorf("bound the sort keys: %w", err)
	}
	if searched == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO idx.key_bounds (block, max_key)
		SELECT block, max(max_key) OVER (ORDER BY block) FROM (
			SELECT m.id >> %d AS block, max(%s) AS max_key FROM main.messages m WHERE m.id <= ? GROUP BY 1)`,
		keyBlockShift, sortKey), searched); err != nil {
		return fmt.Errorf("bound the sort keys: %w", err)
	}
	return nil
}

// searchKeyBound is a bound on the sort key of every message the search
// expr matches (on SQLite; ok false on PostgreSQL, when the search has no
// hit, or on a read-only store beside an index file without the bounds).
func (s *Store) searchKeyBound(ctx context.Context, expr match) (bound int64, ok bool, err error) {
	if s.eng.postgres || !s.keyBounds {
		return 0, false, nil
	}
	var b sql.NullInt64
	err = s.reader.QueryRowContext(ctx, fmt.Sprintf(`SELECT (SELECT max_key FROM key_bounds WHERE block =
		(SELECT rowid >> %d FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT 1))`, keyBlockShift),
		s.eng.searchArg(expr)).Scan(&b)
	if err != nil {
		return 0, false, fmt.Errorf("search: %w", err)
	}
	return b.Int64, b.Valid, nil
}
