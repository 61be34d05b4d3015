package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultBusyTimeout is how long a connection waits for a lock held by
// another connection (or another process) before giving up.
const DefaultBusyTimeout = 5 * time.Second

// ErrUnwritable reports that the database file or its directory cannot be
// created or written.
var ErrUnwritable = errors.New("database is not writable")

// ErrLocked reports that a write waited longer than the busy timeout for a
// lock another connection held on the SQLite catalog or on its search
// index file (IndexPath): another process using the files (a second
// dlqdash, a sqlite3 shell, a backup tool) or, once the store is open,
// this store's own search indexer, which writes the index file in batches
// beside the ingest. The error's text says which are possible and what to
// do (Store.lockedWords).
var ErrLocked = errors.New("database is locked")

// SchemaTooNewError reports a database whose schema was written by a newer
// dlqdash than this one.
type SchemaTooNewError struct {
	Path            string
	DatabaseVersion int // highest migration recorded in the database
	KnownVersion    int // highest migration this binary knows
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("database %s has schema version %d but this dlqdash only knows up to version %d: use a newer dlqdash or another --db file",
		e.Path, e.DatabaseVersion, e.KnownVersion)
}

// Options tune Open. The zero value is ready to use.
type Options struct {
	// BusyTimeout is how long to wait for a lock held elsewhere; zero means
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Logger receives one line per applied migration; nil discards.
	Logger *slog.Logger
}

// Store is the catalog's database: a SQLite file, or a PostgreSQL
// database (Open). It is safe for concurrent use.
type Store struct {
	// Now returns the current time; tests replace it. Times are stored as
	// Unix milliseconds UTC.
	Now func() time.Time

	// path is the SQLite file, or the PostgreSQL URL without its password.
	path string
	eng  engine
	// writer has exactly one connection so that writes queue in Go rather
	// than fight over SQLite's lock, and every transaction on it takes the
	// catalog's write lock first (engine.lockWriter) so that a
	// read-then-write transaction never fails to upgrade.
	writer *sql.DB
	// reader is a pool of query_only connections: in WAL mode readers never
	// block the writer nor each other.
	reader *sql.DB
	// idxdb is the indexer's one connection: the catalog read-only, the
	// index file (IndexPath) attached read-write (index_file.go). Nil on
	// PostgreSQL and read-only stores.
	idxdb *sql.DB
	// propdb is the connection the indexer writes property rows on: the
	// index file attached to a private in-memory database, so that its
	// transactions cannot read the catalog (openPropertyWriter). Nil when
	// idxdb is.
	propdb *sql.DB
	// noIndexFile: a read-only store opened without its index file (a
	// copy of the catalog file alone): searches and property filters fail
	// with errIndexFileMissing.
	noIndexFile bool
	// keyBounds: the index file has key_bounds (key_bounds.go), which a
	// writable Open makes sure of; a read-only store beside an index file
	// an older dlqdash wrote may find none, and searches walk unbounded.
	keyBounds bool
	// newestFound and newestMissed count the search pages found among
	// their newest hits and those that were not (read_newest.go).
	newestFound, newestMissed atomic.Int64

	// The catalog's prepared multi-row inserts (ingest_insert.go).
	chunk chunkStatements
	// A replay batch's prepared writes (jobs_stmts.go).
	jobStmts jobStatements
	// The search's highlighter (read_highlight.go).
	matches matchFinder
	// idx writes the search and property rows behind the ingest
	// (ingest_index.go).
	idx *indexer
	// busy is the SQLite connections' busy timeout (Options.BusyTimeout),
	// which an ErrLocked says it waited.
	busy time.Duration
	// ckpt copies the write-ahead log into the database beside the writer
	// (checkpoint.go); idxCkpt the index file's, beside the indexer.
	ckpt, idxCkpt *checkpointer
	// restart lets the catalog's log start over during a bulk read
	// (checkpoint.go); nil on PostgreSQL.
	restart *logRestart
	// closeUnindexed, set by tests, leaves the unindexed tail to the next
	// Open, as a crash would.
	closeUnindexed bool
	// closeIndexFor is how long Close goes on indexing the tail
	// (closeIndexBudget; tests shorten it).
	closeIndexFor time.Duration
	// batchMax, set by tests, makes index transactions smaller than
	// indexMax.
	batchMax int64
	// log is the logger of Options.
	log *slog.Logger
	// replicaPool is the PostgreSQL pool the replicas coordinate on
	// (ReplicaDB); nil on SQLite.
	replicaPool *pgxpool.Pool
	// token identifies this process's holds on jobs' sources
	// (jobs_sources.go).
	tokenOnce sync.Once
	token     string
	// fault, set by tests, fails a write at a named point (testFault).
	fault func(point string) error
}

// faultBeforeStatusEntry is the point between a job's status change and
// its audit entry, inside their one transaction (SetStatusAudited).
const faultBeforeStatusEntry = "before_status_entry"

// faultBeforeCreationEntry is the point between a new job's rows (the job
// and its items) and its creation entry, inside their one transaction
// (CreateJobAudited).
const faultBeforeCreationEntry = "before_creation_entry"

