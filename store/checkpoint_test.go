package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLogRestartTurns checks logRestart's hand-over between the indexer
// and the writer without a database: who waits for whom, and when the
// writer copies the log.
func TestLogRestartTurns(t *testing.T) {
	long := func() *logRestart {
		r := newLogRestart(100)
		r.checked(50, 10) // short: nothing to do
		if r.long.Load() {
			t.Fatal("a log of 50 frames counts as long (restart at 100)")
		}
		r.checked(150, 150) // long but all copied: it starts over by itself
		if r.long.Load() {
			t.Fatal("a log all copied counts as long")
		}
		r.checked(150, 40)
		if !r.long.Load() {
			t.Fatal("a log of 150 frames, 40 copied, does not count as long")
		}
		return r
	}

	t.Run("an idle writer is not waited for", func(t *testing.T) {
		r := long()
		start := time.Now()
		r.hold(t.Context(), nil)
		if waited := time.Since(start); waited >= restartHold/2 {
			t.Errorf("hold waited %s for a writer that has not written", waited)
		}
	})

	t.Run("no copy while an index transaction reads", func(t *testing.T) {
		r := long()
		done := r.reading()
		copies := 0
		r.beforeWrite(func() bool { copies++; return true })
		if copies != 0 {
			t.Fatal("the writer copied the log while an index transaction read the catalog")
		}
		done()
		// The transaction's end hands the log to the checkpointer, and the
		// writer copies only after that checkpoint.
		select {
		case <-r.copyNowChan():
		default:
			t.Fatal("the end of the index transaction did not ask the checkpointer to copy")
		}
		if !r.handedOver() {
			t.Fatal("the log is not handed over after the index transaction")
		}
		r.beforeWrite(func() bool { copies++; return true })
		if copies != 0 {
			t.Fatal("the writer copied the log while the checkpointer had it")
		}
		r.handBack()
		r.beforeWrite(func() bool { copies++; time.Sleep(2 * time.Millisecond); return true })
		if copies != 1 || r.long.Load() || r.restarts.Load() != 1 {
			t.Fatalf("after the index transaction: %d copies, long %v, %d restarts; want 1, false, 1", copies, r.long.Load(), r.restarts.Load())
		}
		if copying := time.Duration(r.copying.Load()); copying < 2*time.Millisecond {
			t.Errorf("the writer's copy took 2 ms, but %s is counted", copying)
		}
	})

	t.Run("the indexer waits for the copy of a writing writer", func(t *testing.T) {
		r := long()
		r.beforeWrite(func() bool { return false }) // a reader held frames back: still long
		if !r.long.Load() {
			t.Fatal("an incomplete copy cleared the log's length")
		}
		// However late the goroutine below runs, the writer counts as
		// writing.
		r.lastWrite.Store(time.Now().Add(time.Hour).UnixNano())
		copied := make(chan struct{})
		held := make(chan time.Duration)
		go func() {
			start := time.Now()
			r.hold(t.Context(), nil)
			held <- time.Since(start)
		}()
		// The writer's next transaction, while the indexer holds.
		for r.waitingNow() == nil {
			time.Sleep(time.Millisecond)
		}
		r.beforeWrite(func() bool { close(copied); return true })
		waited := <-held
		select {
		case <-copied:
		default:
			t.Fatal("the indexer went on before the copy")
		}
		if waited >= restartHold {
			t.Errorf("the indexer waited %s, its whole restartHold: the copy did not release it", waited)
		}
	})

	t.Run("a read that waits for the indexes cuts the wait", func(t *testing.T) {
		r := long()
		r.lastWrite.Store(time.Now().Add(time.Hour).UnixNano())
		cut := make(chan struct{}, 1)
		cut <- struct{}{}
		start := time.Now()
		r.hold(t.Context(), cut)
		if waited := time.Since(start); waited >= restartHold {
			t.Errorf("hold waited %s with a read waiting", waited)
		}
	})

	t.Run("the indexer waits restartHold at most", func(t *testing.T) {
		r := long()
		r.lastWrite.Store(time.Now().Add(time.Hour).UnixNano())
		start := time.Now()
		r.hold(t.Context(), nil)
		if waited := time.Since(start); waited < restartHold || waited > 10*restartHold {
			t.Errorf("hold waited %s for a copy that never came; want restartHold (%s)", waited, restartHold)
		}
		if holding := time.Duration(r.holding.Load()); holding < restartHold {
			t.Errorf("the indexer waited restartHold (%s), but %s is counted", restartHold, holding)
		}
	})
}

// TestCheckpointerSyncsLongLog checks that the catalog's checkpointer
// flushes the log to disk while it is long, and only then: the writer's
// copy that starts the log over then has little left to sync.
func TestCheckpointerSyncsLongLog(t *testing.T) {
	wal := filepath.Join(t.TempDir(), "catalog.db-wal")
	r := &logRestart{frames: 100}
	c := &checkpointer{restart: r, walPath: wal}
	t.Cleanup(func() {
		if c.wal != nil {
			c.wal.Close()
		}
	})

	c.syncLog() // short log, no file
	r.checked(150, 40)
	c.syncLog() // long log, still no file
	if n := r.logSyncs.Load(); n != 0 || c.wal != nil {
		t.Fatalf("%d syncs, file open %v, before the log exists", n, c.wal != nil)
	}
	if err := os.WriteFile(wal, []byte("frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.syncLog()
	c.syncLog()
	if n := r.logSyncs.Load(); n != 2 {
		t.Fatalf("a long log was synced %d times in two ticks; want 2", n)
	}
	opened := c.wal
	r.beforeWrite(func() bool { return true }) // the writer starts the log over
	c.syncLog()
	if n := r.logSyncs.Load(); n != 2 {
		t.Errorf("the log was synced after it started over (%d syncs; want still 2)", n)
	}
	if c.wal != opened {
		t.Error("the log's file was opened again; want it kept open")
	}
}

// waitingNow is the channel an index transaction holds on, if any.
func (r *logRestart) waitingNow() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting
}

// TestCheckpointerCopiesHandedOverLog checks that the catalog's
// checkpointer copies the log as soon as the end of an index transaction
// hands it over (not at its next tick), and then gives it back to the
// writer.
func TestCheckpointerCopiesHandedOverLog(t *testing.T) {
	defer func(every time.Duration) { checkpointEvery = every }(checkpointEvery)
	checkpointEvery = time.Hour // no tick during the test
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open("sqlite", dsn(path, time.Second, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`CREATE TABLE t (v TEXT)`, `INSERT INTO t VALUES ('a'), ('b')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r := newLogRestart(1)
	c, err := newCheckpointer(path, time.Second, r)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	r.checked(10, 0) // long
	done := r.reading()
	done() // the index transaction ends: the log is handed over
	if !r.handedOver() {
		t.Fatal("the log is not handed over at the end of the index transaction")
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.handedOver() {
		if time.Now().After(deadline) {
			t.Fatal("the checkpointer never gave the handed-over log back (ticks are an hour apart)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.logSyncs.Load(); n != 1 {
		t.Errorf("the checkpointer synced the long log %d times; want 1, after its copy", n)
	}
}
