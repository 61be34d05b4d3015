package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// TestIndexRunAReadWaitsForLeavesTheLog: the commits of an index run that
// a read waits for do not copy the index file's log into the file (two
// fsyncs the read would wait for too); the runs nobody waits for do, past
// walCheckpointPages, as before. What was copied is read from the log's
// index (the -shm file: mxFrame, the last frame, and nBackfill, the
// frames copied, as SQLite's WAL file format documents them).
func TestIndexRunAReadWaitsForLeavesTheLog(t *testing.T) {
	defer func(every time.Duration, pages int) { checkpointEvery, walCheckpointPages = every, pages }(checkpointEvery, walCheckpointPages)
	checkpointEvery = time.Hour // the index file's checkpointer does not copy during the test
	walCheckpointPages = 8      // every index commit is past it
	ctx := t.Context()
	s := OpenFresh(t, "sqlite")
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
		t.Fatal(err)
	}
	next := 0
	apply := func() {
		t.Helper()
		var msgs []dlq.Message
		for range 200 {
			next++
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(next), State: dlq.StateActive, MessageID: fmt.Sprint(next),
				Body:                  []byte(fmt.Sprintf(`{"order": %d, "note": "payment %d declined"}`, next, next*7919)),
				ApplicationProperties: dlq.EncodeProperties(map[string]any{"tenant": fmt.Sprint("t", next%5), "n": next})})
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: int64(next - 199),
			Through: int64(next), Messages: msgs, SeenAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	logState := func() (last, copied uint32) {
		t.Helper()
		shm, err := os.ReadFile(IndexPath(s.path) + "-shm")
		if err != nil || len(shm) < 100 {
			t.Fatalf("read the index file's log index: %d bytes, %v", len(shm), err)
		}
		return binary.NativeEndian.Uint32(shm[16:]), binary.NativeEndian.Uint32(shm[96:])
	}

	// Nobody waits: the run's commits copy the log.
	apply()
	if err := s.catchUpIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if last, copied := logState(); last == 0 || copied != last {
		t.Fatalf("after a run nobody waited for, %d of the log's %d frames are copied, want all", copied, last)
	}

	// A read waits for the run: its commits leave the log to the
	// checkpointer.
	readWaitingForARun(t, s, apply)
	s.idx.writing.Lock() // the run is over
	s.idx.writing.Unlock()
	if last, copied := logState(); copied >= last {
		t.Errorf("after a run a read waited for, %d of the log's %d frames are copied: its commit copied them", copied, last)
	}

	// Nobody waits again: the commits copy again. (No read lately: the
	// page is the indexer's, not indexed inline by the ingest.)
	s.idx.lastRead.Store(0)
	apply()
	if err := s.catchUpIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if last, copied := logState(); copied != last {
		t.Errorf("after the next run nobody waited for, %d of the log's %d frames are copied, want all", copied, last)
	}
}
