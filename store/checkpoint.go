package store

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The write-ahead log is copied into the database (checkpointed) by a
// connection of its own, from its own goroutine, so that the copy runs on
// another core than the writer's transactions (issue 18: checkpoints were
// 5-7 % of the ingest's CPU, all of it on the writer). A PASSIVE checkpoint
// never waits for the writer nor for readers: it copies what no reader still
// needs. A log starts over only when a write begins with all of it copied,
// which the background checkpoint cannot arrange while the writer commits
// back to back: when the log is long, the writer copies the rest itself
// while no index transaction reads the catalog (logRestart, below). Its
// automatic checkpoint is only a backstop (writerCheckpointPages).
//
// The index file (index_file.go) has a checkpointer of its own beside the
// indexer, for the same reason: each index transaction writes thousands of
// pages, and its commit copied them back and waited for two fsyncs (35 ms
// each on the benchmark machine) before the indexer could go on. The
// indexer's commits no longer copy at all: the indexer asks this
// checkpointer to copy before each of its transactions that no read waits
// for (copyNow, makeWayForLog).

// checkpointEvery is how often the background checkpoint runs. One that
// finds the log all copied costs a few microseconds. A variable for tests,
// read when a store opens.
var checkpointEvery = 250 * time.Millisecond

// checkpointer runs PASSIVE checkpoints on its own connection.
type checkpointer struct {
	db   *sql.DB
	stop chan struct{}
	done chan struct{}
	once sync.Once
	// restart, when set (the catalog's checkpointer), is told how long the
	// log is after each checkpoint, and the log is synced while it is long
	// (syncLog).
	restart *logRestart
	// walPath is the log's file; wal is it, open once syncLog needs it.
	walPath string
	wal     *os.File
	// now receives a request for a checkpoint at once (copyNow), closed
	// when it ends.
	now chan chan struct{}
}

// newCheckpointer starts checkpointing the database file at path: the
// catalog, or the index file (index_file.go), whose WAL the indexer's
// transactions write. restart, if not nil, is told how long the log is
// after each checkpoint.
func newCheckpointer(path string, busy time.Duration, restart *logRestart) (*checkpointer, error) {
	every := checkpointEvery
	db, err := sql.Open("sqlite", dsn(path, busy, false))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	c := &checkpointer{db: db, stop: make(chan struct{}), done: make(chan struct{}), restart: restart, walPath: path + "-wal",
		now: make(chan chan struct{})}
	go c.loop(every)
	return c, nil
}

func (c *checkpointer) loop(every time.Duration) {
	defer close(c.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var asker chan struct{}
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.restart.copyNowChan():
		case asker = <-c.now:
		}
		// Asked for by handOver before this checkpoint began: the writer
		// copies the rest once it ends.
		asked := c.restart.handedOver()
		// A failure (busy, say) is left to the next tick.
		var busy, frames, copied int64
		if err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).
			Scan(&busy, &frames, &copied); err == nil {
			c.restart.checked(frames, copied)
		}
		c.syncLog()
		if asked {
			c.restart.handBack()
		}
		if asker != nil {
			close(asker)
		}
	}
}

// copyNow runs a checkpoint at once and waits for it to end, unless cut
// receives or ctx ends first (the checkpoint then goes on without the
// caller). The indexer asks the index file's checkpointer before each of
// its transactions (makeWayForLog).
func (c *checkpointer) copyNow(ctx context.Context, cut <-chan struct{}) {
	if c == nil {
		return
	}
	done := make(chan struct{})
	select {
	case c.now <- done:
	case <-cut:
		return
	case <-ctx.Done():
		return
	case <-c.done:
		return // closed
	}
	select {
	case <-done:
	case <-cut:
	case <-ctx.Done():
	}
}

// syncLog flushes the catalog's log to disk while it is long (logRestart).
// The writer's copy that lets the log start over (beforeWrite) syncs the
// log before it copies: everything the writer appended since the indexer's
// transaction began, which no checkpoint could copy meanwhile and so none
// synced. Synced here, from the checkpointer's goroutine and every tick,
// that is a fraction of a second's appends when the writer's copy comes,
// and the writer, with the ingest and the indexer waiting behind it, waits
// less (BENCHMARKS.md, issue 18). A sync more only ever makes the log more
// durable; a failure is left to the checkpoint's own sync.
func (c *checkpointer) syncLog() {
	if c.restart == nil || !c.restart.long.Load() {
		return
	}
	if c.wal == nil {
		f, err := os.Open(c.walPath)
		if err != nil {
			return // no log yet: nothing to sync
		}
		c.wal = f
	}
	if c.wal.Sync() == nil {
		c.restart.logSyncs.Add(1)
	}
}

func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
	if c.wal != nil {
		c.wal.Close()
	}
	return c.db.Close()
}

