package store

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// Internals for the external tests (package store_test, which can import
// storetest without an import cycle).

// ReaderForTest is the read pool.
func (s *Store) ReaderForTest() *sql.DB { return s.reader }

// ForceSearchForTest makes lists use one search strategy ("fetch",
// "collect", "probe", "check"; "" for the cheapest) where it applies, until
// the returned func runs.
func ForceSearchForTest(how string) (restore func()) {
	old := forceSearch
	forceSearch = how
	return func() { forceSearch = old }
}

// ListPlanForTest returns the index clause and the terms a list of f would
// use ("" and nil when it knows nothing can match).
func ListPlanForTest(ctx context.Context, s *Store, f dlq.Filter) (string, []string, error) {
	p, err := s.planList(ctx, f, DefaultListLimit)
	where, _ := p.bounded(nil)
	return p.index, where, err
}

// ListQueryForTest returns the first-page query of f and its arguments
// ("" when it knows nothing can match), for EXPLAIN QUERY PLAN.
func ListQueryForTest(ctx context.Context, s *Store, f dlq.Filter) (string, []any, error) {
	p, err := s.planList(ctx, f, DefaultListLimit)
	if err != nil || p.empty {
		return "", nil, err
	}
	where, args := p.bounded(nil)
	key, id := p.keys()
	return "SELECT m.id FROM " + p.from() + " " + recordJoins + whereClause(where) +
		" ORDER BY " + key + " DESC, " + id + " DESC LIMIT 51", args, nil
}

// EncodeCursorForTest makes the cursor that continues after (at, id).
func EncodeCursorForTest(at, id int64) string { return encodeCursor(pageKey{at, id}) }

// SeriesQueryForTest is the count of one bucket of DeadLetterSeries.
func SeriesQueryForTest(groupID int64, ents []int64) string {
	return seriesQuery(sqliteEngine, groupID, ents)
}

// PauseIndexerForTest stops the indexer from running (a read through the
// indexes then waits) until the returned func runs. A read-only store has
// no indexer: nothing to pause.
func PauseIndexerForTest(s *Store) (resume func()) {
	if s.idx == nil {
		return func() {}
	}
	s.idx.paused.Store(true)
	return func() { s.idx.paused.Store(false); s.idx.poke() }
}

// CrashForTest closes s without indexing what the indexer has not, as a
// crash would leave the file.
func CrashForTest(s *Store) error {
	s.closeUnindexed = true
	return s.Close()
}

// IndexProgressForTest is the indexer's watermark and the newest message id.
func IndexProgressForTest(ctx context.Context, s *Store) (through, newest int64, err error) {
	return s.indexProgress(ctx)
}

