package store

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/dlqdash/dlqdash/dlq"
)

// The indexer writes the search rows (messages_fts) and the property rows
// (message_properties) of new messages behind their ingest transactions
// (migration 0015), many transactions' messages at a time: FTS5 writes a
// segment per statement, so one statement over thousands of messages writes
// a few large segments that merge far less often than one per page, and
// property rows inserted in (key, value) order fill neighbouring rows into
// the same leaf pages instead of touching a page per row.
//
// index.through in the index file's index_meta is the watermark: every message with an id at or
// below it is indexed, none above it is. It moves in the same transaction as
// the index rows, so a crash loses nothing: the next run resumes from it.
// Results stay exact: a read that uses either index (a property filter, a
// search) first waits until the watermark covers the newest message it can
// see (waitIndexed), which asks the indexer to run now if it has not.
//
// PostgreSQL has the same indexer (postgres_index.go): its batches run on
// a connection of their own under an advisory lock, and its watermark is in
// meta, beside the index rows.

const (
	// indexBatch is how many new messages start an index run at once.
	indexBatch = 16384
	// indexMax is the most messages one index transaction covers, so that
	// the ingest never waits long behind it.
	indexMax = 16384
	// indexMaxSQLite is indexMax on SQLite, where index transactions write
	// a file of their own that the ingest does not wait for
	// (index_file.go): twice as many messages a transaction write the
	// pages at the tails of the search index and of each property's rows
	// once where two transactions wrote each twice (issue 18, the
	// indexer's half: a quarter fewer bytes written at 1M, BENCHMARKS.md).
	// Its property rows are sorted in Go (index_properties.go): about 4 MiB
	// of rows at this size.
	indexMaxSQLite = 32768
	// indexLag is how long a message waits unindexed at most when nobody
	// reads through the indexes meanwhile.
	indexLag = time.Second
)

// metaIndexThrough is the meta key of the watermark.
const metaIndexThrough = "index.through"

// errIndexerClosed reports a wait for an indexer that was stopped.
var errIndexerClosed = errors.New("the catalog was closed before its search index caught up")

// indexer runs the index transactions on the index file's own connection
// (Store.idxdb), from its own goroutine.
type indexer struct {
	s    *Store
	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	round *indexRound // the next run: readers wait for it

	// unindexed counts the messages this process inserted since the last
	// run started: a hint for when to run, not the watermark.
	unindexed atomic.Int64
	// paused stops runs (tests: a crash leaves the tail unindexed).
	paused atomic.Bool
	// lastRead is when a read last went through the indexes (Unix ns).
	lastRead atomic.Int64
	// waiters counts the reads waiting for the indexes (waitIndexed): no
	// index transaction waits for the catalog's log then (makeWayForLog).
	waiters atomic.Int32
	// asked receives when a read starts to wait: an index run waiting for
	// the catalog's log goes on at once.
	asked chan struct{}
	// running is set while a run writes the index file: an ingest
	// transaction does not index inline then (it would wait for the run's
	// transaction to take the file's lock).
	running atomic.Bool
	// writing is held by an index run's transaction (indexOnce) and by an
	// ingest transaction that indexes inline, which takes it only when it
	// is free (TryLock): the ingest never waits for a run in SQLite's busy
	// handler while it holds the catalog's lock (wantInline's check of
	// running can be just before a run starts).
	writing sync.Mutex
	closed  sync.Once

	// merge is the merging in steps while someone reads (index_merge.go),
	// which an ingest page indexed inline starts (inlined) as a run does;
	// noMerge turns it off (tests of the ingester's merge steps).
	merge       mergeRun
	leftToIdle  time.Time // when a merge left to idle time was last logged
	mergeWarned time.Time // when a failure of the merging was last logged
	mergeMin    int       // mergeFrom, smaller in tests
	mergeMax    int       // mergeWhileReading, smaller in tests
	inlined     chan struct{}
	noMerge     atomic.Bool
}

// indexRound is one run of the indexer: done closes when it ends.
type indexRound struct {
	done chan struct{}
	err  error
}

