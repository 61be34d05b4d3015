package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrationDir is where an engine's migrations are: SQLite's in
// migrations/, their PostgreSQL twins (same numbers and names) in
// migrations/postgres/.
func (e engine) migrationDir() string {
	if e.postgres {
		return "migrations/postgres"
	}
	return "migrations"
}

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded files named NNNN_name.sql of SQLite,
// in version order. Versions must be 1, 2, 3, ... without gaps.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	return loadMigrationsIn(fsys, sqliteEngine.migrationDir())
}

// loadMigrationsIn reads the migrations in directory dir of fsys.
func loadMigrationsIn(fsys fs.FS, dir string) ([]migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and an underscore", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the newest schema version this binary knows.
func SchemaVersion() int {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		panic(err) // the embedded files are checked by the tests
	}
	return len(ms)
}

// schemaVersion is the newest schema version this binary knows for the
// engine (the same as SchemaVersion once every migration has its
// PostgreSQL twin: TestMigrationTwins).
func (e engine) schemaVersion() int {
	ms, err := loadMigrationsIn(migrationFiles, e.migrationDir())
	if err != nil {
		panic(err) // the embedded files are checked by the tests
	}
	return len(ms)
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
) STRICT`

const createMigrationsTablePG = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    bigint PRIMARY KEY,
	name       text   NOT NULL,
	applied_at bigint NOT NULL
)`

func (s *Store) migrate(ctx context.Context, logger *slog.Logger) error {
	ms, err := loadMigrationsIn(migrationFiles, s.eng.migrationDir())
	if err != nil {
		return err
	}
	if err := s.createMigrationsTable(ctx); err != nil {
		return s.wrap("create schema_migrations", err)
	}
	known := len(ms)

	for {
		// Each migration runs in its own IMMEDIATE transaction, and the
		// current version is read inside it: two processes starting on the
		// same file at once apply each migration exactly once.
		applied, err := s.applyNext(ctx, ms)
		if err != nil {
			return err
		}
		if applied == nil {
			return nil
		}
		logger.Info("applied database migration", "version", applied.version, "name", applied.name, "known_version", known)
	}
}

// createMigrationsTable creates schema_migrations if it is missing. On
// PostgreSQL it holds the migration lock meanwhile: two replicas creating
// the table at once would collide in PostgreSQL's catalog.
func (s *Store) createMigrationsTable(ctx context.Context) error {
	if !s.eng.postgres {
		_, err := s.writer.ExecContext(ctx, createMigrationsTable)
		return err
	}
	tx, err := s.beginMigration(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, createMigrationsTablePG); err != nil {
		return err
	}
	return tx.Commit()
}

// beginMigration begins a migration's transaction: IMMEDIATE on SQLite; on
// PostgreSQL holding the migration lock (an advisory lock), so that the
// replicas starting together apply each migration once, one after another.
func (s *Store) beginMigration(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return tx, err
	}
	if !s.eng.postgres {
		if err := sqliteLockCatalog(ctx, tx); err != nil {
			tx.Rollback()
			return nil, err
		}
		return tx, nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, migrateLockKey); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// applyNext applies the first migration the database lacks and returns it,
// or nil when the database is current.
func (s *Store) applyNext(ctx context.Context, ms []migration) (*migration, error) {
	tx, err := s.beginMigration(ctx)
	if err != nil {
		return nil, s.wrap("begin migration", err)
	}
	defer tx.Rollback()

	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return nil, s.wrap("read schema version", err)
	}
	if current > len(ms) {
		return nil, &SchemaTooNewError{Path: s.path, DatabaseVersion: current, KnownVersion: len(ms)}
	}
	if current == len(ms) {
		return nil, nil
	}
	m := ms[current]
	if m.foreignKeysOff() && !s.eng.postgres {
		// A table rebuild (SQLite's twelve steps): foreign key enforcement
		// cannot change inside a transaction, so this one starts again
		// with it off on the one writer connection, and checks the keys
		// itself before it commits.
		tx.Rollback()
		return s.applyWithoutForeignKeys(ctx, ms)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return nil, s.wrap("apply migration "+m.name, err)
	}
	return s.recordMigration(ctx, tx, m)
}

// Version returns the schema version recorded in the database.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.reader.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// foreignKeysMarker, on a line of its own in a migration, runs it with
// foreign key enforcement off (a rebuild of a table others refer to) and
// checks every key before it commits.
const foreignKeysMarker = "-- dlqdash:foreign-keys-off"

func (m migration) foreignKeysOff() bool {
	for _, line := range strings.Split(m.sql, "\n") {
		if strings.TrimSpace(line) == foreignKeysMarker {
			return true
		}
	}
	return false
}

// applyWithoutForeignKeys is applyNext for a migration marked with
// foreignKeysMarker. The writer pool holds one connection, so the pragmas
// and the transaction run on the same one.
func (s *Store) applyWithoutForeignKeys(ctx context.Context, ms []migration) (*migration, error) {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return nil, s.wrap("begin migration", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return nil, s.wrap("begin migration", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.wrap("begin migration", err)
	}
	defer tx.Rollback()
	if err := sqliteLockCatalog(ctx, tx); err != nil {
		return nil, s.wrap("begin migration", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return nil, s.wrap("read schema version", err)
	}
	if current >= len(ms) {
		return nil, nil // another process got here first
	}
	// Normally the marked migration; another process may have applied it
	// meanwhile, and then the next one runs here, with the same checks.
	m := ms[current]
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return nil, s.wrap("apply migration "+m.name, err)
	}
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return nil, s.wrap("check foreign keys after migration "+m.name, err)
	}
	bad := rows.Next()
	rows.Close()
	if bad {
		return nil, fmt.Errorf("migration %s: it would break a foreign key; the database is unchanged", m.name)
	}
	return s.recordMigration(ctx, tx, m)
}

// recordMigration records m as applied in tx and commits it.
func (s *Store) recordMigration(ctx context.Context, tx *sql.Tx, m migration) (*migration, error) {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, s.nowMillis()); err != nil {
		return nil, s.wrap("record migration "+m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap("commit migration "+m.name, err)
	}
	return &m, nil
}
