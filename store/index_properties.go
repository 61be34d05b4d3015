package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// The SQLite indexer's property rows, built in Go (issue 18). They used to
// be one INSERT … SELECT over json_each with ORDER BY key, value, at, id:
// SQLite's sorter compared nearly every pair of rows by decoding their
// records (the first column, the key, ties almost always), spilled its
// runs to a temporary file and merged them back, and the one statement's
// journal copied every page it changed: a third of the indexer's property
// work at a million messages (BENCHMARKS.md). Now the indexer reads the
// batch's properties once, walks them with PostgreSQL's walker
// (eachPropertyValue, so both engines hold the same rows), sorts the rows
// in Go by integers (each distinct string ranked once) and inserts them in
// that order, propertyInsertRows a statement. Retention deletes a pruned
// message's rows found by the same walk.

// propertyInsertRows is how many property rows one INSERT statement of the
// SQLite indexer writes (4 parameters a row, well under SQLite's limit).
const propertyInsertRows = 256

// propertyRowSet is the property rows of an index batch, with their keys
// and values interned: a batch of 32,768 messages has about 160,000 rows
// but a few thousand distinct strings, and rows that hold no pointer cost
// the garbage collector nothing to scan.
type propertyRowSet struct {
	index map[string]uint32
	strs  []string
	rows  []propertyRow
	// sampled is how many rows the first propertyKeySample messages gave.
	sampled int
}

// propertyRow is one row of message_properties: key and value index strs.
type propertyRow struct {
	key, value uint32
	at, id     int64
}

func (s *propertyRowSet) intern(b []byte) uint32 {
	if i, ok := s.index[string(b)]; ok {
		return i
	}
	i := uint32(len(s.strs))
	str := string(b)
	s.strs = append(s.strs, str)
	s.index[str] = i
	return i
}

// add appends the rows of a message (propertyPairs' pairs).
func (s *propertyRowSet) add(props []byte, at, id int64) {
	first := len(s.rows)
	ok := eachPropertyValue(props, func(key, value []byte) {
		if len(value) > maxIndexedValue {
			return
		}
		r := propertyRow{key: s.intern(key), value: s.intern(value), at: at, id: id}
		if !slices.Contains(s.rows[first:], r) { // a pair the object repeats: one row
			s.rows = append(s.rows, r)
		}
	})
	if !ok {
		s.rows = s.rows[:first]
	}
}

// pairs is the (key, value) pairs of rows.
func (s *propertyRowSet) pairs(rows []propertyRow) [][2]string {
	out := make([][2]string, len(rows))
	for i, r := range rows {
		out[i] = [2]string{s.strs[r.key], s.strs[r.value]}
	}
	return out
}

// sorted drops the rows of the keys in skip and sorts the others in the
// table's key order (key, value, at, id; strings by their bytes, as
// SQLite's BINARY collation).
func (s *propertyRowSet) sorted(skip map[string]bool) []propertyRow {
	// Each string's rank in byte order, so that rows compare by integers.
	order := make([]uint32, len(s.strs))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(s.strs[a], s.strs[b]) })
	rank := make([]uint32, len(s.strs))
	for r, i := range order {
		rank[i] = uint32(r)
	}
	rows := slices.DeleteFunc(s.rows, func(r propertyRow) bool { return skip[s.strs[r.key]] })
	slices.SortFunc(rows, func(a, b propertyRow) int {
		if c := cmp.Compare(rank[a.key], rank[b.key]); c != 0 {
			return c
		}
		if c := cmp.Compare(rank[a.value], rank[b.value]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	return rows
}

// indexPropertiesSQLite learns the property keys from set's first
// messages (readPropertyRows) and writes the property rows of the keys
// not decided "not indexed", in tx, which holds the index file's write
// lock.
func indexPropertiesSQLite(ctx context.Context, tx *sql.Tx, set *propertyRowSet) error {
	// What the batch's first messages say of their keys first, so that a
	// key decided now has no rows of this batch.
	skip, err := learnPropertyKeysFrom(ctx, tx, sqliteEngine, set.pairs(set.rows[:set.sampled]))
	if err != nil {
		return err
	}
	if err := writePropertyRows(ctx, tx, insertPropertyRows, set.strs, set.sorted(skip)); err != nil {
		return fmt.Errorf("index properties: %w", err)
	}
	return nil
}

// readPropertyRows reads the property rows of the messages m that where
// (with its args) picks: every pair of their properties (propertyPairs),
// keys not indexed included. expect is how many messages it picks, if
// known (0 if not): the rows get room for all of them once the first
// propertyKeySample messages tell how many rows a message has, instead of
// growing a copy at a time (a batch of 32,768 messages has about 160,000).
func readPropertyRows(ctx context.Context, tx *sql.Tx, expect int64, where string, args ...any) (*propertyRowSet, error) {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, m.properties, coalesce(m.enqueued_at, -1)
		FROM messages m WHERE `+where+` ORDER BY m.id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := &propertyRowSet{index: map[string]uint32{}}
	var n int
	for rows.Next() {
		var id, at int64
		var props sql.RawBytes
		if err := rows.Scan(&id, &props, &at); err != nil {
			return nil, err
		}
		set.add(props, at, id)
		if n++; n == propertyKeySample {
			set.sampled = len(set.rows)
			if rest := expect - int64(n); rest > 0 {
				// 10 % more than the sample's rate, for what varies.
				set.rows = slices.Grow(set.rows, int(rest*int64(set.sampled)*11/10/int64(n)))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if n < propertyKeySample {
		set.sampled = len(set.rows)
	}
	return set, nil
}

// The statements writePropertyRows runs, each followed by its rows.
const (
	insertPropertyRows = `INSERT OR IGNORE INTO idx.message_properties (key, value, at, message_id) VALUES `
	deletePropertyRows = `DELETE FROM idx.message_properties WHERE (key, value, at, message_id) IN (VALUES `
)

// writePropertyRows runs stmt (insertPropertyRows, deletePropertyRows) for
// rows, in their order, propertyInsertRows a statement.
func writePropertyRows(ctx context.Context, tx *sql.Tx, stmt string, strs []string, rows []propertyRow) error {
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	// Each string boxed once, not once a row.
	boxed := make([]any, len(strs))
	for i, str := range strs {
		boxed[i] = str
	}
	args := make([]any, 0, 4*propertyInsertRows)
	for len(rows) > 0 {
		n := min(len(rows), propertyInsertRows)
		args = args[:0]
		for _, r := range rows[:n] {
			args = append(args, boxed[r.key], boxed[r.value], r.at, r.id)
		}
		var err error
		if n == propertyInsertRows && full != nil {
			_, err = full.ExecContext(ctx, args...)
		} else {
			// The statement's text only where it is prepared: the full
			// one once, the last, shorter one for itself.
			q := stmt + placeholders(n, 4)
			if stmt == deletePropertyRows {
				q += `)`
			}
			if n == propertyInsertRows {
				if full, err = tx.PrepareContext(ctx, q); err != nil {
					return err
				}
				_, err = full.ExecContext(ctx, args...)
			} else {
				_, err = tx.ExecContext(ctx, q, args...)
			}
		}
		if err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}
