package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// Property rows only for the keys worth indexing (issues 18 and 20). A key
// whose values are (nearly) unique per message (a trace id, an amount) gets
// a row per message in message_properties, each on a leaf page of its own,
// and a filter on one of its values is answered as fast by the search
// index's phrase for it (propertyPhrase: an id-like value is in a handful
// of messages). So the indexer learns, per key, from what it indexes:
//
//   - property_keys holds a row per key it has sampled: seen, the messages
//     sampled with the key, and indexed, NULL while undecided, then 1 (the
//     key keeps its rows) or 0 (no rows: "not indexed");
//   - property_key_values holds the distinct values sampled of each
//     undecided key (bounded: a key is decided by propertyKeyDecideAt
//     messages, and its values are deleted then);
//   - the sample is the first propertyKeySample messages of each index
//     batch (all of a small one), the keys not decided yet;
//   - a key is decided not indexed when, at propertyKeyDecideAt messages
//     seen, at least 9 in 10 had a value of their own (distinct values ≥
//     0.9 × seen); indexed as soon as it has been seen propertyKeyEarly
//     times with at most one distinct value in 2, or at propertyKeyDecideAt
//     otherwise. A decision is final.
//
// Every key starts with rows (undecided keys are indexed), and a decision
// only ever takes rows away, so a key either has rows for every message
// the index covers (undecided or indexed, from its first message on) or is
// answered entirely by the JSON check (compileFilter reads property_keys):
// no read uses rows that are incomplete. The decision is written in the
// index batch's transaction, before its property rows, with the watermark
// (on SQLite in the index file, rebuilt with it; on PostgreSQL beside the
// rows), so every replica and every restart agree. The rows a key had
// before its decision are deleted behind it, purgeBatch rows an index
// transaction (purgeUnindexedRows); until then no read uses them.

const (
	// propertyKeySample is how many messages of an index batch (its first)
	// are sampled for the keys not decided yet.
	propertyKeySample = 2048
	// propertyKeyEarly is the fewest messages seen that decide a key
	// indexed early, when it repeats its values (distinct ≤ seen / 2).
	propertyKeyEarly = 200
	// propertyKeyDecideAt is how many messages seen decide a key either way.
	propertyKeyDecideAt = 2000
	// purgeBatch bounds the rows of keys decided not indexed that one index
	// transaction deletes. A search or a property filter that arrives
	// during a purge's transaction waits for its end (then the run ends:
	// indexer.keepOn): 4,096 rows took 127 ms on the benchmark machine
	// with 32 clients reading, 1,024 about a quarter of that (issue 18).
	purgeBatch = 1024
)

// purgeAfter is how long after a key's decision its rows are deleted. A
// read compiles its filter (reading property_keys) and then runs its query,
// two statements: a read that found the key still undecided uses its rows,
// which must all be there when its query runs a moment later.
var purgeAfter = time.Minute

// learnPropertyKeysSQL decides the undecided keys seen often enough (two
// parameters: propertyKeyDecideAt, propertyKeyEarly), at the database's
// time: the replica that purges the rows of a key decided not indexed
// (purgeUnindexedRows) compares that time with the same clock.
func learnPropertyKeysSQL(e engine) string {
	return `UPDATE property_keys SET indexed = CASE
		WHEN (SELECT count(*) FROM property_key_values v WHERE v.key = property_keys.key) * 10 >= seen * 9 THEN 0 ELSE 1 END,
		decided_at = ` + e.dbClockMillis() + `
	WHERE indexed IS NULL AND (seen >= ?
		OR (seen >= ? AND (SELECT count(*) FROM property_key_values v WHERE v.key = property_keys.key) * 2 <= seen))`
}

// propertyKeys reads the decided keys: key → whether it has rows.
func propertyKeys(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT key, indexed FROM property_keys WHERE indexed IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read the indexed property keys: %w", err)
	}
	defer rows.Close()
	decided := map[string]bool{}
	for rows.Next() {
		var key string
		var indexed int64
		if err := rows.Scan(&key, &indexed); err != nil {
			return nil, fmt.Errorf("read the indexed property keys: %w", err)
		}
		decided[key] = indexed != 0
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the indexed property keys: %w", err)
	}
	return decided, nil
}

