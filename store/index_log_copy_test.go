package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// TestIndexLogCopiedBeforeARunNobodyWaitsFor: the indexer's commits never
// copy the index file's log into the file (two fsyncs that a read waiting
// for the run would wait for too); the index file's checkpointer copies
// it before each run nobody waits for, so that the run can start the log
// over, and not before a run a read waits for.
func TestIndexLogCopiedBeforeARunNobodyWaitsFor(t *testing.T) {
	defer func(every time.Duration) { checkpointEvery = every }(checkpointEvery)
	checkpointEvery = time.Hour // the checkpointer copies only when asked
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
	// fileSize is the index file's size: it grows when the log's pages are
	// copied into it.
	fileSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(IndexPath(s.path))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	// A run's commits leave its pages in the log: the log index (-shm, as
	// SQLite's WAL format documents it) has frames past nBackfill.
	apply()
	if err := s.catchUpIndex(ctx); err != nil {
		t.Fatal(err)
	}
	shm, err := os.ReadFile(IndexPath(s.path) + "-shm")
	if err != nil || len(shm) < 100 {
		t.Fatalf("read the index file's log index: %d bytes, %v", len(shm), err)
	}
	if last, copied := binary.NativeEndian.Uint32(shm[16:]), binary.NativeEndian.Uint32(shm[96:]); copied >= last {
		t.Fatalf("after an index run, %d of the log's %d frames are copied: its commit copied them", copied, last)
	}

	// A run nobody waits for: the log is copied before it.
	before := fileSize()
	s.idx.lastRead.Store(0) // no read lately: the page is the indexer's, not indexed inline
	apply()
	s.idx.poke()
	AwaitIndexerForTest(t, s, 10*time.Second)
	s.idx.writing.Lock() // the run is over
	s.idx.writing.Unlock()
	copiedBefore := fileSize()
	if copiedBefore <= before {
		t.Errorf("the index file is %d bytes after a run nobody waited for, as before it: the log was not copied", copiedBefore)
	}

	// A run a read waits for: nothing is copied, before it or at its commits.
	readWaitingForARun(t, s, apply)
	s.idx.writing.Lock()
	s.idx.writing.Unlock()
	if after := fileSize(); after != copiedBefore {
		t.Errorf("the index file grew from %d to %d bytes in a run a read waited for: the log was copied", copiedBefore, after)
	}
}