// During a bulk read the catalog's log would never start over. The indexer
// reads the catalog in transactions of a fraction of a second each, nearly
// back to back, and a checkpoint copies no frame such a reader may still
// need, so part of the log is held back whenever they read.
//
// logRestart lets it start over while the indexer writes property rows,
// which reads nothing of the catalog (indexOnce). When the catalog's
// checkpointer finds the log longer than restartFrames, the end of the
// index transaction that read the catalog hands the log over: the
// checkpointer copies what that transaction held back at once
// (handOverLog). Then the writer, about to begin a transaction at a moment
// no index transaction reads, copies the rest itself (beforeWrite), what
// it appended meanwhile: the transaction then starts the log over. If the
// log is still long when the indexer is about to read the catalog again,
// it waits (hold, restartHold at most) for that copy, unless the writer has
// stopped writing or a read waits for the indexes. Its next transaction,
// begun after the copy, reads the database file alone and holds nothing
// back.
type logRestart struct {
	frames  int64        // restartFrames when the store opened
	long    atomic.Bool  // the log is long and not all copied
	readers atomic.Int32 // index transactions reading the catalog
	// lastWrite is when the writer last began a transaction (Unix ns).
	lastWrite atomic.Int64
	// copyNow asks the catalog's checkpointer for a checkpoint at once, and
	// handOver is set until it has run (handOverLog).
	copyNow  chan struct{}
	handOver atomic.Bool
	// restarts counts the copies that let the log start over; copying and
	// holding sum the time the writer spent copying (beforeWrite) and the
	// indexer waiting (hold), in ns; logSyncs counts syncLog's syncs.
	restarts, copying, holding, logSyncs atomic.Int64

	mu sync.Mutex
	// waiting is closed when the log is all copied, for the index
	// transactions that hold.
	waiting chan struct{}
}

// restartFrames is the length (pages) of the catalog's log past which the
// writer starts it over: 64 MiB. A variable for tests.
var restartFrames int64 = 16384

// restartHold is the longest the indexer waits for the log to be copied:
// a few of the writer's transactions.
const restartHold = 200 * time.Millisecond

// restartIdle is how long after its last transaction began the writer
// counts as not writing: the indexer does not wait for it then.
const restartIdle = 100 * time.Millisecond

// checked records what a checkpoint of the catalog found: its log's frames
// and those copied.
func (r *logRestart) checked(frames, copied int64) {
	if r != nil && frames >= r.frames && copied < frames {
		r.long.Store(true)
	}
}

// hold waits, when the log is long and the writer writes, until the writer
// has copied all of it, for restartHold, or until cut receives. The indexer
// calls it before each of its transactions, unless a read waits for the
// indexes; cut receives when one starts to (makeWayForLog).
func (r *logRestart) hold(ctx context.Context, cut <-chan struct{}) {
	if r == nil {
		return
	}
	if r.long.Load() && time.Now().UnixNano()-r.lastWrite.Load() < int64(restartIdle) {
		r.mu.Lock()
		if r.waiting == nil {
			r.waiting = make(chan struct{})
		}
		wait := r.waiting
		r.mu.Unlock()
		start := time.Now()
		t := time.NewTimer(restartHold)
		select {
		case <-wait:
		case <-t.C:
		case <-cut:
		case <-ctx.Done():
		}
		t.Stop()
		r.holding.Add(int64(time.Since(start)))
	}
}

// newLogRestart is the log restart of a catalog whose log starts over past
// frames pages.
func newLogRestart(frames int64) *logRestart {
	return &logRestart{frames: frames, copyNow: make(chan struct{}, 1)}
}

// reading marks an index transaction as reading the catalog until the
// returned func runs. When the last such transaction ends with the log
// long, the log is handed over (handOver).
func (r *logRestart) reading() (done func()) {
	if r == nil {
		return func() {}
	}
	r.readers.Add(1)
	return func() {
		if r.readers.Add(-1) == 0 && r.long.Load() {
			r.handOverLog()
		}
	}
}

// handOverLog asks the catalog's checkpointer to copy the log at once:
// the appends an index transaction held back are copyable now. Until that
// checkpoint ends the writer does not copy (beforeWrite); then it copies
// what it appended meanwhile, and waits for that alone. When the writer
// copied all of it, its two fsyncs with both halves of the ingest
// waiting took 40-120 ms a restart (issue 18, BENCHMARKS.md).
func (r *logRestart) handOverLog() {
	r.handOver.Store(true)
	select {
	case r.copyNow <- struct{}{}:
	default:
	}
}

// copyNowChan is where the checkpointer is asked for a checkpoint at once
// (nil, which never receives, without a restart).
func (r *logRestart) copyNowChan() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.copyNow
}

// handedOver reports whether the log is handed over to the checkpointer.
func (r *logRestart) handedOver() bool { return r != nil && r.handOver.Load() }

// handBack gives the log back to the writer after the checkpointer's copy.
func (r *logRestart) handBack() { r.handOver.Store(false) }

// beforeWrite runs before the writer begins a transaction: when the log is
// long and no index transaction reads, it copies the rest of the log with
// checkpoint, which reports whether all of it is copied. Then the
// transaction starts the log over.
func (r *logRestart) beforeWrite(checkpoint func() (all bool)) {
	if r == nil {
		return
	}
	r.lastWrite.Store(time.Now().UnixNano())
	if !r.long.Load() || r.readers.Load() > 0 || r.handOver.Load() {
		return
	}
	start := time.Now()
	all := checkpoint()
	r.copying.Add(int64(time.Since(start)))
	if !all {
		return // a reader held some back: the next write tries again
	}
	r.restarts.Add(1)
	r.long.Store(false)
	r.mu.Lock()
	if r.waiting != nil {
		close(r.waiting)
		r.waiting = nil
	}
	r.mu.Unlock()
}

// checkpointCatalog copies what it can of the catalog's log on the writer's
// connection (the catalog alone, not the index file it has attached), and
// reports whether all of the log is copied. ctx is the coming write's: it
// bounds the wait for the writer's connection.
func (s *Store) checkpointCatalog(ctx context.Context) (all bool) {
	var busy, frames, copied int64
	err := s.writer.QueryRowContext(ctx, `PRAGMA main.wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	return err == nil && busy == 0 && frames >= 0 && copied == frames
}
