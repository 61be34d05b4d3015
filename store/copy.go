package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Moving a catalog to PostgreSQL (issue 20: dlqdash store copy): CopyTo
// streams every table of one store into another, in key order, in batches
// that each commit on their own and skip the rows the destination already
// has, so that a copy cut off at any point continues when it runs again.
// The destination's search index is built from the copied messages (an
// FTS5 index cannot be read back), and its identity sequences are moved
// past the copied ids.

// CopyProgress is how far CopyTo is: Copied of Total rows of Table (rows
// the destination already had count as copied).
type CopyProgress struct {
	Table         string
	Copied, Total int64
}

// copyTable is a table CopyTo copies, in an order that satisfies every
// foreign key, with the key it pages by. oidc_signins (sign-ins in
// progress, ten minutes each) is not copied: one in progress during the
// move is started again. Jobs come after messages, so that
// the destination's messages_redeadlettered trigger finds no job to count
// a copied copy for: the jobs' own counters are copied.
type copyTable struct {
	name, key string
	identity  bool // its key is an identity column on PostgreSQL
}

// propertiesOfSnapshot is the source's property rows of the messages its
// snapshot holds: the index file's snapshot and the catalog's are taken one
// after the other (CopyTo), so a message pruned between the two may still
// have its rows in the first. Rows of keys decided not indexed (left from
// before the decision, property_keys.go) are not copied: the destination
// has the decision (property_keys is copied) and would delete them.
const propertiesOfSnapshot = `(SELECT p.* FROM message_properties p WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = p.message_id)
	AND p.key NOT IN (SELECT key FROM property_keys WHERE indexed = 0))`

// from is what a copy reads of t.
func (t copyTable) from() string {
	if t.name == "message_properties" {
		return propertiesOfSnapshot
	}
	return t.name
}

var copyTables = []copyTable{
	{"meta", "key", false},
	{"entities", "id", true},
	{"groups", "id", true},
	{"cursors", "entity_id, subqueue", false},
	{"group_entities", "group_id, entity_id", false},
	{"catalog_counts", "entity_id, subqueue, state", false},
	{"depth_samples", "entity_id, at", false},
	{"messages", "id", false},
	{"bodies", "message_id", false},
	{"property_keys", "key", false},
	{"property_key_values", "key, value", false},
	{"message_properties", "key, value, at, message_id", false},
	{"jobs", "id", true},
	{"job_messages", "job_id, message_id", false},
	{"job_redeadlettered", "job_id, reason", false},
	{"audit_log", "seq", false},
	{"audit_actions", "id", false},
	{"audit_action_entries", "action_id, seq", false},
	{"sessions", "id", false},
	{"api_tokens", "name", false},
	{"group_reopenings", "id", true},
	{"alert_webhooks", "id", true},
	{"alert_deliveries", "id", true},
	{"alert_cursor", "id", false},
}

// copyBatch is how many rows one destination transaction writes.
const copyBatch = 500