func newIndexer(s *Store) *indexer {
	ix := &indexer{s: s, kick: make(chan struct{}, 1), asked: make(chan struct{}, 1), inlined: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
		round: &indexRound{done: make(chan struct{})}, mergeMin: mergeFrom, mergeMax: mergeWhileReading}
	go ix.loop()
	return ix
}

// poke asks for a run without waiting for it. A nil indexer (a
// PostgreSQL or read-only store) has nothing to run.
func (ix *indexer) poke() {
	if ix == nil {
		return
	}
	select {
	case ix.kick <- struct{}{}:
	default:
	}
}

// added tells the indexer that n new messages were committed.
func (ix *indexer) added(n int) {
	if ix == nil {
		return
	}
	if n > 0 && ix.unindexed.Add(int64(n)) >= indexBatch {
		ix.poke()
	}
}

func (ix *indexer) loop() {
	defer close(ix.done)
	t := time.NewTicker(indexLag)
	defer t.Stop()
	var merge <-chan time.Time // the next merge step, while merging
	for {
		select {
		case <-ix.stop:
			ix.mu.Lock()
			ix.round.err = errIndexerClosed
			close(ix.round.done)
			ix.mu.Unlock()
			return
		case <-ix.kick:
		case <-t.C:
			if ix.unindexed.Load() == 0 {
				continue
			}
		case <-merge:
			merge = ix.mergeOn()
			continue
		case <-ix.inlined:
			if merge == nil {
				merge = ix.startMerging()
			}
			continue
		}
		if ix.paused.Load() {
			continue
		}
		// Runs back to back, as in a bulk read, would keep the catalog's
		// log from ever starting over. Before the round is taken: a read
		// that starts to wait meanwhile waits for this run.
		ix.s.makeWayForLog(context.Background())
		ix.mu.Lock()
		r := ix.round
		ix.round = &indexRound{done: make(chan struct{})}
		ix.mu.Unlock()
		ix.unindexed.Store(0)
		ix.running.Store(true)
		// A run stops between two transactions when the store closes:
		// Close goes on for closeIndexBudget at most.
		left, err := ix.s.catchUpIndexWhile(context.Background(), ix.keepOn)
		r.err = err
		ix.running.Store(false)
		close(r.done)
		switch {
		case left && err == nil:
			ix.poke() // rows to purge, left for the reads that waited (keepOn)
		case err == nil && merge == nil:
			merge = ix.startMerging()
		}
	}
}

// keepOn reports whether a run goes on with another transaction: not once
// the store closes, nor when every message is indexed (indexed) and a read
// waits. What is left then is rows to purge, which the reads do not need:
// the run ends, and the next one purges on. A purge can be thousands of
// rows of keys decided not indexed (propertyKeys), dozens of
// transactions, and a search that came when the run began used to wait
// for all of them (issue 18: 190-250 ms at the 32-client benchmark's
// start).
func (ix *indexer) keepOn(indexed bool) bool {
	return ix.open() && !(indexed && ix.waiters.Load() > 0)
}