// AwaitIndexerForTest waits, up to within, for the indexer of s to index
// every message without being asked (no read waits), and fails t if it
// does not.
func AwaitIndexerForTest(t testing.TB, s *Store, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		through, newest, err := s.indexProgress(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if through == newest {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the indexer left messages unindexed for %s: watermark %d, newest %d", within, through, newest)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ExecForTest runs one writing statement on the writer (placeholders ?),
// for tests that make a state no API makes (another replica's claim).
func ExecForTest(ctx context.Context, s *Store, q string, args ...any) error {
	_, err := s.writer.ExecContext(ctx, q, args...)
	return err
}

// failAt makes s fail with err at the fault point named point, every time
// it is reached, until the returned func runs.
func failAt(s *Store, point string, err error) (restore func()) {
	s.fault = func(at string) error {
		if at == point {
			return err
		}
		return nil
	}
	return func() { s.fault = nil }
}

// FaultBeforeStatusEntryForTest makes every SetStatusAudited of s fail
// with err between the status change and its audit entry (a crash there
// rolls the transaction back as this does), until the returned func runs.
func FaultBeforeStatusEntryForTest(s *Store, err error) (restore func()) {
	return failAt(s, faultBeforeStatusEntry, err)
}

// FaultBeforeCreationEntryForTest makes every CreateJobAudited of s fail
// with err after the job and its items are inserted and before its
// creation entry (a crash there rolls the transaction back as this does),
// until the returned func runs.
func FaultBeforeCreationEntryForTest(s *Store, err error) (restore func()) {
	return failAt(s, faultBeforeCreationEntry, err)
}

// IndexBetweenPruneStepsForTest makes every PruneGone of s run an index
// catch-up (as the indexer may, on its own connection) after the search
// and property rows are pruned and before the messages are, until the
// returned func runs.
func IndexBetweenPruneStepsForTest(s *Store) (restore func()) {
	s.fault = func(point string) error {
		if point == faultBetweenPruneSteps {
			return s.catchUpIndex(context.Background())
		}
		return nil
	}
	return func() { s.fault = nil }
}

// IndexRunDuringInlineForTest sets up the race between an ingest page that
// decides to index itself (someone read through the indexes just now, no
// index run is going) and an index run that starts right after that
// decision: the indexer of s, paused, runs again without running at once,
// and every ApplyPage of s that decides to index inline starts an index
// run there and goes on once the run writes the index file, until the
// returned func runs.
func IndexRunDuringInlineForTest(s *Store) (restore func()) {
	ix := s.idx
	// A kick the last page sent may be in flight to the paused loop: let
	// it arrive and be passed over first.
	time.Sleep(50 * time.Millisecond)
	select {
	case <-ix.kick:
	default:
	}
	ix.unindexed.Store(0)
	ix.lastRead.Store(time.Now().UnixNano())
	ix.paused.Store(false)
	s.fault = func(point string) error {
		if point != faultInlineDecided {
			return nil
		}
		ix.poke()
		for !ix.running.Load() {
			time.Sleep(time.Millisecond)
		}
		// The run's first transaction takes the index file's lock at its
		// start and holds it for most of a second (16,384 messages).
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	return func() { s.fault = nil }
}

// CatchUpIndexForTest runs index batches until the watermark covers every
// message, as the indexer's run does.
func CatchUpIndexForTest(ctx context.Context, s *Store) error { return s.catchUpIndex(ctx) }

// IndexLockKeyForTest is the advisory lock an index batch holds on
// PostgreSQL.
const IndexLockKeyForTest = indexLockKey

// SetCloseIndexBudgetForTest sets how long Close goes on indexing the
// unindexed tail.
func SetCloseIndexBudgetForTest(s *Store, d time.Duration) { s.closeIndexFor = d }

// FailAfterPropertiesCommittedForTest makes every index batch of s on
// PostgreSQL fail with err once its property rows are committed and before
// its search documents and watermark are, as when its replica dies between
// the two commits, until the returned func runs.
func FailAfterPropertiesCommittedForTest(s *Store, err error) (restore func()) {
	return failAt(s, faultPropertiesCommitted, err)
}

// IndexPropsLockKeyForTest is the advisory lock of an index batch's
// property rows on PostgreSQL.
const IndexPropsLockKeyForTest = indexPropsLockKey

// FailAfterSearchRowsForTest makes s's index runs fail, as a crash would
// stop them, after their transaction of search rows has committed and
// before their transaction of property rows (indexOnce), until the
// returned func runs.
func FailAfterSearchRowsForTest(s *Store, err error) (restore func()) {
	return failAt(s, faultIndexSearchDone, err)
}

// SetIndexBatchMaxForTest makes s's index transactions cover at most n
// messages each.
func SetIndexBatchMaxForTest(s *Store, n int64) { s.batchMax = n }

// HoldAfterIndexBatchForTest makes the first catch-up transaction of s
// signal started when it has committed and wait for release before the
// catch-up goes on.
func HoldAfterIndexBatchForTest(s *Store) (started <-chan struct{}, release func()) {
	st, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.fault = func(point string) error {
		if point == faultIndexBatchDone {
			once.Do(func() { close(st); <-rel })
		}
		return nil
	}
	return st, func() { close(rel) }
}

// BeginWriteForTest begins a write transaction of s holding its write lock
// (on the writer pool, as every write does).
func BeginWriteForTest(ctx context.Context, s *Store) (*sql.Tx, error) { return s.beginWrite(ctx) }

// LockIndexForTest takes both index locks in tx on PostgreSQL, as
// retention and CreateJob's tail do after the write lock.
func LockIndexForTest(ctx context.Context, tx *sql.Tx) error { return lockIndexPG(ctx, tx) }

// WriterPoolSizeForTest is the PostgreSQL writer pool's size.
const WriterPoolSizeForTest = pgWritePoolSize

// LogRestartForTest is what the catalog's log restart (checkpoint.go) did
// since the store opened: how often the log started over, the time the
// writer spent copying it and the indexer waiting for that, and how often
// the checkpointer synced the log meanwhile.
func LogRestartForTest(s *Store) (restarts int64, copying, holding time.Duration, syncs int64) {
	r := s.restart
	if r == nil { // PostgreSQL, or read-only
		return 0, 0, 0, 0
	}
	return r.restarts.Load(), time.Duration(r.copying.Load()), time.Duration(r.holding.Load()), r.logSyncs.Load()
}

// SetNewestMinForTest sets the fewest newest hits a search page is looked
// for in (read_newest.go), until the returned func restores it.
func SetNewestMinForTest(n int) func() {
	old := newestMin
	newestMin = n
	return func() { newestMin = old }
}

// NewestCountsForTest is how many search pages were found among their
// newest hits, and how many were looked for there and not found.
func NewestCountsForTest(s *Store) (found, missed int64) {
	return s.newestFound.Load(), s.newestMissed.Load()
}
