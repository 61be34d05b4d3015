package store

import (
	"context"
	"fmt"
	"time"
)

// PruneGone deletes up to batch messages that left the broker before cutoff
// (their bodies and search entries with them), and up to batch depth
// samples older than cutoff. Small batches keep each transaction short, so
// the ingester never waits long for the writer.
func (s *Store) PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, s.wrap("prune", err, DefaultBusyTimeout)
	}
	defer tx.Rollback()
	c := cutoff.UTC().UnixMilli()
	// Only messages the indexer has indexed (at or below its watermark)
	// have search and property rows; the others are simply not indexed
	// when it gets to them (ingest_index.go). On PostgreSQL every message
	// is indexed in the transaction that inserts it.
	pruned := `SELECT id FROM (SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?) AS gone
		WHERE id <= (SELECT CAST(value AS BIGINT) FROM meta WHERE key = '` + metaIndexThrough + `')`
	if s.eng.postgres {
		pruned = `SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?`
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages_fts WHERE rowid IN (`+pruned+`)`, c, batch); err != nil {
		return 0, fmt.Errorf("prune search index: %w", err)
	}
	// Property rows are found from the messages' own properties (their
	// table has no index on message_id), on PostgreSQL by that index.
	pruneProperties := `DELETE FROM message_properties WHERE (key, value, at, message_id) IN (` +
		propertyRowsOf + `m.id IN (` + pruned + `)` + propertyRowsEnd + `)`
	if s.eng.postgres {
		pruneProperties = `DELETE FROM message_properties WHERE message_id IN (` + pruned + `)`
	}
	if _, err := tx.ExecContext(ctx, pruneProperties, c, batch); err != nil {
		return 0, fmt.Errorf("prune properties: %w", err)
	}
	r, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id IN (
		SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?)`, c, batch)
	if err != nil {
		return 0, fmt.Errorf("prune messages: %w", err)
	}
	n, _ := r.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM depth_samples WHERE (entity_id, at) IN (
		SELECT entity_id, at FROM depth_samples WHERE at < ? LIMIT ?)`, c, batch); err != nil {
		return 0, fmt.Errorf("prune depth samples: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap("prune", err, DefaultBusyTimeout)
	}
	return int(n), nil
}

// MergeSearchIndex does a bounded amount of the search index's merge work
// (about pages pages written), so that its segments, which automerge 16
// lets pile up during bulk writes, are combined while nothing else writes.
// It reports whether there was work to do.
//
// On PostgreSQL it moves the GIN index's pending entries (fastupdate) into
// the index, the same kind of deferred work.
func (s *Store) MergeSearchIndex(ctx context.Context, pages int) (bool, error) {
	if s.eng.postgres {
		var moved int64
		if err := s.writer.QueryRowContext(ctx, `SELECT gin_clean_pending_list('messages_fts_doc')`).Scan(&moved); err != nil {
			return false, s.wrap("merge search index", err, DefaultBusyTimeout)
		}
		return moved > 0, nil
	}
	// An idle moment: index what the ingest left first, so that the merge
	// sees its segments.
	if err := s.catchUpIndex(ctx); err != nil {
		return false, err
	}
	before := s.totalChanges(ctx)
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO messages_fts (messages_fts, rank) VALUES ('merge', ?)`, pages); err != nil {
		return false, s.wrap("merge search index", err, DefaultBusyTimeout)
	}
	// FTS5's documented test: fewer than two changes means nothing to merge.
	return s.totalChanges(ctx)-before >= 2, nil
}

// totalChanges is SQLite's count of rows changed on the writer connection;
// an FTS5 'merge' that finds nothing to do changes none.
func (s *Store) totalChanges(ctx context.Context) int64 {
	var n int64
	_ = s.writer.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&n)
	return n
}
