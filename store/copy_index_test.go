package store_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestCopyUnindexedTailToPostgres: a SQLite catalog whose newest messages
// its indexer had not indexed (a crash, or a serve still writing the file)
// is copied whole: on PostgreSQL those messages are found by search and by
// property filter, the watermark covers every copied message, and the
// audit trail's actions (one row per action) come along.
func TestCopyUnindexedTailToPostgres(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	path := store.FreshTarget(t, "sqlite")
	s := indexStore(t, path)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "alpha", "acme"), indexMessage(2, "beta", "acme"))
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	log := audit.New(s)
	for i := range 4 {
		if _, err := log.Append(ctx, audit.Record{Actor: "tester", Action: audit.ActionReplay, MessageIDs: []string{fmt.Sprint(i)},
			Params: map[string]any{"job_id": "7", "namespace": "prod"}}); err != nil {
			t.Fatal(err)
		}
	}
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 3, 4, indexMessage(3, "gamma", "globex"), indexMessage(4, "delta", "globex"))
	if err := store.CrashForTest(s); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, path, `SELECT count(*) FROM message_properties WHERE value = 'globex'`); n != 0 {
		t.Fatalf("the source has %d property rows of its unindexed tail", n)
	}

	src, err := store.OpenReadOnly(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := store.Open(ctx, store.FreshTarget(t, "postgres"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for run := range 2 { // a second run changes nothing, and verifies
		if err := src.CopyTo(ctx, dst, nil); err != nil {
			t.Fatalf("copy %d: %v", run+1, err)
		}
	}
	if got := seqsOf(t, dst, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "globex"}}}); !slices.Equal(got, []int64{4, 3}) {
		t.Errorf("tenant globex on the copy: %v, want [4 3]", got)
	}
	if got := seqsOf(t, dst, dlq.Filter{Query: "gamma"}); !slices.Equal(got, []int64{3}) {
		t.Errorf("gamma on the copy: %v, want [3]", got)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, dst); err != nil || through != newest || newest != 4 {
		t.Errorf("the copy's watermark %d, newest %d, %v; want 4, 4", through, newest, err)
	}
	want, _, err := src.ListAuditActions(ctx, audit.Filter{}, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := dst.ListAuditActions(ctx, audit.Filter{}, 50, "")
	if err != nil || len(want) != 1 || !reflect.DeepEqual(got, want) {
		t.Errorf("audit actions on the copy (%v):\n%+v\nwant one:\n%+v", err, got, want)
	}
	ids, _, err := dst.AuditActionMessages(ctx, want[0].ID, 10, "")
	if err != nil || !slices.Equal(ids, []string{"0", "1", "2", "3"}) {
		t.Errorf("the action's messages on the copy: %v, %v", ids, err)
	}
}