// learnPropertyKeys adds a sample to what the index knows of its keys: pairs
// are the (key, value) property rows of the sampled messages, a pair once a
// message. decided is what propertyKeys read in the same transaction; the
// keys it holds are skipped. It reports whether a key was decided (decided
// is then stale).
func learnPropertyKeys(ctx context.Context, tx *sql.Tx, e engine, decided map[string]bool, pairs [][2]string) (bool, error) {
	seen := map[string]int64{}
	values := map[[2]string]bool{}
	for _, kv := range pairs {
		if _, ok := decided[kv[0]]; ok {
			continue
		}
		seen[kv[0]]++
		values[kv] = true
	}
	if len(seen) == 0 {
		return false, nil
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys) // one order of locks, on PostgreSQL
	for len(keys) > 0 {
		n := min(len(keys), copyBatch)
		args := make([]any, 0, n*2)
		for _, k := range keys[:n] {
			args = append(args, k, seen[k])
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO property_keys (key, seen) VALUES `+placeholders(n, 2)+`
			ON CONFLICT (key) DO UPDATE SET seen = property_keys.seen + excluded.seen`, args...); err != nil {
			return false, fmt.Errorf("learn the property keys: %w", err)
		}
		keys = keys[n:]
	}
	kvs := make([][2]string, 0, len(values))
	for kv := range values {
		kvs = append(kvs, kv)
	}
	slices.SortFunc(kvs, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for len(kvs) > 0 {
		n := min(len(kvs), copyBatch)
		args := make([]any, 0, n*2)
		for _, kv := range kvs[:n] {
			args = append(args, kv[0], kv[1])
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO property_key_values (key, value) VALUES `+placeholders(n, 2)+`
			ON CONFLICT DO NOTHING`, args...); err != nil {
			return false, fmt.Errorf("learn the property keys: %w", err)
		}
		kvs = kvs[n:]
	}
	res, err := tx.ExecContext(ctx, learnPropertyKeysSQL(e), propertyKeyDecideAt, propertyKeyEarly)
	if err != nil {
		return false, fmt.Errorf("decide the indexed property keys: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM property_key_values
		WHERE key IN (SELECT key FROM property_keys WHERE indexed IS NOT NULL)`); err != nil {
		return false, fmt.Errorf("decide the indexed property keys: %w", err)
	}
	return true, nil
}

// learnPropertyKeysFrom adds pairs, the (key, value) property rows of an
// index batch's sampled messages (a pair once a message), to what the index
// knows of its keys, in tx, which holds the lock of the property rows
// (indexPropsLockKey on PostgreSQL, the index file's on SQLite), and returns
// the keys decided not indexed. e is the engine tx runs on.
func learnPropertyKeysFrom(ctx context.Context, tx *sql.Tx, e engine, pairs [][2]string) (map[string]bool, error) {
	decided, err := propertyKeys(ctx, tx)
	if err != nil {
		return nil, err
	}
	changed, err := learnPropertyKeys(ctx, tx, e, decided, pairs)
	if err != nil {
		return nil, err
	}
	if changed {
		if decided, err = propertyKeys(ctx, tx); err != nil {
			return nil, err
		}
	}
	return notIndexed(decided), nil
}

// notIndexed is the keys decided not indexed among decided (propertyKeys).
func notIndexed(decided map[string]bool) map[string]bool {
	skip := map[string]bool{}
	for k, indexed := range decided {
		if !indexed {
			skip[k] = true
		}
	}
	return skip
}

// purgeUnindexedRows deletes up to purgeBatch property rows of keys decided
// not indexed (written before the decision) at least purgeAfter ago, in an
// index transaction, and reports how many it deleted. No read compiled
// since the decision uses them (compileFilter answers those keys by the
// JSON check), so they can go at any pace. The age is by the database's
// clock, as the decision's time (learnPropertyKeysSQL): on PostgreSQL the
// replica that decided and the one that purges may disagree on the time.
func purgeUnindexedRows(ctx context.Context, tx *sql.Tx, e engine) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM message_properties WHERE (key, value, at, message_id) IN (
		SELECT p.key, p.value, p.at, p.message_id FROM property_keys k JOIN message_properties p ON p.key = k.key
		WHERE k.indexed = 0 AND k.decided_at <= `+e.dbClockMillis()+` - ? LIMIT ?)`, purgeAfter.Milliseconds(), purgeBatch)
	if err != nil {
		return 0, fmt.Errorf("delete the rows of properties not indexed: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// propertyKeyIndexed reports whether a filter on key may use its property
// rows: false once the indexer decided the key is not indexed.
func propertyKeyIndexed(ctx context.Context, db queryer, key string) (bool, error) {
	var off bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM property_keys WHERE key = ? AND indexed = 0)`, key).Scan(&off); err != nil {
		return false, fmt.Errorf("read the indexed property keys: %w", err)
	}
	return !off, nil
}
