package store

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// Namespace is the catalog of one Service Bus namespace: the dlq.Catalog an
// ingester of that namespace writes through. Entities are (namespace, path),
// so two namespaces with the same queue name never mix; everything else the
// catalog keeps (messages, cursors, counters, depth samples) belongs to an
// entity. Failure groups are catalog-wide, counted per entity.
//
// The *Store's own dlq.Catalog methods are those of the unnamed namespace
// "", which is where rows cataloged before namespaces existed are until the
// program adopts them (AdoptUnnamed).
type Namespace struct {
	s    *Store
	name string
}

// Namespace returns the catalog of the namespace called name.
func (s *Store) Namespace(name string) *Namespace { return &Namespace{s: s, name: name} }

// Name is the namespace's name.
func (n *Namespace) Name() string { return n.name }

// Cursors implements dlq.Catalog for this namespace.
func (n *Namespace) Cursors(ctx context.Context) ([]dlq.Cursor, error) {
	return n.s.cursors(ctx, n.name)
}

// SyncEntities implements dlq.Catalog for this namespace: entities of other
// namespaces are neither added nor marked deleted.
func (n *Namespace) SyncEntities(ctx context.Context, listed []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	return n.s.syncEntities(ctx, n.name, listed, at)
}

// SaveSettings implements dlq.Catalog for this namespace.
func (n *Namespace) SaveSettings(ctx context.Context, settings []dlq.Settings) error {
	return n.s.saveSettings(ctx, n.name, settings)
}

// ApplyPage implements dlq.Catalog for this namespace.
func (n *Namespace) ApplyPage(ctx context.Context, p dlq.Page) (dlq.PageResult, error) {
	return n.s.applyPage(ctx, n.name, p)
}

// SaveCursor implements dlq.Catalog for this namespace.
func (n *Namespace) SaveCursor(ctx context.Context, c dlq.Cursor) error {
	return n.s.saveCursor(ctx, n.name, c)
}

// RecordDepth implements dlq.Catalog for this namespace.
func (n *Namespace) RecordDepth(ctx context.Context, entity string, c dlq.Counts, at time.Time) error {
	return n.s.recordDepth(ctx, n.name, entity, c, at)
}

// PruneGone implements dlq.Catalog: retention is catalog-wide (every
// namespace's ingester may call it; each call deletes a bounded batch).
func (n *Namespace) PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	return n.s.PruneGone(ctx, cutoff, batch)
}

// MergeSearchIndex implements dlq.Catalog (the search index is one).
func (n *Namespace) MergeSearchIndex(ctx context.Context, pages int) (bool, error) {
	return n.s.MergeSearchIndex(ctx, pages)
}

// LastSuccess implements dlq.Catalog: this namespace's last successful read.
func (n *Namespace) LastSuccess(ctx context.Context) (*time.Time, error) {
	return n.s.lastSuccess(ctx, n.name)
}

// AdoptUnnamed gives the rows of the unnamed namespace "" (everything
// cataloged before the catalog knew namespaces: migration 0011) to the
// namespace called name, so that a catalog of one namespace carries on
// under its name instead of being read again beside the old rows. An
// unnamed entity whose path the namespace already has stays unnamed (it
// cannot happen to a database that only the program wrote). It reports how
// many entities it adopted; a second call adopts nothing.
func (s *Store) AdoptUnnamed(ctx context.Context, name string) (int64, error) {
	return s.Adopt(ctx, "", name)
}

// Adopt gives the rows of the namespace called from to the namespace
// called to, as AdoptUnnamed does for the unnamed one: a catalog whose
// namespace was renamed (the demo's one namespace "demo" became its first
// of two, "prod-eu") carries on under the new name, with its cursors, its
// last success and its jobs (as source and, for a named from, as
// destination), instead of keeping rows no configured namespace reads or
// replays. An entity of from whose path to already has stays where it is.
// It reports how many entities it moved; a second call moves nothing.
func (s *Store) Adopt(ctx context.Context, from, to string) (int64, error) {
	if to == "" || from == to {
		return 0, nil
	}
	what := "the namespace " + from
	if from == "" {
		what = "the unnamed namespace"
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, s.wrap("adopt "+what, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE entities SET namespace = ? WHERE namespace = ?
		AND path NOT IN (SELECT path FROM entities WHERE namespace = ?)`, to, from, to)
	if err != nil {
		return 0, fmt.Errorf("adopt %s as %s: %w", what, to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET namespace = ? WHERE namespace = ?`, to, from); err != nil {
		return 0, fmt.Errorf("adopt %s's jobs as %s: %w", what, to, err)
	}
	if from != "" {
		// "" as a destination means "the source's own": only a named
		// namespace is renamed there, and to "" where it is now the
		// source's own.
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET destination_namespace = CASE WHEN namespace = ? THEN '' ELSE ? END
			WHERE destination_namespace = ?`, to, to, from); err != nil {
			return 0, fmt.Errorf("adopt %s's jobs as %s: %w", what, to, err)
		}
	}
	// The last successful read carries over unless the namespace has its own.
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) SELECT ?, value FROM meta WHERE key = ?
		ON CONFLICT (key) DO NOTHING`, lastSuccessKey(to), lastSuccessKey(from)); err != nil {
		return 0, fmt.Errorf("adopt %s as %s: %w", what, to, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap("adopt "+what, err)
	}
	return n, nil
}
