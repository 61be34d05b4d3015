package store

import (
	"path/filepath"
	"testing"
)

// TestIngestSettings checks the write side's settings issue 18 measured:
// the search index merges 64 segments at a time and only then, or in the
// ingester's idle merge steps (0012), and the writer's own checkpoint is
// the backstop at writerCheckpointPages (checkpoint.go).
func TestIngestSettings(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "settings.db"))
	ctx := t.Context()
	for k, want := range map[string]int{"automerge": 0, "crisismerge": 64} {
		var v int
		if err := s.reader.QueryRowContext(ctx, `SELECT v FROM messages_fts_config WHERE k = ?`, k).Scan(&v); err != nil || v != want {
			t.Errorf("search index %s = %d, %v; want %d", k, v, err, want)
		}
	}
	var pages int
	if err := s.writer.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil || pages != writerCheckpointPages {
		t.Errorf("writer's wal_autocheckpoint = %d, %v; want %d", pages, err, writerCheckpointPages)
	}
}