// awaitRun asks for a run and waits for it to end.
func (ix *indexer) awaitRun(ctx context.Context) error {
	ix.waiters.Add(1)
	defer ix.waiters.Add(-1)
	select {
	case ix.asked <- struct{}{}:
	default:
	}
	r := ix.next()
	ix.poke()
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("index new messages: %w", r.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// makeWayForLog lets the catalog's log start over before the next index
// transaction (logRestart.hold, checkpoint.go), and has the index file's
// checkpointer copy that file's log into it, so that the transaction can
// start the index file's log over; unless a read waits for the indexes: a
// search or a property filter never waits for a log (a read that starts
// to wait meanwhile cuts the wait short).
//
// The indexer's own commits never copy the index file's log (its
// wal_autocheckpoint is a backstop, as the writer's). When they did, past
// 4,000 pages, a read that came during an index run waited for the copy's
// two fsyncs at its commit too: up to 281 ms with 32 clients reading, whose
// transactions kept the log from starting over, so that every index commit
// copied (issue 18, BENCHMARKS.md).
func (s *Store) makeWayForLog(ctx context.Context) {
	if s.idx == nil {
		return
	}
	if s.idx.waiters.Load() == 0 {
		s.restart.hold(ctx, s.idx.asked)
	}
	if s.idx.waiters.Load() == 0 {
		s.idxCkpt.copyNow(ctx, s.idx.asked)
	}
}

// next is the run that starts after now.
func (ix *indexer) next() *indexRound {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.round
}

// open reports whether close has not been called.
func (ix *indexer) open() bool {
	select {
	case <-ix.stop:
		return false
	default:
		return true
	}
}

// close stops the loop after its current run, and reports whether this
// was the first call.
func (ix *indexer) close() (first bool) {
	ix.closed.Do(func() { close(ix.stop); first = true })
	<-ix.done
	return first
}

// catchUpIndex indexes every message above the watermark, one transaction
// per indexMax messages.
func (s *Store) catchUpIndex(ctx context.Context) error {
	_, err := s.catchUpIndexWhile(ctx, func(bool) bool { return true })
	return err
}

// catchUpIndexWhile is catchUpIndex starting a transaction only while
// more holds, and reports whether work was left. more is told whether
// every message is indexed, so that only rows to purge are left.
func (s *Store) catchUpIndexWhile(ctx context.Context, more func(indexed bool) bool) (left bool, err error) {
	once := s.indexOnce
	if s.eng.postgres {
		once = s.indexOncePG
	}
	indexed := false
	for {
		if !more(indexed) {
			return true, nil
		}
		left, err := once(ctx)
		if err != nil {
			return false, err
		}
		if !left.messages && !left.rows {
			return false, nil
		}
		indexed = !left.messages
		if err := s.testFault(faultIndexBatchDone); err != nil {
			return true, err
		}
		// Back to back, the index transactions would keep the catalog's
		// log from ever starting over.
		s.makeWayForLog(ctx)
	}
}

// faultIndexBatchDone is the point between two index transactions of a
// catch-up.
const faultIndexBatchDone = "index_batch_done"

// indexBatchMax is the most messages one index transaction covers:
// indexMax (indexMaxSQLite on SQLite), unless a test made it smaller.
func (s *Store) indexBatchMax() int64 {
	if s.batchMax > 0 {
		return s.batchMax
	}
	if !s.eng.postgres {
		return indexMaxSQLite
	}
	return indexMax
}

// closeIndexBudget is how long Close goes on indexing the unindexed tail:
// it starts no index transaction after it (one started before runs to its
// end: at most indexMax messages, about 2 s on PostgreSQL at a million).
// At the end of a bulk read the tail can be a minute of the indexer's work
// on PostgreSQL (BENCHMARKS.md, issue 20), which Close used to do before it
// returned, holding up a shutdown (and Kubernetes' grace period) that long.
// What it leaves is safe where it is: the watermark says which messages
// wait, and the next Open's indexer indexes them at once (on PostgreSQL,
// any replica's indexer does when a read or an ingest asks for it); until
// then a search or a property filter waits for it, as during a bulk read.
const closeIndexBudget = 3 * time.Second

// closeIndexTail indexes the tail for Close, for up to s.closeIndexFor,
// and logs what it leaves to the next start.
func (s *Store) closeIndexTail(ctx context.Context) error {
	deadline := time.Now().Add(s.closeIndexFor)
	left, err := s.catchUpIndexWhile(ctx, func(bool) bool { return time.Now().Before(deadline) })
	if err != nil || !left {
		return err
	}
	if through, newest, err := s.indexProgress(ctx); err == nil && newest > through {
		s.log.Info("closing with messages not yet indexed for search and property filters: the next start indexes them",
			"unindexed", newest-through, "budget", s.closeIndexFor)
	}
	return nil
}

// indexOnce indexes up to indexMax messages above the watermark, on the
// indexer's own connection (the catalog read-only: index_file.go), and
// reports whether more are left. It never takes the catalog's write lock:
// the ingest's transactions go on meanwhile, on the other core.
//
// It writes them in two transactions of the index file. The first reads
// the catalog: it writes the search rows (and the search watermark) and
// reads the messages' properties into memory. The second writes their
// property rows and moves the watermark, on a connection that cannot read
// the catalog (openPropertyWriter): while it runs the catalog's log can be
// copied and start over (checkpoint.go) with neither the writer nor the
// indexer waiting for the other. In one transaction the indexer read the
// catalog all along, the writer copied the log only between two of them,
// and the indexer waited for that copy (issue 18, BENCHMARKS.md). A crash
// between the two leaves the search watermark ahead of the watermark: the
// next run writes the property rows of those messages and not their search
// rows again.
func (s *Store) indexOnce(ctx context.Context) (indexLeft, error) {
	t := startTimer()
	if s.idx != nil {
		s.idx.writing.Lock()
		defer s.idx.writing.Unlock()
	}
	t.step("lock")
	through, hi, newest, set, err := s.indexSearchOnce(ctx, &t)
	if err != nil {
		return indexLeft{}, err
	}
	if err := s.testFault(faultIndexSearchDone); err != nil {
		return indexLeft{messages: true}, err
	}
	tx, err := s.propdb.BeginTx(ctx, nil)
	if err != nil {
		return indexLeft{}, s.wrap("index new messages", err)
	}
	defer tx.Rollback()
	if set != nil {
		if err := indexPropertyRange(ctx, tx, set, through, hi); err != nil {
			return indexLeft{}, err
		}
	}
	purged, err := purgeUnindexedRows(ctx, tx, sqliteEngine)
	if err != nil {
		return indexLeft{}, err
	}
	if set == nil && purged == 0 {
		return indexLeft{}, nil
	}
	t.step("property_rows")
	if err := tx.Commit(); err != nil {
		return indexLeft{}, s.wrap("index new messages", err)
	}
	t.step("property_commit")
	if t.total() >= slowIndexRun {
		s.log.Debug("slow index run", append(t.attrs(), "messages", max(hi-through, 0), "purged", purged)...)
	}
	return indexLeft{messages: hi < newest, rows: purged == purgeBatch}, nil
}

// slowIndexRun is how long an index run takes before the store logs its
// steps (at debug level): a search or a property filter that arrives while
// a page is left to the indexer waits for its run (waitIndexed).
const slowIndexRun = 100 * time.Millisecond

// stepTimer times the steps of a piece of work, for a log line.
type stepTimer struct {
	start, last time.Time // last: when the last step ended
	steps       []any     // name, duration, ...
}

// startTimer starts timing a piece of work's steps.
func startTimer() stepTimer {
	now := time.Now()
	return stepTimer{start: now, last: now}
}

// step ends the step name.
func (t *stepTimer) step(name string) {
	now := time.Now()
	t.steps = append(t.steps, name, now.Sub(t.last).Round(time.Microsecond))
	t.last = now
}

// total is the time from the start to the end of the last step.
func (t *stepTimer) total() time.Duration { return t.last.Sub(t.start) }

// attrs is the total and the steps, as slog's key-value pairs.
func (t *stepTimer) attrs() []any {
	return append([]any{"took", t.total().Round(time.Microsecond)}, t.steps...)
}

// indexLeft is what an index transaction left to the next: messages to
// index, rows of keys decided not indexed to purge.
type indexLeft struct{ messages, rows bool }

// faultIndexSearchDone is the point between an index run's transaction
// of search rows and its transaction of property rows (indexOnce).
const faultIndexSearchDone = "index_search_done"

// indexSearchOnce is indexOnce's first transaction: the messages above
// the watermark through, up to hi (indexMax at most, newest the newest
// message), get their search rows, and their properties are read (set;
// nil when there is no message to index).
func (s *Store) indexSearchOnce(ctx context.Context, t *stepTimer) (through, hi, newest int64, set *propertyRowSet, err error) {
	defer s.restart.reading()()
	tx, err := s.idxdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, 0, nil, s.wrap("index new messages", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+watermarkSQLite+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("index new messages: %w", err)
	}
	t.step("begin")
	hi = min(newest, through+s.indexBatchMax())
	if newest <= through {
		return through, hi, newest, nil, nil
	}
	if set, err = indexSearchRange(ctx, tx, through, hi); err != nil {
		return 0, 0, 0, nil, err
	}
	t.step("search_rows")
	if err := tx.Commit(); err != nil {
		return 0, 0, 0, nil, s.wrap("index new messages", err)
	}
	t.step("search_commit")
	return through, hi, newest, set, nil
}

// indexRange writes the search and property rows of the messages with ids
// above through up to hi, and moves the watermark to hi, in the caller's
// transaction, which holds the index file's write lock (lockIndexFile, or
// the indexer's own): through is the watermark it read.
func indexRange(ctx context.Context, tx *sql.Tx, through, hi int64) error {
	set, err := indexSearchRange(ctx, tx, through, hi)
	if err != nil {
		return err
	}
	return indexPropertyRange(ctx, tx, set, through, hi)
}

// metaSearchThrough is the index file's search watermark: the messages up
// to it have their search rows. It is the watermark, or ahead of it when
// a crash came between an index run's two transactions (indexOnce).
const metaSearchThrough = "index.search_through"

// indexSearchRange writes the search rows of the messages with ids above
// through (the watermark) up to hi that have none yet (the search
// watermark), moves the search watermark to hi, and reads the messages'
// properties (readPropertyRows), in tx, which holds the index file's write
// lock.
func indexSearchRange(ctx context.Context, tx *sql.Tx, through, hi int64) (*propertyRowSet, error) {
	var searched int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT CAST(value AS BIGINT) FROM idx.index_meta WHERE key = ?), 0)`,
		metaSearchThrough).Scan(&searched); err != nil {
		return nil, fmt.Errorf("index for search: %w", err)
	}
	if from := max(through, searched); hi > from {
		// One statement: FTS5 writes a segment per statement (and whenever
		// its pending terms outgrow its hash), in rowid order.
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages_fts (rowid, body, reason, description, properties)
			SELECT m.id, `+bodyTextFunc+`(b.body), coalesce(m.dead_letter_reason, ''), coalesce(m.dead_letter_description, ''), m.properties
			FROM messages m JOIN bodies b ON b.message_id = m.id WHERE m.id > ? AND m.id <= ? ORDER BY m.id`, from, hi); err != nil {
			return nil, fmt.Errorf("index for search: %w", err)
		}
		if err := writeKeyBounds(ctx, tx, from, hi); err != nil {
			return nil, err
		}
		if err := setIndexMeta(ctx, tx, metaSearchThrough, hi); err != nil {
			return nil, fmt.Errorf("index for search: %w", err)
		}
	}
	set, err := readPropertyRows(ctx, tx, hi-through, `m.id BETWEEN ? AND ?`, through+1, hi)
	if err != nil {
		return nil, fmt.Errorf("index properties: %w", err)
	}
	return set, nil
}

