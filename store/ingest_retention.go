package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PruneGone deletes up to batch messages that left the broker before cutoff
// (their bodies and search entries with them), and up to batch depth
// samples older than cutoff. Small batches keep each transaction short, so
// the ingester never waits long for the writer.
//
// On SQLite the index rows are in their own file (index_file.go): they are
// deleted first, in a transaction of that file, then the messages. A crash
// between the two leaves gone messages without their index rows until the
// next PruneGone deletes them, never index rows without their message. The
// messages above the watermark had no rows to delete; the indexer may have
// indexed them between the two transactions (its snapshot of the catalog
// still held them), so the catalog's transaction then takes the index
// file's lock, reads the watermark again and keeps those it passed for the
// next PruneGone, which deletes their rows.
func (s *Store) PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	c := cutoff.UTC().UnixMilli()
	var pr prunedIndexRows // SQLite
	if !s.eng.postgres {
		var err error
		if pr, err = s.pruneIndexRows(ctx, c, batch); err != nil {
			return 0, err
		}
	}
	if err := s.testFault(faultBetweenPruneSteps); err != nil {
		return 0, err
	}
	if pr.unindexed {
		defer s.holdIndexRuns()()
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, s.wrap("prune", err)
	}
	defer tx.Rollback()
	var r sql.Result
	if s.eng.postgres {
		// The indexer's lock, after the write lock (postgres_index.go):
		// no index batch reads a message this deletes before it commits,
		// and a message not indexed yet is simply not found by the next.
		if err := lockIndexPG(ctx, tx); err != nil {
			return 0, err
		}
		pruned := `SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?`
		if _, err := tx.ExecContext(ctx, `DELETE FROM messages_fts WHERE rowid IN (`+pruned+`)`, c, batch); err != nil {
			return 0, fmt.Errorf("prune search index: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM message_properties WHERE message_id IN (`+pruned+`)`, c, batch); err != nil {
			return 0, fmt.Errorf("prune properties: %w", err)
		}
		r, err = tx.ExecContext(ctx, `DELETE FROM messages WHERE id IN (
			SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?)`, c, batch)
	} else {
		now := pr.through // no message above it: nothing the indexer may have passed
		if pr.unindexed {
			if err := lockIndexFile(ctx, tx); err != nil {
				return 0, s.wrap("prune", err)
			}
			// Above both watermarks a message has no index rows; between
			// them (a crash between an index run's two transactions) it
			// has search rows, which the next PruneGone deletes.
			indexed, args := sqliteEngine.indexedThroughSQL()
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+indexed+`, 0)`, args...).Scan(&now); err != nil {
				return 0, fmt.Errorf("prune messages: %w", err)
			}
		}
		r, err = tx.ExecContext(ctx, `DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?)
			WHERE value <= ? OR value > ?) AND gone_at < ?`, pr.ids, pr.through, now, c)
	}
	if err != nil {
		return 0, fmt.Errorf("prune messages: %w", err)
	}
	n, _ := r.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM depth_samples WHERE (entity_id, at) IN (
		SELECT entity_id, at FROM depth_samples WHERE at < ? LIMIT ?)`, c, batch); err != nil {
		return 0, fmt.Errorf("prune depth samples: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap("prune", err)
	}
	return int(n), nil
}

// faultBetweenPruneSteps is the point between PruneGone's transaction of
// the index file and its transaction of the catalog.
const faultBetweenPruneSteps = "between_prune_steps"

// prunedIndexRows is what pruneIndexRows did: the messages' ids (a JSON
// array), the watermark their rows were pruned at, and whether any of them
// was above it (had no rows yet).
type prunedIndexRows struct {
	ids       string
	through   int64
	unindexed bool
}

// pruneIndexRows deletes the search and property rows of up to batch
// messages that left the broker before cutoff (Unix ms), on the indexer's
// connection, and returns the messages' ids for PruneGone to delete. Only
// messages at or below the watermark have index rows; the others are not
// indexed when the indexer gets to them, unless it does before PruneGone
// deletes them (PruneGone keeps those).
func (s *Store) pruneIndexRows(ctx context.Context, cutoff int64, batch int) (prunedIndexRows, error) {
	var pr prunedIndexRows
	tx, err := s.idxdb.BeginTx(ctx, nil)
	if err != nil {
		return pr, s.wrap("prune search index", err)
	}
	defer tx.Rollback()
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(json_group_array(id), '[]'), coalesce(max(id), 0) FROM (
		SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?)`, cutoff, batch).Scan(&pr.ids, &newest); err != nil {
		return pr, fmt.Errorf("prune search index: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+watermarkSQLite+`, 0)`, metaIndexThrough).Scan(&pr.through); err != nil {
		return pr, fmt.Errorf("prune search index: %w", err)
	}
	pr.unindexed = newest > pr.through
	ids := pr.ids
	indexed := `SELECT value FROM json_each(?) WHERE value <= coalesce(` + watermarkSQLite + `, 0)`
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages_fts WHERE rowid IN (`+indexed+`)`, ids, metaIndexThrough); err != nil {
		return pr, fmt.Errorf("prune search index: %w", err)
	}
	// Property rows are found from the messages' own properties (their
	// table has no index on message_id), by the walk that wrote them.
	set, err := readPropertyRows(ctx, tx, 0, `m.id IN (`+indexed+`)`, ids, metaIndexThrough)
	if err != nil {
		return pr, fmt.Errorf("prune properties: %w", err)
	}
	if err := writePropertyRows(ctx, tx, deletePropertyRows, set.strs, set.rows); err != nil {
		return pr, fmt.Errorf("prune properties: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return pr, s.wrap("prune search index", err)
	}
	return pr, nil
}

// MergeSearchIndex does a bounded amount of the search index's merge work
// (about pages pages written), so that its segments, which FTS5 lets pile
// up during bulk writes (automerge 0, migration 0012), are combined while
// nothing else writes.
// It reports whether there was work to do.
//
// On PostgreSQL it moves the GIN index's pending entries (fastupdate) into
// the index, the same kind of deferred work.
func (s *Store) MergeSearchIndex(ctx context.Context, pages int) (bool, error) {
	if s.eng.postgres {
		var moved int64
		if err := s.writer.QueryRowContext(ctx, `SELECT gin_clean_pending_list('messages_fts_doc')`).Scan(&moved); err != nil {
			return false, s.wrap("merge search index", err)
		}
		return moved > 0, nil
	}
	// An idle moment: index what the ingest left first, so that the merge
	// sees its segments.
	if err := s.catchUpIndex(ctx); err != nil {
		return false, err
	}
	// On the indexer's connection, which writes the index file: the
	// ingest goes on meanwhile.
	return s.mergeSearchStep(ctx, pages)
}
