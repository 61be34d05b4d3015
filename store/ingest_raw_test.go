package store_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestCloseLeavesNoFileOpen: the ingest's INSERTs, prepared on the
// writer's connection below database/sql, are closed with the store. A
// statement left open keeps SQLite's connection, and its file, open after
// Close (sqlite3_close_v2 waits for the last statement).
func TestCloseLeavesNoFileOpen(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/fd")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 100 messages: chunks of 64, 32 and 4 rows, three of the statements.
	page := dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 1, Through: 100, SeenAt: t0}
	for seq := int64(1); seq <= 100; seq++ {
		page.Messages = append(page.Messages, dlq.Message{SequenceNumber: seq, State: dlq.StateActive,
			MessageID: "m", Body: []byte("order")})
	}
	if _, err := s.SyncEntities(t.Context(), []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, t0); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApplyPage(t.Context(), page)
	if err != nil || len(res.New) != 100 {
		t.Fatalf("ApplyPage = %d new, %v", len(res.New), err)
	}
	if open := openUnder(t, dir); len(open) == 0 {
		t.Fatal("no file of the catalog is open while the store is: the check below would prove nothing")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if open := openUnder(t, dir); len(open) > 0 {
		t.Errorf("files still open after Close: %v", open)
	}
}

// openUnder is the files under dir that this process has open.
func openUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			open = append(open, target)
		}
	}
	return open
}