// indexPropertyRange writes set, the property rows of the messages with
// ids above through up to hi (indexSearchRange), and moves the watermark
// to hi, in tx, which holds the index file's write lock. It reads nothing
// of the catalog.
func indexPropertyRange(ctx context.Context, tx *sql.Tx, set *propertyRowSet, through, hi int64) error {
	// The watermark the rows were read at: the indexer's two transactions
	// hold indexer.writing, so nobody else moves it between them.
	var now int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+watermarkSQLite+`, 0)`, metaIndexThrough).Scan(&now); err != nil {
		return fmt.Errorf("index properties: %w", err)
	}
	if now != through {
		return fmt.Errorf("index properties: the watermark moved from %d to %d while the search rows were written", through, now)
	}
	if err := indexPropertiesSQLite(ctx, tx, set); err != nil {
		return err
	}
	if err := setIndexMeta(ctx, tx, metaIndexThrough, hi); err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	return nil
}

// setIndexMeta sets key of the index file's index_meta to the id v.
func setIndexMeta(ctx context.Context, tx *sql.Tx, key string, v int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO idx.index_meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, fmt.Sprint(v))
	return err
}

// watermarkSQLite is the watermark as a subquery (one parameter:
// metaIndexThrough), in the index file (index_file.go); NULL before the
// first index run.
const watermarkSQLite = `(SELECT CAST(value AS BIGINT) FROM idx.index_meta WHERE key = ?)`

