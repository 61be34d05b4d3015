package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// ExportMessages calls fn with every message matching f, with its body, in
// id order (the order the catalog first saw them), and stops at the first
// error fn returns (returning it). Rows are streamed: memory does not grow
// with the number of messages. It reads one snapshot on the read pool, so it
// never blocks the ingester and sees none of its later writes; a serving
// dlqdash may write to the same file meanwhile (WAL).
func (s *Store) ExportMessages(ctx context.Context, f dlq.Filter, fn func(dlq.Record) error) error {
	if usesIndexes(f) {
		if err := s.waitIndexed(ctx, -1); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer tx.Rollback()

	c, err := compileFilter(ctx, s.eng, tx, f)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if c.empty {
		return nil
	}
	where, args := c.scanWhere(s.eng)
	// NOT INDEXED walks the table in rowid order, so nothing is sorted: an
	// export of everything costs one pass and no temporary storage.
	rows, err := tx.QueryContext(ctx, "SELECT "+recordColumns+", b.body FROM messages m "+s.eng.notIndexed()+" "+
		recordJoins+" LEFT JOIN bodies b ON b.message_id = m.id"+whereClause(where)+" ORDER BY m.id", args...)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRecord(rows, true)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// SchemaTooOldError reports a database whose schema is older than this
// dlqdash's, opened by a command that does not migrate.
type SchemaTooOldError struct {
	Path            string
	DatabaseVersion int
	KnownVersion    int
}

func (e *SchemaTooOldError) Error() string {
	return fmt.Sprintf("database %s has schema version %d but this dlqdash needs version %d: "+
		"run this dlqdash's serve on it once to migrate it, or use the dlqdash that wrote it",
		e.Path, e.DatabaseVersion, e.KnownVersion)
}

// OpenReadOnly opens an existing database for reading only, for commands
// that run beside a serving dlqdash (export). It creates no file, applies no
// migration and never takes the write lock; writes through the returned
// Store fail. The schema must be exactly the one this binary knows
// (*SchemaTooOldError or *SchemaTooNewError otherwise).
func OpenReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	if isPostgresURL(path) {
		return openPostgres(ctx, path, opts, true)
	}
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("database %s does not exist", path)
	case err != nil:
		return nil, fmt.Errorf("open database: %w", err)
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a database file", path)
	}

	// A copy of the catalog file alone (the README lets a backup leave the
	// index file out) opens without it: only a search or a property
	// filter needs it, and says so (errIndexFileMissing).
	noIndexFile := false
	if _, err := os.Stat(IndexPath(path)); errors.Is(err, os.ErrNotExist) {
		noIndexFile = true
	} else if err != nil {
		return nil, fmt.Errorf("the search index file %s of %s cannot be read (%w): run dlqdash serve on the database once, "+
			"which writes it, then try again", IndexPath(path), path, err)
	}
	if err := registerFunctions(); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	dsn := readOnlyDSN(path, opts.BusyTimeout)
	// Both pools attach the index file read-only (index_file.go).
	drv := sqliteDriver()
	open := func() *sql.DB {
		if noIndexFile {
			return sql.OpenDB(attachConnector{drv: drv, dsn: dsn})
		}
		return openAttached(drv, dsn, path, true)
	}
	reader := open()
	setReadPool(reader)
	// The writer is a query_only handle too: sql.Open connects lazily, so it
	// costs nothing unless someone tries to write, and then fails cleanly.
	writer := open()
	writer.SetMaxOpenConns(1)
	s := &Store{Now: time.Now, path: path, writer: writer, reader: reader, noIndexFile: noIndexFile, busy: opts.BusyTimeout}

	var hasTable int
	if err := reader.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&hasTable); err != nil {
		s.Close()
		return nil, s.wrap("open database", err)
	}
	if hasTable == 0 {
		s.Close()
		return nil, fmt.Errorf("%s is not a dlqdash database (no schema_migrations table)", path)
	}
	v, err := s.Version(ctx)
	if err != nil {
		s.Close()
		return nil, s.wrap("open database", err)
	}
	if !noIndexFile {
		var n int
		if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM idx.sqlite_schema WHERE name = 'key_bounds'`).Scan(&n); err != nil {
			s.Close()
			return nil, s.wrap("open database", err)
		}
		s.keyBounds = n > 0
	}
	switch known := SchemaVersion(); {
	case v > known:
		s.Close()
		return nil, &SchemaTooNewError{Path: path, DatabaseVersion: v, KnownVersion: known}
	case v < known:
		s.Close()
		return nil, &SchemaTooOldError{Path: path, DatabaseVersion: v, KnownVersion: known}
	}
	return s, nil
}

// readOnlyDSN opens an existing file (mode=rw: never create it) with
// query_only connections. It sets no journal mode: the file is already in
// WAL, and changing a mode would need the write lock.
func readOnlyDSN(path string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	q.Set("mode", "rw")
	return "file:" + uriPathEscaper.Replace(path) + "?" + q.Encode()
}

// scanWhere is the whole filter as terms for a query that reads every row
// anyway (export, freezing a replay selection): no index choice, no cursor.
// The property phrases would narrow nothing worth it there: every row is
// read, and its JSON checked.
func (c *compiled) scanWhere(eng engine) ([]string, []any) {
	where, args := upperBound(slices.Clone(c.where), slices.Clone(c.args), c.until, nil)
	for _, t := range c.last {
		where = append(where, t.sql)
		args = append(args, t.args...)
	}
	if c.query != nil {
		where = append(where, "m.id IN (SELECT rowid FROM messages_fts WHERE "+eng.searchMatch()+")")
		args = append(args, eng.searchArg(c.query))
	}
	return where, args
}
