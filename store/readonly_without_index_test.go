package store_test

import (
	"os"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// A copy of the catalog file alone (a backup without the index file, as
// the README allows) opens read-only for what needs no index: the audit
// trail verifies, messages list. A search or property filter says that
// the index file is missing and what to do, instead of the open failing.
func TestOpenReadOnlyWithoutTheIndexFile(t *testing.T) {
	path := store.FreshTarget(t, "sqlite")
	s := indexStore(t, path)
	applyIndexPage(t, s, 1, 1, indexMessage(1, "kept", "acme"))
	l := audit.New(s)
	if _, err := l.Append(t.Context(), audit.Record{Action: audit.ActionJobResumed, Params: map[string]any{"job_id": "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(store.IndexPath(path) + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}

	ro, err := store.OpenReadOnly(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatalf("open the catalog alone read-only: %v", err)
	}
	defer ro.Close()
	if n, err := audit.New(ro).Verify(t.Context(), nil); err != nil || n != 1 {
		t.Errorf("verify the catalog's audit trail: %d entries, %v; want 1", n, err)
	}
	if got := seqsOf(t, ro, dlq.Filter{Entity: "orders"}); len(got) != 1 || got[0] != 1 {
		t.Errorf("messages: %v, want [1]", got)
	}
	_, _, err = ro.ListMessages(t.Context(), dlq.Filter{Query: "kept"}, 10, "")
	if err == nil || !strings.Contains(err.Error(), store.IndexPath(path)) || !strings.Contains(err.Error(), "dlqdash serve") {
		t.Errorf("a search without the index file: %v, want an error naming the file and what to do", err)
	}
	if _, err := os.Stat(store.IndexPath(path)); !os.IsNotExist(err) {
		t.Errorf("the read-only open made the index file: %v", err)
	}
}