// testFault is the error a test injects at point; nil otherwise.
func (s *Store) testFault(point string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(point)
}

// Open opens the database and migrates it to the newest schema this binary
// knows. target is a postgres:// or postgresql:// URL for a PostgreSQL
// database (postgres.go), else the path of a SQLite file, created if
// needed.
func Open(ctx context.Context, target string, opts Options) (*Store, error) {
	if isPostgresURL(target) {
		return openPostgres(ctx, target, opts, false)
	}
	return openSQLite(ctx, target, opts)
}

func openSQLite(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	if err := checkWritable(path); err != nil {
		return nil, err
	}
	if err := registerFunctions(); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}

	if err := checkWritable(IndexPath(path)); err != nil {
		return nil, err
	}
	drv := sqliteDriver()
	// The writer and the readers have the index file attached
	// (index_file.go); the writer's transactions lock the catalog alone
	// (engine.lockWriter), and the index file only when they write to it.
	writer := openAttached(drv, dsn(path, opts.BusyTimeout, false), path, false, `PRAGMA idx.synchronous = NORMAL`,
		fmt.Sprintf(`PRAGMA idx.journal_size_limit = %d`, walSizeLimit))
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)

	s := &Store{Now: time.Now, path: path, writer: writer, busy: opts.BusyTimeout, closeIndexFor: closeIndexBudget, log: logger}
	if err := s.migrate(ctx, logger); err != nil {
		writer.Close()
		return nil, err
	}

	if err := s.separateIndexes(ctx); err != nil {
		writer.Close()
		return nil, err
	}
	idxdb, err := openIndexer(ctx, drv, path, opts.BusyTimeout, logger)
	if err != nil {
		writer.Close()
		return nil, err
	}
	s.idxdb = idxdb
	s.keyBounds = true // prepareIndexFile made and filled it
	s.propdb = openPropertyWriter(drv, path, opts.BusyTimeout)

	if err := s.prepareChunks(ctx); err != nil {
		s.closeIndexPools()
		writer.Close()
		return nil, err
	}

	// The reader pool opens after migration so that its connections find the
	// files already in WAL mode.
	reader := openAttached(drv, dsn(path, opts.BusyTimeout, true), path, false)
	setReadPool(reader)
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		s.closeIndexPools()
		writer.Close()
		return nil, s.wrap("open read pool", err)
	}
	s.reader = reader
	s.restart = newLogRestart(restartFrames)
	if s.ckpt, err = newCheckpointer(path, opts.BusyTimeout, s.restart); err != nil {
		reader.Close()
		s.closeIndexPools()
		writer.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if s.idxCkpt, err = newCheckpointer(IndexPath(path), opts.BusyTimeout, nil); err != nil {
		s.ckpt.close()
		reader.Close()
		s.closeIndexPools()
		writer.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s.idx = newIndexer(s)
	// A tail a crash left unindexed is indexed at once.
	if behind, err := s.indexBehind(ctx); err != nil {
		s.Close()
		return nil, err
	} else if behind {
		s.idx.poke()
	}
	return s, nil
}

// ReadPoolSize is how many read connections a Store opens at most. Reads
// are mostly short, but a search for a common word takes tens of
// milliseconds: with a pool the size of the cores (it was max(4, cores)),
// 32 clients queued behind a few such reads for a connection, and every
// quick list waited as long as the slowest search (issue 18). SQLite
// readers in WAL mode do not block each other; the CPU is shared by the
// Go scheduler instead of by a queue.
const ReadPoolSize = 32

// readIdleTime closes read connections unused this long: each holds its
// own page cache.
const readIdleTime = time.Minute

func setReadPool(reader *sql.DB) {
	reader.SetMaxOpenConns(ReadPoolSize)
	reader.SetMaxIdleConns(ReadPoolSize)
	reader.SetConnMaxIdleTime(readIdleTime)
}

// Close indexes the messages not yet indexed for up to closeIndexBudget
// (closeIndexTail) and closes both pools.
func (s *Store) Close() error {
	first := s.idx != nil && s.idx.close()
	var errs []error
	if first && !s.closeUnindexed {
		errs = append(errs, s.closeIndexTail(context.Background()))
	}
	s.jobStmts.mu.Lock()
	errs = append(errs, s.jobStmts.close())
	s.jobStmts.mu.Unlock()
	errs = append(errs, s.closeRawInserts())
	for _, st := range []*sql.Stmt{s.chunk.groups, s.chunk.groupEntities, s.chunk.counts} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.replicaPool != nil {
		s.replicaPool.Close()
	}
	errs = append(errs, s.closeMatches(), s.ckpt.close(), s.idxCkpt.close(), s.reader.Close())
	if s.idxdb != nil {
		errs = append(errs, s.closeIndexPools())
	}
	return errors.Join(append(errs, s.writer.Close())...)
}

// Path is the database file's path, or the PostgreSQL URL without its
// password.
func (s *Store) Path() string { return s.path }

// Engine is "sqlite" or "postgres".
func (s *Store) Engine() string { return s.eng.Name() }

// beginWrite begins a write transaction (see engine.lockWriter): every
// transaction that writes begins here.
//
// On PostgreSQL, a write whose context carries a fencer (FencedNamespace,
// FencedJobs) runs it right after the lock (postgres_shared.go).
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if f := fenceOf(ctx); f != nil && s.eng.postgres {
		return s.beginFenced(ctx, f)
	}
	s.beforeWrite(ctx)
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := s.eng.lockWriter(ctx, tx); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// beforeWrite lets the catalog's log start over before a write
// transaction begins, if it is due (checkpoint.go).
func (s *Store) beforeWrite(ctx context.Context) {
	s.restart.beforeWrite(func() bool { return s.checkpointCatalog(ctx) })
}

// writerCheckpointPages is the writer's wal_autocheckpoint, and the
// indexer's (makeWayForLog): a backstop, at 512 MiB, that never runs in a
// bulk read of a million messages. The catalog's log is copied by the
// background checkpointer, and started over by the writer between two of
// the indexer's transactions (checkpoint.go). At 4,000 pages the writer's own checkpoint ran
// after nearly every commit of a bulk read and waited for its fsyncs on
// the ingest's goroutine: 22,238-22,579 msg/s at a million against
// 23,656-23,778 without it (BENCHMARKS.md, issue 18).
const writerCheckpointPages = 131072

// walSizeLimit is the size (bytes) a write-ahead log file is cut back to
// when the log starts over (journal_size_limit). During a bulk read the
// indexer's read transactions keep every checkpoint from completing, and
// the catalog's log grows to 0.5-1.6 GiB at a million messages
// (BENCHMARKS.md, issue 18); without a limit the file kept that size on
// disk, unused, until dlqdash stopped. A variable for tests.
var walSizeLimit int64 = 64 << 20

func dsn(path string, busy time.Duration, readOnly bool) string {
	q := url.Values{}
	// busy_timeout goes first so that the pragmas after it wait for locks
	// instead of failing at once (the driver also sorts it first).
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		// Not IMMEDIATE: that would lock the attached index file too
		// (index_file.go). beginWrite locks the catalog alone
		// (engine.lockWriter).
		q.Set("_txlock", "deferred")
		// The writer's own checkpoint is a backstop
		// (writerCheckpointPages).
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerCheckpointPages))
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
		// A multi-row INSERT inside a transaction keeps a statement
		// journal (the pages it changed, to undo that statement alone);
		// past 64 KiB SQLite spills it to a temporary file, which cost
		// the ingest a pwrite per page it touched (3 µs a message at 1M,
		// issue 18). In memory it is a copy of those pages, freed when
		// the statement ends. Temporary tables the writer's statements
		// build are held in memory too; its own queries build none larger
		// than a page's ids.
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	// SQLite reads the name as a URI: escape what would end the path or be
	// decoded in it.
	return "file:" + uriPathEscaper.Replace(path) + "?" + q.Encode()
}

