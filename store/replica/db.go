package replica

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the functions of this package run their SQL on: a
// *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Schema creates the table this package owns, leases. Until the PostgreSQL
// store's migrations exist it is applied by whoever opens the database
// (tests: CreateSchema); the store's first PostgreSQL migration will carry
// this DDL, after which CreateSchema goes.
//
// A lease row is created on the first Acquire of its name. term counts the
// acquisitions of the name and never goes down; holder is ” when the lease
// was released; expires_at is on the database's clock.
const Schema = `
CREATE TABLE IF NOT EXISTS leases (
	name        text PRIMARY KEY,
	term        bigint NOT NULL CHECK (term > 0),
	holder      text NOT NULL,
	acquired_at timestamptz NOT NULL,
	renewed_at  timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL
);
`

// CreateSchema applies Schema.
func CreateSchema(ctx context.Context, db DB) error {
	if _, err := db.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("create the leases table: %w", err)
	}
	return nil
}
