package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrNotFound reports that the requested row does not exist. Package web,
// which must not import this package, recognises it by its NotFound method.
var ErrNotFound error = notFoundError{}

type notFoundError struct{}

func (notFoundError) Error() string { return "not found" }

// NotFound reports true: the error means "no such row".
func (notFoundError) NotFound() bool { return true }

// SetMeta stores value under key in the meta table, replacing any earlier value.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	_, err := s.writer.ExecContext(ctx,
		`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		key, value)
	if err != nil {
		return fmt.Errorf("set meta %q: %w", key, err)
	}
	return nil
}

// Meta returns the value stored under key, or ErrNotFound.
func (s *Store) Meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.reader.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("meta %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("meta %q: %w", key, err)
	}
	return v, nil
}
