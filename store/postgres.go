package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/store/replica"
)

// PostgreSQL behind the same Store (issue 20): Open with a postgres:// URL
// opens two pools through pgx's database/sql driver (pgdriver.go), a
// writer pool and a read pool whose sessions are read-only, and migrates the
// database with the PostgreSQL twins of the migrations
// (migrations/postgres/). Every write transaction holds one advisory lock
// (engine.lockWriter), so several replicas on one database write one at a
// time, as several processes on one SQLite file do.

// Pool sizes on PostgreSQL. Reads get ReadPoolSize connections by default,
// as on SQLite; the URL's pool_max_conns (pgxpool's name for it) sets
// another. Writes queue on the write lock whatever the pool, so the writer
// pool is small: it serves the transactions waiting for the lock and the
// single-statement writes that need none.
const (
	pgWritePoolSize = 8
	pgConnIdleTime  = 5 * time.Minute
)

// openPostgres opens the PostgreSQL database at target (a URL). A readOnly
// store applies no migration and its writer pool is read-only too
// (OpenReadOnly).
func openPostgres(ctx context.Context, target string, opts Options, readOnly bool) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("open database: %s is not a PostgreSQL URL: %w", redactURL(target), err)
	}
	readSize := ReadPoolSize
	q := u.Query()
	if v := q.Get("pool_max_conns"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("open database %s: pool_max_conns must be a positive number, not %q", u.Redacted(), v)
		}
		readSize = n
		q.Del("pool_max_conns")
		u.RawQuery = q.Encode()
	}
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", u.Redacted(), err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "dlqdash"
	}
	readCfg := cfg.Copy()
	readCfg.RuntimeParams["default_transaction_read_only"] = "on"
	// A page is a few milliseconds of work: starting parallel workers for
	// it cost more than it saved (a Gather Merge's 75 ms start on a loaded
	// machine, TestScalePostgresPlans). The URL may set it back.
	if _, ok := readCfg.RuntimeParams["max_parallel_workers_per_gather"]; !ok {
		readCfg.RuntimeParams["max_parallel_workers_per_gather"] = "0"
	}
	writeCfg := cfg
	if readOnly {
		writeCfg = readCfg
	} else {
		// A fenced write transaction left idle (a replica frozen inside
		// it) is aborted by the server before its lease can expire.
		replica.ConfigureWriter(writeCfg)
	}

	s := &Store{Now: time.Now, path: u.Redacted(), eng: postgresEngine, closeIndexFor: closeIndexBudget, log: logger}
	s.writer = sql.OpenDB(newPGConnector(writeCfg, false))
	s.writer.SetMaxOpenConns(pgWritePoolSize)
	s.writer.SetMaxIdleConns(pgWritePoolSize)
	s.writer.SetConnMaxIdleTime(pgConnIdleTime)
	s.reader = sql.OpenDB(newPGConnector(readCfg, true))
	s.reader.SetMaxOpenConns(readSize)
	s.reader.SetMaxIdleConns(readSize)
	s.reader.SetConnMaxIdleTime(pgConnIdleTime)
	fail := func(err error) (*Store, error) {
		s.reader.Close()
		s.writer.Close()
		return nil, err
	}
	if err := s.writer.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("open database %s: %w", s.path, err))
	}
	if readOnly {
		if err := s.checkVersion(ctx); err != nil {
			return fail(err)
		}
		return s, nil
	}
	if err := s.migrate(ctx, logger); err != nil {
		return fail(err)
	}
	if err := s.prepareChunks(ctx); err != nil {
		return fail(err)
	}
	if s.replicaPool, err = openReplicaPool(ctx, writeCfg); err != nil {
		return fail(fmt.Errorf("open database %s: %w", s.path, err))
	}
	// The indexer writes the search documents and property rows behind
	// the ingest (postgres_index.go); a tail a crash left unindexed is
	// indexed at once.
	s.idx = newIndexer(s)
	if behind, err := s.indexBehind(ctx); err != nil {
		s.Close()
		return nil, err
	} else if behind {
		s.idx.poke()
	}
	return s, nil
}

// checkVersion fails unless the database's schema is exactly the one this
// binary knows (for a store that does not migrate).
func (s *Store) checkVersion(ctx context.Context) error {
	var exists bool
	if err := s.reader.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("open database %s: %w", s.path, err)
	}
	if !exists {
		return fmt.Errorf("%s is not a dlqdash database (no schema_migrations table)", s.path)
	}
	v, err := s.Version(ctx)
	if err != nil {
		return err
	}
	switch known := s.eng.schemaVersion(); {
	case v > known:
		return &SchemaTooNewError{Path: s.path, DatabaseVersion: v, KnownVersion: known}
	case v < known:
		return &SchemaTooOldError{Path: s.path, DatabaseVersion: v, KnownVersion: known}
	}
	return nil
}

// redactURL is target without its password, for messages; target itself
// when it does not parse.
func redactURL(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "the database URL"
	}
	return u.Redacted()
}
