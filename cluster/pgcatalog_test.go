package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store/replica"
)

// pgCatalogSchema is what pgCatalog writes: one row per successful read of
// the namespace (who wrote it, under which term), and the namespace's last
// success, as the PostgreSQL store's entities and namespace rows will
// have them.
const pgCatalogSchema = `
CREATE TABLE reads (
	id      bigserial PRIMARY KEY,
	replica text NOT NULL,
	term    bigint NOT NULL,
	at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE last_success (namespace text PRIMARY KEY, at timestamptz NOT NULL);
CREATE TABLE jobs (
	id           bigserial PRIMARY KEY,
	status       text NOT NULL,
	claimed_by   text,
	claim_term   bigint NOT NULL DEFAULT 0,
	heartbeat_at timestamptz,
	sent         int NOT NULL DEFAULT 0
);
`

// pgCatalog stands in for the PostgreSQL store's catalog of one namespace
// fenced with a lease term (what its FencedNamespace will return): every
// write transaction calls the fencer first, as the store's will.
type pgCatalog struct {
	db        replica.DB
	begin     func(context.Context) (pgx.Tx, error)
	fence     replica.Fencer
	replica   string
	term      int64
	namespace string
}

func (c *pgCatalog) write(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := c.fence.Fence(ctx, tx); err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (c *pgCatalog) Cursors(context.Context) ([]dlq.Cursor, error) { return nil, nil }
func (c *pgCatalog) SyncEntities(ctx context.Context, _ []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	err := c.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO reads (replica, term) VALUES ($1, $2)`, c.replica, c.term); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO last_success VALUES ($1, $2) ON CONFLICT (namespace) DO UPDATE SET at = EXCLUDED.at`, c.namespace, at)
		return err
	})
	if err != nil {
		return dlq.EntitySync{}, fmt.Errorf("record the listed entities: %w", err)
	}
	return dlq.EntitySync{}, nil
}
func (c *pgCatalog) SaveSettings(ctx context.Context, _ []dlq.Settings) error {
	return c.write(ctx, func(pgx.Tx) error { return nil })
}
func (c *pgCatalog) ApplyPage(context.Context, dlq.Page) (dlq.PageResult, error) {
	return dlq.PageResult{}, errors.New("no entities")
}
func (c *pgCatalog) SaveCursor(context.Context, dlq.Cursor) error { return nil }
func (c *pgCatalog) RecordDepth(context.Context, string, dlq.Counts, time.Time) error {
	return nil
}
func (c *pgCatalog) PruneGone(context.Context, time.Time, int) (int, error) { return 0, nil }
func (c *pgCatalog) MergeSearchIndex(context.Context, int) (bool, error)    { return false, nil }
func (c *pgCatalog) LastSuccess(ctx context.Context) (*time.Time, error) {
	return lastSuccess(ctx, c.db, c.namespace)
}

func lastSuccess(ctx context.Context, db replica.DB, namespace string) (*time.Time, error) {
	var at time.Time
	err := db.QueryRow(ctx, `SELECT at FROM last_success WHERE namespace = $1`, namespace).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &at, nil
}
