package store

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// The search index (messages_fts) and the property rows (message_properties)
// live in a second SQLite file beside the catalog, IndexPath(path), with
// their watermark (index_meta's index.through): issue 18. The indexer
// (ingest_index.go) writes that file on a connection of its own, which has
// the catalog attached read-only, so its transactions take the index file's
// write lock and never the catalog's: the index rows are written on one
// core while the ingest's transactions write the message rows on the other,
// instead of both taking turns on one writer.
//
// Every other connection of the store (the writer, the readers) has the
// index file ATTACHed as "idx": a query names messages_fts and
// message_properties as before, and SQLite finds them there (the catalog
// file holds no table of those names). A transaction that reads both files
// sees each at a moment of its own; the watermark is what makes that safe.
// It moves in the transaction that writes the rows it describes, in the
// same file, so:
//   - a crash loses no index row for good: a transaction of the index file
//     either committed its rows and the watermark, or neither, and the
//     indexer resumes from the watermark;
//   - nothing is indexed twice: the watermark says which ids are indexed;
//   - a read sees no message twice nor an index row without its message:
//     every read joins the index rows to the catalog's messages by id;
//     rows of messages its snapshot of the catalog does not hold drop out.
//
// The index file is derived data: a catalog opened without it (a backup of
// the catalog file alone) or with the index of another catalog (index_meta's
// catalog.id differs from the catalog's) is indexed again from scratch,
// behind the watermark as after a bulk read.

// IndexPath is the file of the search index and property rows of the
// catalog at path: path + "-index" (with its own -wal and -shm).
func IndexPath(path string) string { return path + "-index" }

// indexSchema is the index file's tables: the search index as 0002, 0004
// and 0012 made it, the property rows as 0013 did, what the indexer learned
// of the property keys (0020), the sort keys' bounds (key_bounds.go), and
// its meta.
var indexSchema = []string{
	`CREATE VIRTUAL TABLE IF NOT EXISTS idx.messages_fts USING fts5 (
	body, reason, description, properties,
	content = '', contentless_delete = 1,
	tokenize = 'unicode61 remove_diacritics 2'
)`,
	`CREATE TABLE IF NOT EXISTS idx.message_properties (
	key        TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	at         INTEGER NOT NULL,
	message_id INTEGER NOT NULL,
	PRIMARY KEY (key, value, at, message_id)
) STRICT, WITHOUT ROWID`,
	// Which property keys have rows (property_keys.go): learned from the
	// rows indexed, so rebuilt with them.
	`CREATE TABLE IF NOT EXISTS idx.property_keys (
	key     TEXT    PRIMARY KEY,
	seen    INTEGER NOT NULL DEFAULT 0,
	indexed INTEGER,
	decided_at INTEGER
) STRICT`,
	`CREATE TABLE IF NOT EXISTS idx.property_key_values (
	key   TEXT NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY (key, value)
) STRICT, WITHOUT ROWID`,
	// A bound on the sort keys of each block of message ids and those
	// below it (key_bounds.go).
	`CREATE TABLE IF NOT EXISTS idx.key_bounds (
	block   INTEGER PRIMARY KEY,
	max_key INTEGER NOT NULL
) STRICT`,
	`CREATE TABLE IF NOT EXISTS idx.index_meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT`,
}

// metaCatalogID is the meta key (in both files) of the catalog's identity:
// an index file belongs to the catalog whose id it carries.
const metaCatalogID = "catalog.id"

// sqliteDriver is the driver sql.Open("sqlite") uses, with the package's
// SQL functions registered (registerFunctions).
func sqliteDriver() sqldriver.Driver {
	db, _ := sql.Open("sqlite", "")
	defer db.Close()
	return db.Driver()
}

// attachConnector opens connections with dsn and attaches the index file
// to each as "idx" (attach is its URI; "" attaches nothing).
type attachConnector struct {
	drv    sqldriver.Driver
	dsn    string
	attach string
	// pragmas run on the attached file after it is attached.
	pragmas []string
}

func (c attachConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	if c.attach == "" {
		return conn, nil
	}
	ex, ok := conn.(sqldriver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("the sqlite driver cannot execute statements on a connection")
	}
	stmts := append([]string{"ATTACH DATABASE '" + strings.ReplaceAll(c.attach, "'", "''") + "' AS idx"}, c.pragmas...)
	for _, q := range stmts {
		if _, err := ex.ExecContext(ctx, q, nil); err != nil {
			conn.Close()
			return nil, fmt.Errorf("attach the search index file: %w", err)
		}
	}
	return conn, nil
}

func (c attachConnector) Driver() sqldriver.Driver { return c.drv }

// indexURI is the URI the index file is attached by; readOnly attaches it
// read-only (mode=ro) and never creates it.
func indexURI(path string, readOnly bool) string {
	q := url.Values{}
	if readOnly {
		q.Set("mode", "ro")
	}
	u := "file:" + uriPathEscaper.Replace(IndexPath(path))
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// openAttached opens a pool on dsn whose connections attach the index file
// of path (read-only when readOnly).
func openAttached(drv sqldriver.Driver, dsn, path string, readOnly bool, pragmas ...string) *sql.DB {
	return sql.OpenDB(attachConnector{drv: drv, dsn: dsn, attach: indexURI(path, readOnly), pragmas: pragmas})
}

// indexerDSN opens the catalog read-only (mode=ro): the indexer's
// transactions (IMMEDIATE) then take the write lock of the attached index
// file alone. The catalog is already in WAL mode (the writer opened it).
func indexerDSN(path string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerCheckpointPages)) // a backstop: makeWayForLog
	q.Set("mode", "ro")
	return "file:" + uriPathEscaper.Replace(path) + "?" + q.Encode()
}

