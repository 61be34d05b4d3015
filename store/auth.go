package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

// This file keeps sessions and API tokens (0008_auth.sql) for package auth:
// by the hashes of their secrets, never the secrets.

var _ auth.Store = (*Store)(nil)

func unixMs(t time.Time) int64 { return t.UTC().UnixMilli() }

func fromMillis(v int64) time.Time { return time.UnixMilli(v).UTC() }

func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMillis(v.Int64)
	return &t
}

// CreateToken stores t under hash; auth.ErrNameTaken if the name is in use.
func (s *Store) CreateToken(ctx context.Context, t auth.Token, hash string) error {
	_, err := s.writer.ExecContext(ctx, `INSERT INTO api_tokens (name, hash, role, created_at, created_by, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, t.Name, hash, t.Role.String(), unixMs(t.CreatedAt), t.CreatedBy, millis(t.ExpiresAt))
	if err != nil && s.eng.uniqueViolation(err, "api_tokens.name", "api_tokens_pkey") {
		return fmt.Errorf("token %q: %w", t.Name, auth.ErrNameTaken)
	}
	return s.wrap("create token", err)
}

const tokenColumns = `name, role, created_at, created_by, expires_at, last_used_at, revoked_at`

func scanToken(row interface{ Scan(...any) error }) (auth.Token, error) {
	var (
		t                      auth.Token
		role                   string
		created                int64
		expires, used, revoked sql.NullInt64
	)
	if err := row.Scan(&t.Name, &role, &created, &t.CreatedBy, &expires, &used, &revoked); err != nil {
		return t, err
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		return t, fmt.Errorf("token %q: %w", t.Name, err)
	}
	t.Role, t.CreatedAt = r, fromMillis(created)
	t.ExpiresAt, t.LastUsedAt, t.RevokedAt = optTime(expires), optTime(used), optTime(revoked)
	return t, nil
}

// TokenByHash returns the token with this hash; auth.ErrNotFound if none.
func (s *Store) TokenByHash(ctx context.Context, hash string) (auth.Token, error) {
	t, err := scanToken(s.reader.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return t, auth.ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("read token: %w", err)
	}
	return t, nil
}

// TokenUsed sets a token's last use.
func (s *Store) TokenUsed(ctx context.Context, name string, at time.Time) error {
	_, err := s.writer.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = ? WHERE name = ?`, unixMs(at), name)
	return s.wrap("record token use", err)
}

// ListTokens returns every token by name, revoked ones included.
func (s *Store) ListTokens(ctx context.Context) ([]auth.Token, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []auth.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken sets a token's revoked_at unless it is set already, and
// returns the token; auth.ErrNotFound if there is none of that name.
func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time) (auth.Token, error) {
	t, err := scanToken(s.writer.QueryRowContext(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE name = ?
		RETURNING `+tokenColumns, unixMs(at), name))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("token %q: %w", name, auth.ErrNotFound)
	}
	if err != nil {
		return t, s.wrap("revoke token", err)
	}
	return t, nil
}

// CreateSession stores a session.
func (s *Store) CreateSession(ctx context.Context, sess auth.Session) error {
	groups := sess.Groups
	if groups == nil {
		groups = []string{}
	}
	g, err := json.Marshal(groups)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO sessions (id, user_name, email, groups_json, role, created_at, last_seen_at, idle_expires_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, sess.ID, sess.Name, sess.Email, string(g), sess.Role.String(),
		unixMs(sess.CreatedAt), unixMs(sess.LastSeenAt), unixMs(sess.IdleExpiresAt), unixMs(sess.ExpiresAt))
	return s.wrap("create session", err)
}

// SessionByID returns the session with this hashed id; auth.ErrNotFound if
// none. Its role is the one earned at sign-in (NoRole if unreadable): the
// caller computes the current one from the groups.
func (s *Store) SessionByID(ctx context.Context, id string) (auth.Session, error) {
	var (
		sess                         auth.Session
		groups, role                 string
		created, seen, idle, expires int64
	)
	err := s.reader.QueryRowContext(ctx, `SELECT id, user_name, email, groups_json, role, created_at, last_seen_at, idle_expires_at, expires_at
		FROM sessions WHERE id = ?`, id).Scan(&sess.ID, &sess.Name, &sess.Email, &groups, &role, &created, &seen, &idle, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return sess, auth.ErrNotFound
	}
	if err != nil {
		return sess, fmt.Errorf("read session: %w", err)
	}
	if err := json.Unmarshal([]byte(groups), &sess.Groups); err != nil {
		return sess, fmt.Errorf("read session: groups: %w", err)
	}
	sess.Role, _ = auth.ParseRole(role)
	sess.CreatedAt, sess.LastSeenAt, sess.IdleExpiresAt, sess.ExpiresAt = fromMillis(created), fromMillis(seen), fromMillis(idle), fromMillis(expires)
	return sess, nil
}

// TouchSession records a session's use.
func (s *Store) TouchSession(ctx context.Context, id string, lastSeen, idleExpires time.Time) error {
	_, err := s.writer.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ?, idle_expires_at = ? WHERE id = ?`,
		unixMs(lastSeen), unixMs(idleExpires), id)
	return s.wrap("touch session", err)
}

// DeleteSession deletes a session; no error if it is gone already.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	_, err := s.writer.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	return s.wrap("delete session", err)
}

// DeleteExpiredSessions deletes the sessions expired at now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.writer.ExecContext(ctx, `DELETE FROM sessions WHERE `+s.eng.least("idle_expires_at", "expires_at")+` <= ?`, unixMs(now))
	if err != nil {
		return 0, s.wrap("delete expired sessions", err)
	}
	return res.RowsAffected()
}