var uriPathEscaper = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// checkWritable gives a clear error for the common mistakes (missing
// directory, a directory where the file should be, no permission) before
// SQLite reports them as "unable to open database file".
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: directory %s does not exist", ErrUnwritable, dir)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrUnwritable, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUnwritable, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory, not a database file", ErrUnwritable, path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnwritable, err)
	}
	return f.Close()
}

// wrap turns SQLite's result codes into the package's errors; a lock
// error says how long the connection waited (Options.BusyTimeout).
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	busy := s.busy
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%s: %w: %s (%v)", op, ErrLocked, s.lockedWords(busy), err)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
			return fmt.Errorf("%s: %w: %s: %v", op, ErrUnwritable, s.path, err)
		}
	}
	return fmt.Errorf("%s %s: %w", op, s.path, err)
}

// lockedWords says who may have held the lock a write gave up on after
// busy, and what to do. SQLite does not say which file it waited for, nor
// who held it. Until the store has its indexer's connection (while it
// opens, and on a read-only store) only another process can have: a
// second dlqdash on the same file, which SQLite does not support beside a
// running one, or a tool. Afterwards this store's own search indexer may
// also have held the index file's lock while it wrote a batch.
func (s *Store) lockedWords(busy time.Duration) string {
	if s.idxdb == nil {
		return fmt.Sprintf("another process kept %s (or its search index %s) locked for more than %s: "+
			"stop the other dlqdash using this file (one dlqdash per SQLite file; several replicas need PostgreSQL), "+
			"or close the sqlite3 shell or backup tool that has it open, and try again", s.path, IndexPath(s.path), busy)
	}
	return fmt.Sprintf("%s or its search index %s stayed locked for more than %s, by this dlqdash's own search indexer "+
		"(it writes the index in batches beside the ingest, longest while it catches up with a backlog) "+
		"or by another process using the files: try again; "+
		"if it keeps happening, make sure no other dlqdash, sqlite3 shell or backup tool has %s open", s.path, IndexPath(s.path), busy, s.path)
}

// wrapBusy is for the error of a statement inside a transaction: a lock
// SQLite gave up on is wrap's ErrLocked, in words; any other error is
// returned with op, as it was.
func (s *Store) wrapBusy(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return s.wrap(op, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (s *Store) nowMillis() int64 { return s.Now().UTC().UnixMilli() }
