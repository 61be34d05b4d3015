package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

// This file keeps OpenID Connect sign-ins in progress (0018_oidc_signins.sql)
// for package auth/oidc, so that whichever replica the provider's callback
// reaches can finish a sign-in another one started.

// CreatePendingSignIn stores p, then deletes the sign-ins that lapsed by
// p.CreatedAt (every replica's: the sweep is an index range of the lapsed
// rows only) and the oldest of p.Client's beyond its newest perClient, so
// that a flood of sign-ins from one address keeps at most perClient rows.
// One transaction, outside the store's write lock: it touches no row a
// catalog or job write does.
func (s *Store) CreatePendingSignIn(ctx context.Context, p auth.PendingSignIn, perClient int) error {
	if perClient < 1 {
		return fmt.Errorf("create pending sign-in: a limit per client of %d keeps nothing", perClient)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("create pending sign-in", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM oidc_signins WHERE expires_at <= ?`, unixMs(p.CreatedAt)); err != nil {
		return s.wrap("sweep lapsed sign-ins", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO oidc_signins (state_hash, client, next, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		p.StateHash, p.Client, p.Next, unixMs(p.CreatedAt), unixMs(p.ExpiresAt)); err != nil {
		return s.wrap("create pending sign-in", err)
	}
	// The client's rows beyond its newest perClient: an index range of
	// (client, created_at), at most perClient+1 rows long.
	if _, err := tx.ExecContext(ctx, `DELETE FROM oidc_signins WHERE client = ? AND state_hash NOT IN (
			SELECT state_hash FROM oidc_signins WHERE client = ? ORDER BY created_at DESC, state_hash DESC LIMIT ?)`,
		p.Client, p.Client, perClient); err != nil {
		return s.wrap("bound pending sign-ins", err)
	}
	return s.wrap("create pending sign-in", tx.Commit())
}

// TakePendingSignIn deletes the sign-in with this state hash and returns
// it: one statement, so of two callbacks with the same state (on one
// replica or two) exactly one gets it. auth.ErrNotFound if there is none,
// or if it had lapsed at now (it is deleted all the same).
func (s *Store) TakePendingSignIn(ctx context.Context, stateHash string, now time.Time) (auth.PendingSignIn, error) {
	var (
		p                auth.PendingSignIn
		created, expires int64
	)
	err := s.writer.QueryRowContext(ctx, `DELETE FROM oidc_signins WHERE state_hash = ?
		RETURNING state_hash, client, next, created_at, expires_at`, stateHash).Scan(&p.StateHash, &p.Client, &p.Next, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return p, auth.ErrNotFound
	}
	if err != nil {
		return p, s.wrap("take pending sign-in", err)
	}
	p.CreatedAt, p.ExpiresAt = fromMillis(created), fromMillis(expires)
	if !now.Before(p.ExpiresAt) {
		return auth.PendingSignIn{}, auth.ErrNotFound
	}
	return p, nil
}