// indexedThroughSQL is the highest id an index has rows for at most, as a
// subquery for the engine, and its parameters: every new message gets an
// id above it, and retention deletes no message at or below it that still
// has index rows to be deleted first (PruneGone). On SQLite that is the
// higher of the watermark and the search watermark, which is ahead of it
// after a crash between an index run's two transactions (indexOnce); on
// PostgreSQL the watermark.
func (e engine) indexedThroughSQL() (string, []any) {
	if e.postgres {
		return e.watermarkSQL(), []any{metaIndexThrough}
	}
	return `(SELECT max(CAST(value AS BIGINT)) FROM idx.index_meta WHERE key IN (?, ?))`, []any{metaIndexThrough, metaSearchThrough}
}

// watermarkSQL is the watermark as a subquery for the engine: on
// PostgreSQL it is in meta, beside the index rows.
func (e engine) watermarkSQL() string {
	if e.postgres {
		return `(SELECT CAST(value AS BIGINT) FROM meta WHERE key = ?)`
	}
	return watermarkSQLite
}

// lockIndexFile takes the index file's write lock in tx, a transaction of
// the writer that has not read the index file yet (its snapshot of that
// file starts here, so a read-then-write of it never fails to upgrade). It
// waits for the indexer's transaction, if one runs, up to busy_timeout.
func lockIndexFile(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE idx.index_meta SET key = key WHERE 0`); err != nil {
		return fmt.Errorf("lock the search index file: %w", err)
	}
	return nil
}

// setIndexThrough moves PostgreSQL's watermark to hi in tx, which wrote the
// index rows of every message up to hi.
func setIndexThrough(ctx context.Context, tx *sql.Tx, hi int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaIndexThrough, fmt.Sprint(hi)); err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	return nil
}

// indexTail indexes every message above the watermark in the caller's
// transaction on the writer (a replay job freezing a filter's selection),
// which must not have read the index file yet: it takes that file's write
// lock, so the transaction writes both files (each atomically: a crash
// between the two commits leaves either the index rows to the indexer,
// which the watermark says are missing, or index rows and a watermark
// without the job).
func indexTail(ctx context.Context, tx *sql.Tx) error {
	if err := lockIndexFile(ctx, tx); err != nil {
		return err
	}
	var through, newest int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+watermarkSQLite+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest); err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	if newest <= through {
		return nil
	}
	return indexRange(ctx, tx, through, newest)
}

// indexTailIn makes the indexes cover every message of the catalog for tx,
// a write transaction that holds the write lock and has not read the index
// yet (CreateJob freezing a filter's selection): it indexes the tail in
// tx (indexTail, indexTailPG), whether the indexer runs or not.
func (s *Store) indexTailIn(ctx context.Context, tx *sql.Tx) error {
	if s.eng.postgres {
		return indexTailPG(ctx, s.eng, tx)
	}
	return indexTail(ctx, tx)
}

// readersActiveFor is how long after a read through the indexes the
// ingest indexes its own pages (indexInline).
const readersActiveFor = 10 * time.Second

// holdIndexRuns keeps index runs from starting a transaction until the
// returned func runs, for a write transaction of the writer that will take
// the index file's lock (lockIndexFile) while it holds the catalog's: it
// then finds the file free at once instead of waiting in SQLite's busy
// handler for runs back to back. Call it before beginWrite.
func (s *Store) holdIndexRuns() (release func()) {
	if s.idx == nil {
		return func() {}
	}
	s.idx.writing.Lock()
	return s.idx.writing.Unlock
}

// faultInlineDecided is the point where an ingest transaction has decided
// to index its page inline (wantInline) and has not taken the index file's
// lock yet.
const faultInlineDecided = "inline_decided"

// wantInline reports whether an ingest transaction should index its own
// messages (indexInline): someone read through the indexes within
// readersActiveFor, and no index run is writing the index file (its
// transaction can be long after a bulk read, and the page is then left to
// it). The transaction then takes the index file's lock (lockIndexFile)
// before it reads that file.
func (s *Store) wantInline() bool {
	return s.idx != nil && !s.idx.paused.Load() && !s.idx.running.Load() &&
		time.Since(time.Unix(0, s.idx.lastRead.Load())) <= readersActiveFor
}

// indexInline, in an ingest transaction that has just inserted the ids
// first through last and holds the index file's lock (wantInline), indexes
// them in the same transaction when nothing older waits: reads through the
// indexes then find the watermark current instead of waiting for an index
// run (issue 18: 32 clients while ingesting 1,000 msg/s). A bulk read
// nobody searches meanwhile is indexed behind, by the indexer, in batches
// and in parallel.
//
// On PostgreSQL the same, in the ingest transaction (on its connection ic,
// which holds the indexer's lock: lockIndexInline), with the indexer's
// COPYs (indexRangePG).
func (s *Store) indexInline(ctx context.Context, tx *sql.Tx, ic *ingestConn, first, last int64) (bool, error) {
	var through int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+s.eng.watermarkSQL()+`, 0)`,
		metaIndexThrough).Scan(&through); err != nil {
		return false, fmt.Errorf("index new messages: %w", err)
	}
	if through != first-1 {
		return false, nil // older messages wait: the indexer takes them all
	}
	if s.eng.postgres {
		if err := indexRangePG(ctx, tx, ic, through, last); err != nil {
			return false, err
		}
		return true, setIndexThrough(ctx, tx, last)
	}
	return true, indexRange(ctx, tx, through, last)
}

// lockIndexInline takes, in an ingest transaction that wants to index its
// own page (wantInline), the lock index batches hold, and reports whether
// it did: on SQLite the index file's (waiting for a batch, up to
// busy_timeout), on PostgreSQL the advisory lock if no batch holds it (a
// batch of another replica: the page is then left to the indexers).
func (s *Store) lockIndexInline(ctx context.Context, tx *sql.Tx) (bool, error) {
	if !s.eng.postgres {
		return true, lockIndexFile(ctx, tx)
	}
	// Both index locks, each if free (a batch's property rows hold the
	// second: postgres_index.go), or neither: a transaction-level lock
	// cannot be let go before the transaction ends, except by rolling back
	// to a savepoint taken before it, and a page that kept the first would
	// hold index batches up until it commits.
	if _, err := tx.ExecContext(ctx, `SAVEPOINT inline_index_locks`); err != nil {
		return false, fmt.Errorf("lock the search index: %w", err)
	}
	var first, second bool
	if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(?)`, indexLockKey).Scan(&first); err != nil {
		return false, fmt.Errorf("lock the search index: %w", err)
	}
	if first {
		if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(?)`, indexPropsLockKey).Scan(&second); err != nil {
			return false, fmt.Errorf("lock the search index: %w", err)
		}
	}
	release := `RELEASE SAVEPOINT inline_index_locks`
	if first && !second {
		release = `ROLLBACK TO SAVEPOINT inline_index_locks`
	}
	if _, err := tx.ExecContext(ctx, release); err != nil {
		return false, fmt.Errorf("lock the search index: %w", err)
	}
	return first && second, nil
}

// indexProgress is the watermark and the newest message's id.
func (s *Store) indexProgress(ctx context.Context) (through, newest int64, err error) {
	err = s.reader.QueryRowContext(ctx, `SELECT coalesce(`+s.eng.watermarkSQL()+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest)
	if err != nil {
		return 0, 0, fmt.Errorf("read the search index's progress: %w", err)
	}
	return through, newest, nil
}

// indexBehind reports whether messages wait to be indexed.
func (s *Store) indexBehind(ctx context.Context) (bool, error) {
	through, newest, err := s.indexProgress(ctx)
	return through < newest, err
}

// waitIndexed returns once the indexes cover every message up to id upTo,
// or, with upTo < 0, every message the catalog holds now, asking the
// indexer to run if they do not. A read that answers through the indexes
// calls it first, so that it finds the messages just ingested too.
func (s *Store) waitIndexed(ctx context.Context, upTo int64) error {
	if s.noIndexFile {
		return s.errIndexFileMissing()
	}
	start := time.Now()
	if s.idx != nil {
		s.idx.lastRead.Store(start.UnixNano())
	}
	for {
		through, newest, err := s.indexProgress(ctx)
		if err != nil {
			return err
		}
		if upTo < 0 {
			upTo = newest
		}
		if through >= min(upTo, newest) {
			return nil
		}
		if s.idx == nil {
			// A read-only store (OpenReadOnly) cannot index: the process
			// that writes the file does, within indexLag.
			if err := s.waitForWriter(ctx, start); err != nil {
				return err
			}
			continue
		}
		if err := s.idx.awaitRun(ctx); err != nil {
			return err
		}
		if waited := time.Since(start); waited >= slowIndexRun {
			s.log.Debug("a read waited for the indexes", "waited", waited.Round(time.Microsecond), "behind", min(upTo, newest)-through)
		}
	}
}

// errIndexFileMissing is why a read-only store opened without its index
// file cannot answer a search or a property filter, or be copied.
func (s *Store) errIndexFileMissing() error {
	return fmt.Errorf("the search index file %s of %s is missing (a copy of the catalog file alone): searches, property "+
		"filters and store copy need it; run dlqdash serve on the database once, which writes it, then try again", IndexPath(s.path), s.path)
}

// readOnlyIndexWait is how long a read-only store waits for the process
// that writes the file to index the newest messages.
const readOnlyIndexWait = 5 * indexLag

// waitForWriter pauses a read-only store's read while another process
// indexes, and gives up readOnlyIndexWait after start.
func (s *Store) waitForWriter(ctx context.Context, start time.Time) error {
	if time.Since(start) > readOnlyIndexWait {
		return fmt.Errorf("the newest messages of %s are still not indexed for search and property filters after %s, and this "+
			"read-only open cannot index them: the dlqdash serve that writes the file indexes them (start it if it is not running), "+
			"then try again", s.path, readOnlyIndexWait)
	}
	select {
	case <-time.After(50 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// usesIndexes reports whether a read of f answers through the indexes the
// indexer writes (a property filter, a search), and must wait for them.
func usesIndexes(f dlq.Filter) bool {
	return len(f.Properties) > 0 || strings.TrimSpace(f.Query) != ""
}

// FlushIndex indexes every message ingested so far and returns when the
// search index and the property rows cover them all (as a read through them
// would wait for).
func (s *Store) FlushIndex(ctx context.Context) error { return s.waitIndexed(ctx, -1) }

// bodyTextFunc is the SQL function the indexer reads a body's searchable
// text with: bodyText, or "" for a binary body.
const bodyTextFunc = "dlqdash_body_text"

var registerOnce struct {
	sync.Once
	err error
}

// registerFunctions registers the package's SQL functions with the driver
// (process-wide: the driver keeps one list for every connection it opens).
func registerFunctions() error {
	registerOnce.Do(func() {
		registerOnce.err = sqlite.RegisterDeterministicScalarFunction(bodyTextFunc, 1,
			func(_ *sqlite.FunctionContext, args []sqldriver.Value) (sqldriver.Value, error) {
				var b []byte
				switch v := args[0].(type) {
				case []byte:
					b = v
				case string:
					b = []byte(v)
				default:
					return "", nil
				}
				// The text as the bytes it is (a copy the driver made):
				// FTS5 reads a blob as text, and a body's text is not
				// copied into a string on the way.
				text, isText := textPart(b)
				if !isText || len(text) == 0 {
					return "", nil
				}
				return text, nil
			})
	})
	return registerOnce.err
}
