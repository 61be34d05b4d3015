package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// TestWALFilesShrinkAfterABulkRead: the write-ahead logs grow during a
// bulk read (the indexer's reads keep checkpoints from completing), and
// once a checkpoint completes, the next transaction that starts each log
// over cuts its file back to walSizeLimit (journal_size_limit) instead of
// leaving it that size on disk.
func TestWALFilesShrinkAfterABulkRead(t *testing.T) {
	defer func(old int64) { walSizeLimit = old }(walSizeLimit)
	walSizeLimit = 128 << 10
	path := filepath.Join(t.TempDir(), "wal.db")
	s := openTemp(t, path)
	ctx := t.Context()
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	page := func(from, n int) {
		t.Helper()
		writeBulkPage(t, s, from, n, 700)
		if err := s.FlushIndex(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wals := []string{path + "-wal", IndexPath(path) + "-wal"}
	// A reader holds a snapshot of both files through the bulk read, as
	// the indexer's transactions do during a real one: no checkpoint
	// completes and neither log starts over, so both grow.
	pin, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pin.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM messages) + (SELECT count(*) FROM message_properties)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		page(1+i*500, 500)
	}
	for _, w := range wals {
		if n := fileSize(t, w); n < 1<<20 {
			t.Fatalf("%s is %d bytes after the bulk read: too small for the test", filepath.Base(w), n)
		}
	}
	if err := pin.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A checkpoint completes once nothing reads (the background ones
	// would, within checkpointEvery), then the next writes start each log
	// over.
	for _, c := range []*checkpointer{s.ckpt, s.idxCkpt} {
		var busy, log, done int
		if err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil || busy != 0 || log != done {
			t.Fatalf("checkpoint: busy %d, %d of %d frames, %v", busy, done, log, err)
		}
	}
	page(2001, 1)
	for _, w := range wals {
		if n := fileSize(t, w); n > 512<<10 {
			t.Errorf("%s is still %d bytes after the log started over (limit %d)", filepath.Base(w), n, walSizeLimit)
		}
	}
}

// writeBulkPage writes messages from to from+n-1 of the dead-letter queue
// of "orders" (which must exist) as one page, each with a body of words
// words.
func writeBulkPage(t *testing.T, s *Store, from, n, words int) {
	t.Helper()
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	var msgs []dlq.Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, dlq.Message{SequenceNumber: int64(i), State: dlq.StateActive, MessageID: "m", EnqueuedAt: &at,
			Body: []byte(strings.Repeat("word"+string(rune('a'+i%26))+" ", words)), ApplicationProperties: []byte(`{"tenant":"t1"}`)})
	}
	if _, err := s.ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: int64(from),
		Through: int64(from + n - 1), Messages: msgs, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, file string) int64 {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCatalogLogStartsOverDuringBulkRead: while pages are written back to
// back and the indexer reads the catalog between them, the catalog's log
// starts over each time it has grown past restartFrames (the writer copies
// the rest of it before a transaction that no index transaction overlaps,
// logRestart), instead of growing with everything the bulk read writes.
func TestCatalogLogStartsOverDuringBulkRead(t *testing.T) {
	defer func(frames, limit int64, every time.Duration) {
		restartFrames, walSizeLimit, checkpointEvery = frames, limit, every
	}(restartFrames, walSizeLimit, checkpointEvery)
	// A log of 1 MiB is long, and the checkpointer looks every 10 ms: the
	// test's bulk read lasts about half a second.
	restartFrames, walSizeLimit, checkpointEvery = 256, 1<<20, 10*time.Millisecond
	path := filepath.Join(t.TempDir(), "restart.db")
	s := openTemp(t, path)
	s.batchMax = 100 // short index transactions, several a run
	ctx := t.Context()
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	const pages, perPage = 40, 250
	var largest int64
	for i := range pages {
		writeBulkPage(t, s, 1+i*perPage, perPage, 300)
		s.idx.poke()
		largest = max(largest, fileSize(t, path+"-wal"))
	}
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	restarts := s.restart.restarts.Load()
	t.Logf("%d messages: the catalog's log started over %d times; its file was %.1f MiB at most",
		pages*perPage, restarts, float64(largest)/(1<<20))
	if restarts == 0 {
		t.Error("the catalog's log never started over during the bulk read")
	}
	if largest > 16<<20 {
		t.Errorf("the catalog's log file grew to %.1f MiB during the bulk read; want it started over at about 1 MiB", float64(largest)/(1<<20))
	}
}