// openPropertyWriter opens the pool (one connection) the indexer writes
// property rows on (indexOnce): the index file of path attached, as
// "idx", to a private in-memory database, so that its transactions cannot
// read the catalog. On the indexer's own connection a transaction begins
// with a read of the catalog (BEGIN IMMEDIATE begins one on a read-only
// file), which holds the catalog's log back until it commits.
func openPropertyWriter(drv sqldriver.Driver, path string, busy time.Duration) *sql.DB {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Set("_txlock", "immediate")
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerCheckpointPages)) // a backstop: makeWayForLog
	q.Set("mode", "memory")
	db := openAttached(drv, "file:dlqdash-property-rows?"+q.Encode(), path, false, `PRAGMA idx.synchronous = NORMAL`,
		fmt.Sprintf(`PRAGMA idx.journal_size_limit = %d`, walSizeLimit))
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db
}

// closeIndexPools closes the indexer's pools (idxdb, propdb).
func (s *Store) closeIndexPools() error {
	return errors.Join(s.idxdb.Close(), s.propdb.Close())
}

// openIndexer opens the indexer's connection (one: the index file's one
// writer) and makes the index file ready: WAL mode, its tables, and its
// rows emptied when it holds another catalog's index.
func openIndexer(ctx context.Context, drv sqldriver.Driver, path string, busy time.Duration, logger *slog.Logger) (*sql.DB, error) {
	db := openAttached(drv, indexerDSN(path, busy), path, false, `PRAGMA idx.synchronous = NORMAL`,
		fmt.Sprintf(`PRAGMA idx.journal_size_limit = %d`, walSizeLimit))
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := prepareIndexFile(ctx, db, logger); err != nil {
		db.Close()
		return nil, fmt.Errorf("open the search index file %s: %w", IndexPath(path), err)
	}
	return db, nil
}

func prepareIndexFile(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA idx.journal_mode = WAL`).Scan(&mode); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var fresh int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idx.sqlite_schema WHERE name = 'messages_fts'`).Scan(&fresh); err != nil {
		return err
	}
	for _, q := range indexSchema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if fresh == 0 {
		// Merging as 0012 set it: none during a bulk read, 64 segments at
		// a time when a level fills, 'merge' steps when idle.
		for _, q := range []string{`INSERT INTO idx.messages_fts (messages_fts, rank) VALUES ('automerge', 0)`,
			`INSERT INTO idx.messages_fts (messages_fts, rank) VALUES ('crisismerge', 64)`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
	}
	var catalogID, indexID sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT value FROM main.meta WHERE key = ?), (SELECT value FROM idx.index_meta WHERE key = ?)`,
		metaCatalogID, metaCatalogID).Scan(&catalogID, &indexID); err != nil {
		return err
	}
	if !catalogID.Valid {
		return errors.New("the catalog has no catalog.id (it was not migrated)")
	}
	if indexID.Valid && indexID.String != catalogID.String {
		// Another catalog's index (a catalog restored without its index
		// file, beside a newer one): index this one from scratch.
		logger.Warn("the search index file belongs to another catalog: indexing this catalog again",
			"catalog_id", catalogID.String, "index_catalog_id", indexID.String)
		for _, q := range []string{`INSERT INTO idx.messages_fts (messages_fts) VALUES ('delete-all')`,
			`DELETE FROM idx.message_properties`, `DELETE FROM idx.property_keys`, `DELETE FROM idx.property_key_values`,
			`DELETE FROM idx.key_bounds`, `DELETE FROM idx.index_meta`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idx.index_meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaCatalogID, catalogID.String); err != nil {
		return err
	}
	if err := fillKeyBounds(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

// separateIndexes moves a catalog written before the index file (its
// search index and property rows in the catalog file) to it: the catalog's
// tables are dropped and its watermark removed, and the index file is
// written again from the messages (the indexer, behind its watermark, from
// zero). It also gives the catalog its identity (catalog.id). Open runs it
// after the migrations, on the writer, every time: it does nothing on a
// catalog that has neither table.
func (s *Store) separateIndexes(ctx context.Context) error {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return s.wrap("move the search index to its own file", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO main.meta (key, value) VALUES (?, lower(hex(randomblob(16))))
		ON CONFLICT (key) DO NOTHING`, metaCatalogID); err != nil {
		return fmt.Errorf("move the search index to its own file: %w", err)
	}
	for _, table := range []string{"messages_fts", "message_properties"} {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM main.sqlite_schema WHERE name = ?`, table).Scan(&n); err != nil {
			return fmt.Errorf("move the search index to its own file: %w", err)
		}
		if n > 0 {
			if _, err := tx.ExecContext(ctx, `DROP TABLE main.`+table); err != nil {
				return fmt.Errorf("move the search index to its own file: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM main.meta WHERE key = ?`, metaIndexThrough); err != nil {
		return fmt.Errorf("move the search index to its own file: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap("move the search index to its own file", err)
	}
	return nil
}