// CopyTo copies s's catalog into dst, a PostgreSQL store of the same
// schema version, reading one snapshot of s. It calls progress after each
// batch, and checks at the end that dst has as many rows as s in every
// table, and a search row for every message.
func (s *Store) CopyTo(ctx context.Context, dst *Store, progress func(CopyProgress)) error {
	if !dst.eng.postgres {
		return fmt.Errorf("copy the catalog: the destination %s is not a PostgreSQL database", dst.path)
	}
	if s.noIndexFile {
		return fmt.Errorf("copy the catalog: %w", s.errIndexFileMissing())
	}
	from, err := s.Version(ctx)
	if err != nil {
		return err
	}
	to, err := dst.Version(ctx)
	if err != nil {
		return err
	}
	if from != to {
		return fmt.Errorf("copy the catalog: %s has schema version %d and %s version %d: open both with this dlqdash's serve first",
			s.path, from, dst.path, to)
	}
	// The destination's indexer stays out of the copy, which writes the
	// index rows itself and moves the watermark past them
	// (copyTailProperties).
	if dst.idx != nil && !dst.idx.paused.Swap(true) {
		defer dst.idx.paused.Store(false)
	}
	src, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("copy the catalog: %w", err)
	}
	defer src.Rollback()
	// The snapshot of the index file first, then the catalog's
	// (index_file.go): every message the first has index rows of was
	// committed before it, so the second holds it.
	var n0 int64
	if err := src.QueryRowContext(ctx, `SELECT count(*) FROM idx.index_meta`).Scan(&n0); err != nil {
		return fmt.Errorf("copy the catalog: %w", err)
	}
	if err := src.QueryRowContext(ctx, `SELECT count(*) FROM main.meta`).Scan(&n0); err != nil {
		return fmt.Errorf("copy the catalog: %w", err)
	}
	totals := map[string]int64{}
	for _, t := range copyTables {
		var n int64
		if err := src.QueryRowContext(ctx, `SELECT count(*) FROM `+t.from()+` AS t`).Scan(&n); err != nil {
			return fmt.Errorf("copy the catalog: count %s: %w", t.name, err)
		}
		totals[t.name] = n
		if err := dst.copyRows(ctx, src, t, n, progress); err != nil {
			return fmt.Errorf("copy the catalog: %s: %w", t.name, err)
		}
		if t.identity {
			if _, err := dst.writer.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('`+t.name+`', '`+t.key+`'),
				(SELECT coalesce(max(`+t.key+`), 0) + 1 FROM `+t.name+`), false)`); err != nil {
				return fmt.Errorf("copy the catalog: %s's ids: %w", t.name, err)
			}
		}
	}
	if err := dst.copySearchRows(ctx, src, totals["messages"], progress); err != nil {
		return fmt.Errorf("copy the catalog: search index: %w", err)
	}
	totals["messages_fts"] = totals["messages"]
	// The source's indexer may not have indexed its newest messages (a
	// serve that writes the file, or one that crashed): their property
	// rows are built here, as PostgreSQL's ingest builds them, and the
	// destination's watermark covers every copied message.
	tail, err := dst.copyTailProperties(ctx, src)
	if err != nil {
		return fmt.Errorf("copy the catalog: properties of the newest messages: %w", err)
	}
	totals["message_properties"] += tail
	// The source's watermark is in its index file (index_file.go), the
	// destination's in its meta (copyTailProperties wrote it).
	totals["meta"]++
	for _, name := range append(tableNames(), "messages_fts") {
		var n int64
		if err := dst.reader.QueryRowContext(ctx, `SELECT count(*) FROM `+name).Scan(&n); err != nil {
			return fmt.Errorf("copy the catalog: verify %s: %w", name, err)
		}
		if n != totals[name] {
			return fmt.Errorf("copy the catalog: %s has %d rows in %s and %d in %s: the destination was written to meanwhile, or the copy is wrong",
				name, totals[name], s.path, n, dst.path)
		}
	}
	return nil
}

func tableNames() []string {
	var out []string
	for _, t := range copyTables {
		out = append(out, t.name)
	}
	return out
}

// copyRows copies table t from src, a snapshot of the source, in batches.
func (dst *Store) copyRows(ctx context.Context, src *sql.Tx, t copyTable, total int64, progress func(CopyProgress)) error {
	rows, err := src.QueryContext(ctx, `SELECT * FROM `+t.from()+` AS t ORDER BY `+t.key)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	var batch []any
	var copied int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n := len(batch) / len(cols)
		tx, err := dst.beginWrite(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+t.name+` (`+strings.Join(cols, ", ")+`) VALUES `+
			strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")+` ON CONFLICT DO NOTHING`, batch...); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		copied += int64(n)
		batch = batch[:0]
		if progress != nil {
			progress(CopyProgress{Table: t.name, Copied: copied, Total: total})
		}
		return nil
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		batch = append(batch, vals...)
		if len(batch)/len(cols) == copyBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if copied == 0 && progress != nil {
		progress(CopyProgress{Table: t.name, Total: total})
	}
	return nil
}

// copySearchRows builds the destination's search rows of the copied
// messages from the source's values, as insertMessages builds them.
func (dst *Store) copySearchRows(ctx context.Context, src *sql.Tx, total int64, progress func(CopyProgress)) error {
	rows, err := src.QueryContext(ctx, `SELECT m.id, b.body, coalesce(m.dead_letter_reason, ''),
		coalesce(m.dead_letter_description, ''), m.properties FROM messages m LEFT JOIN bodies b ON b.message_id = m.id ORDER BY m.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var args []any
	var copied int64
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		n := len(args) / 2
		tx, err := dst.beginWrite(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO messages_fts (rowid, doc) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?, CAST(? AS tsvector)), ", n), ", ")+" ON CONFLICT DO NOTHING", args...); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		copied += int64(n)
		args = args[:0]
		if progress != nil {
			progress(CopyProgress{Table: "messages_fts", Copied: copied, Total: total})
		}
		return nil
	}
	for rows.Next() {
		var id int64
		var body []byte
		var reason, desc, props string
		if err := rows.Scan(&id, &body, &reason, &desc, &props); err != nil {
			return err
		}
		text, isText := bodyText(body)
		if !isText {
			text = ""
		}
		args = append(args, id, tsvector(text, reason, desc, props))
		if len(args)/2 == copyBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return flush()
}

// copyTailProperties writes the destination's property rows of the
// messages above the source's watermark (index.through: the source has
// none for them), and moves the destination's watermark past every copied
// message. It returns how many rows the destination has that the source
// has not (this run's and an earlier, cut-off run's).
func (dst *Store) copyTailProperties(ctx context.Context, src *sql.Tx) (int64, error) {
	var through, newest int64
	// The source is SQLite: its watermark is in its index file.
	if err := src.QueryRowContext(ctx, `SELECT coalesce(`+watermarkSQLite+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest); err != nil {
		return 0, err
	}
	// The source's decisions, in the same snapshot (property_keys.go):
	// keys decided not indexed get no rows.
	decided, err := propertyKeys(ctx, src)
	if err != nil {
		return 0, err
	}
	skip := notIndexed(decided)
	rows, err := src.QueryContext(ctx, `SELECT id, properties, coalesce(enqueued_at, -1) FROM messages WHERE id > ? ORDER BY id`, through)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var args []any
	for rows.Next() {
		var id, at int64
		var props string
		if err := rows.Scan(&id, &props, &at); err != nil {
			return 0, err
		}
		for _, r := range appendPropertyRows(nil, []byte(props), at, id, skip, false) {
			args = append(args, r...)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	tx, err := dst.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	for len(args) > 0 {
		n := min(len(args)/4, copyBatch)
		if _, err := tx.ExecContext(ctx, "INSERT INTO message_properties (key, value, at, message_id) VALUES "+
			placeholders(n, 4)+" ON CONFLICT DO NOTHING", args[:n*4]...); err != nil {
			return 0, err
		}
		args = args[n*4:]
	}
	// A copy run again finds the rows of an earlier run: they count too.
	var have int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM message_properties WHERE message_id > ?`, through).Scan(&have); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = CAST(greatest(CAST(meta.value AS BIGINT), CAST(excluded.value AS BIGINT)) AS text)`,
		metaIndexThrough, fmt.Sprint(newest)); err != nil {
		return 0, err
	}
	return have, tx.Commit()
}
