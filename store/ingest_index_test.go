package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// The search rows and property rows are written behind the ingest
// (ingest_index.go); these tests hold the reads to exact answers anyway.

var indexAt = time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)

func indexStore(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.SyncEntities(t.Context(), []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, indexAt); err != nil {
		t.Fatal(err)
	}
	return s
}

// indexMessage is dead letter seq of orders, with word in its body and
// tenant as a property.
func indexMessage(seq int64, word, tenant string) dlq.Message {
	enq := indexAt.Add(time.Duration(seq) * time.Second)
	reason := "Rejected"
	return dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: fmt.Sprint(seq), EnqueuedAt: &enq,
		DeadLetterReason: &reason, Body: []byte(`{"note": "` + word + `"}`),
		ApplicationProperties: dlq.EncodeProperties(map[string]any{"tenant": tenant})}
}

// applyIndexPage writes msgs as the page covering from..through.
func applyIndexPage(t *testing.T, s *store.Store, from, through int64, msgs ...dlq.Message) {
	t.Helper()
	if _, err := s.ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: from, Through: through,
		Messages: msgs, SeenAt: indexAt}); err != nil {
		t.Fatal(err)
	}
}

// seqsOf lists f's matches by sequence number.
func seqsOf(t *testing.T, s *store.Store, f dlq.Filter) []int64 {
	t.Helper()
	recs, _, err := s.ListMessages(t.Context(), f, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range recs {
		out = append(out, r.SequenceNumber)
	}
	return out
}

// indexedStore is indexStore on a new file (its path) with msgs, sequence
// numbers 1 to len(msgs), written as one page and indexed.
func indexedStore(t *testing.T, msgs ...dlq.Message) (string, *store.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.db")
	s := indexStore(t, path)
	applyIndexPage(t, s, 1, int64(len(msgs)), msgs...)
	if err := s.FlushIndex(t.Context()); err != nil {
		t.Fatal(err)
	}
	return path, s
}

// rawCount counts with a connection of its own (not the store's, which
// would wait for the indexer).
func rawCount(t *testing.T, path, query string, args ...any) int64 {
	t.Helper()
	db, err := storetest.OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readCount counts through the store's read pool, directly (the store's
// reads would wait for the indexer), on either engine.
func readCount(t *testing.T, s *store.Store, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.ReaderForTest().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	ftsCount  = `SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?`
	propCount = `SELECT count(*) FROM message_properties WHERE key = 'tenant' AND value = ?`
)

// ftsCountOn is ftsCount for engine (a word is a tsquery on PostgreSQL).
func ftsCountOn(engine string) string {
	if engine == "postgres" {
		return `SELECT count(*) FROM messages_fts WHERE doc @@ CAST(? AS tsquery)`
	}
	return ftsCount
}

func TestReadRightAfterIngestFindsUnindexedMessage(t *testing.T) {
	store.ForEachEngine(t, testReadRightAfterIngestFindsUnindexedMessage)
}

func testReadRightAfterIngestFindsUnindexedMessage(t *testing.T, engine string) {
	s := indexStore(t, store.FreshTarget(t, engine))
	applyIndexPage(t, s, 1, 1, indexMessage(1, "zebra", "acme"))
	// Nothing indexed it yet: the page was written alone, far under a batch.
	if n := readCount(t, s, ftsCountOn(engine), "zebra"); n != 0 {
		t.Skipf("the indexer ran before the read (its timer): %d search rows", n)
	}
	for _, f := range []dlq.Filter{
		{Query: "zebra"},
		{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "acme"}}},
		{Entity: "orders", Query: "zebra", Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "acme"}}},
	} {
		if got := seqsOf(t, s, f); len(got) != 1 || got[0] != 1 {
			t.Errorf("%+v right after the page: %v, want [1]", f, got)
		}
	}
	n, err := s.CountMessages(t.Context(), dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "acme"}}}, 100)
	if err != nil || n != 1 {
		t.Errorf("count = %d, %v; want 1", n, err)
	}
	// The live hub's query of the new ids, with a search.
	applyIndexPage(t, s, 2, 2, indexMessage(2, "yak", "acme"))
	recs, err := s.MessagesByID(t.Context(), []int64{2}, dlq.Filter{Query: "yak"})
	if err != nil || len(recs) != 1 {
		t.Errorf("by id with a search: %d, %v; want 1", len(recs), err)
	}
	var exported int
	if err := s.ExportMessages(t.Context(), dlq.Filter{Query: "yak"}, func(dlq.Record) error { exported++; return nil }); err != nil || exported != 1 {
		t.Errorf("export with a search: %d, %v; want 1", exported, err)
	}
	if through, newest, err := store.IndexProgressForTest(t.Context(), s); err != nil || through != newest {
		t.Errorf("watermark %d, newest %d, %v", through, newest, err)
	}
}

// SQLite's file; PostgreSQL's crash and replicas are
// TestPostgresIndexerCrashAndReplicas.
func TestIndexResumesFromWatermarkAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	s := indexStore(t, path)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "alpha", "acme"), indexMessage(2, "beta", "acme"))
	if err := s.FlushIndex(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 3, 4, indexMessage(3, "gamma", "globex"), indexMessage(4, "delta", "globex"))
	if err := store.CrashForTest(s); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, path, ftsCount, "gamma"); n != 0 {
		t.Fatalf("the crash left %d search rows of the tail", n)
	}
	if n := rawCount(t, path, `SELECT CAST(value AS INTEGER) FROM index_meta WHERE key = 'index.through'`); n != 2 {
		t.Fatalf("watermark %d after the crash, want 2", n)
	}

	s2, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	// Open starts indexing the tail at once; a read waits for it.
	if got := seqsOf(t, s2, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "globex"}}}); len(got) != 2 {
		t.Errorf("after reopening, tenant globex: %v", got)
	}
	if got := seqsOf(t, s2, dlq.Filter{Query: "gamma"}); len(got) != 1 || got[0] != 3 {
		t.Errorf("after reopening, gamma: %v", got)
	}
	// Each message indexed once: nothing twice, nothing lost.
	for word, want := range map[string]int64{"alpha": 1, "beta": 1, "gamma": 1, "delta": 1} {
		if n := rawCount(t, path, ftsCount, word); n != want {
			t.Errorf("%s: %d search rows, want %d", word, n, want)
		}
	}
	if n := rawCount(t, path, `SELECT count(*) FROM message_properties`); n != 4 {
		t.Errorf("%d property rows, want 4", n)
	}
}

// An index run writes the search rows and the property rows in two
// transactions (indexOnce). A crash between them leaves search rows ahead
// of the watermark: the next run writes the property rows and no search
// row twice, and pruning meanwhile leaves no index row without its message.
func TestIndexCrashBetweenSearchAndPropertyRows(t *testing.T) {
	path, s := indexedStore(t, indexMessage(1, "alpha", "acme"), indexMessage(2, "beta", "acme"))
	ctx := t.Context()
	// Paused, the ingest does not index its page itself (indexInline).
	resume := store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 3, 5, indexMessage(3, "gamma", "globex"), indexMessage(4, "delta", "globex"),
		indexMessage(5, "omega", "globex"))
	// The fault stays until the crash: a run the flush left going fails
	// at the same point.
	crash := errors.New("crash")
	store.FailAfterSearchRowsForTest(s, crash)
	resume()
	if err := s.FlushIndex(ctx); !errors.Is(err, crash) {
		t.Fatalf("flush with the fault: %v, want the crash", err)
	}
	store.PauseIndexerForTest(s)
	if n := rawCount(t, path, ftsCount, "gamma"); n != 1 {
		t.Fatalf("%d search rows of gamma after the first transaction, want 1", n)
	}
	if n := rawCount(t, path, propCount, "globex"); n != 0 {
		t.Fatalf("%d property rows of globex after the first transaction, want 0", n)
	}
	meta := `SELECT CAST(value AS INTEGER) FROM index_meta WHERE key = ?`
	if th, st := rawCount(t, path, meta, "index.through"), rawCount(t, path, meta, "index.search_through"); th != 2 || st != 5 {
		t.Fatalf("watermark %d, search watermark %d; want 2 and 5", th, st)
	}
	// 4 leaves the broker: it has search rows but no property rows yet, so
	// pruning keeps it until the watermark passes it.
	applyIndexPage(t, s, 3, 5, indexMessage(3, "gamma", "globex"), indexMessage(5, "omega", "globex"))
	if n, err := s.PruneGone(ctx, indexAt.Add(time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("pruned %d, %v; want 0 while 4's property rows are not written", n, err)
	}
	if err := store.CrashForTest(s); err != nil {
		t.Fatal(err)
	}

	s2, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := seqsOf(t, s2, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "globex"}}, IncludeGone: true}); len(got) != 3 {
		t.Errorf("after reopening, tenant globex: %v, want 3 messages", got)
	}
	for word, want := range map[string]int64{"alpha": 1, "beta": 1, "gamma": 1, "delta": 1, "omega": 1} {
		if n := readCount(t, s2, ftsCount, word); n != want {
			t.Errorf("%s: %d search rows, want %d", word, n, want)
		}
	}
	if n, err := s2.PruneGone(ctx, indexAt.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1 (message 4)", n, err)
	}
	if n := readCount(t, s2, `SELECT count(*) FROM messages_fts`); n != 4 {
		t.Errorf("%d search rows after pruning 4, want 4", n)
	}
	if n := readCount(t, s2, `SELECT count(*) FROM message_properties WHERE message_id NOT IN (SELECT id FROM messages)`); n != 0 {
		t.Errorf("%d property rows of pruned messages", n)
	}
	if n := readCount(t, s2, `SELECT count(*) FROM message_properties`); n != 4 {
		t.Errorf("%d property rows, want 4", n)
	}
}

// A new message's id is above the search watermark too, whatever the
// catalog's newest id: the index run that writes its search rows starts
// past that watermark (indexSearchRange).
func TestNewMessageIDsAboveTheSearchWatermark(t *testing.T) {
	path, s := indexedStore(t, indexMessage(1, "alpha", "acme"))
	ctx := t.Context()
	// As a crash between an index run's two transactions leaves it, with
	// the catalog's newest messages gone since.
	if err := store.ExecForTest(ctx, s, `INSERT INTO idx.index_meta (key, value) VALUES ('index.search_through', '100')
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`); err != nil {
		t.Fatal(err)
	}
	applyIndexPage(t, s, 2, 2, indexMessage(2, "beta", "globex"))
	if id := rawCount(t, path, `SELECT max(id) FROM messages`); id <= 100 {
		t.Errorf("the new message got id %d, at or below the search watermark 100", id)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "beta"}); len(got) != 1 || got[0] != 2 {
		t.Errorf("search beta: %v, want [2]", got)
	}
	if got := seqsOf(t, s, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "globex"}}}); len(got) != 1 {
		t.Errorf("tenant globex: %v, want [2]", got)
	}
}

func TestPruneUnindexedMessages(t *testing.T) { store.ForEachEngine(t, testPruneUnindexedMessages) }

func testPruneUnindexedMessages(t *testing.T, engine string) {
	s := indexStore(t, store.FreshTarget(t, engine))
	ctx := t.Context()
	applyIndexPage(t, s, 1, 1, indexMessage(1, "kept", "acme"))
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	resume := store.PauseIndexerForTest(s)
	// 2 and 3 are written and gone before the indexer gets to them; 3 is
	// the newest row, so pruning it lowers max(id).
	applyIndexPage(t, s, 2, 3, indexMessage(2, "ghost", "initech"), indexMessage(3, "ghost", "initech"))
	applyIndexPage(t, s, 2, 3)
	if n, err := s.PruneGone(ctx, indexAt.Add(time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	applyIndexPage(t, s, 4, 4, indexMessage(4, "fresh", "initech"))
	resume()
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "ghost", IncludeGone: true}); len(got) != 0 {
		t.Errorf("pruned messages found by search: %v", got)
	}
	if got := seqsOf(t, s, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "initech"}}}); len(got) != 1 || got[0] != 4 {
		t.Errorf("tenant initech: %v, want [4]", got)
	}
	if n := readCount(t, s, `SELECT count(*) FROM messages_fts`); n != 2 {
		t.Errorf("%d search rows, want 2 (kept, fresh)", n)
	}
	if n := readCount(t, s, `SELECT count(*) FROM message_properties WHERE message_id NOT IN (SELECT id FROM messages)`); n != 0 {
		t.Errorf("%d property rows of pruned messages", n)
	}

	// Pruning the newest indexed message: the next one still gets an id
	// above the watermark, and is indexed.
	applyIndexPage(t, s, 4, 4)
	if n, err := s.PruneGone(ctx, indexAt.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	before, _, err := store.IndexProgressForTest(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	applyIndexPage(t, s, 5, 5, indexMessage(5, "later", "hooli"))
	_, newest, err := store.IndexProgressForTest(ctx, s)
	if err != nil || newest <= before {
		t.Fatalf("watermark %d before, newest %d (%v): the new message's id is not above the watermark", before, newest, err)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "later", Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "hooli"}}}); len(got) != 1 || got[0] != 5 {
		t.Errorf("the message after pruning: %v, want [5]", got)
	}
}

// The indexer runs by itself within about a second when nobody reads.
func TestIndexerRunsWithoutReads(t *testing.T) { store.ForEachEngine(t, testIndexerRunsWithoutReads) }

func testIndexerRunsWithoutReads(t *testing.T, engine string) {
	s := indexStore(t, store.FreshTarget(t, engine))
	applyIndexPage(t, s, 1, 1, indexMessage(1, "lonely", "acme"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for readCount(t, s, ftsCountOn(engine), "lonely") != 1 {
		if ctx.Err() != nil {
			t.Fatal("not indexed after 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The write-ahead log is copied into the database by the background
// checkpoint, long before the writer's own checkpoint would (its
// wal_autocheckpoint is a 512 MiB backstop: writerCheckpointPages).
// SQLite only (its file and log).
func TestBackgroundCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	s := indexStore(t, path)
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	var msgs []dlq.Message
	for i := range 400 {
		m := indexMessage(int64(i+1), "bulk", "acme")
		m.Body = []byte(strings.Repeat("x", 2000))
		msgs = append(msgs, m)
	}
	applyIndexPage(t, s, 1, 400, msgs...)
	deadline := time.Now().Add(10 * time.Second)
	for size() < before+600<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the database file grew from %d to %d bytes: nothing checkpointed", before, size())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A page of a range the catalog has nothing of is prepared before the
// writer is taken (groups, previews); the rows are the same as a page
// prepared inside the transaction.
func TestPreparedPageWritesTheSameRows(t *testing.T) {
	store.ForEachEngine(t, testPreparedPageWritesTheSameRows)
}

func testPreparedPageWritesTheSameRows(t *testing.T, engine string) {
	var msgs []dlq.Message
	for i := range 30 {
		m := indexMessage(int64(i+2), fmt.Sprintf("word%d", i%4), "acme")
		desc := fmt.Sprintf("order %d failed at 10.0.0.%d", 1000+i, i%3)
		m.DeadLetterErrorDescription = &desc
		if i%5 == 0 {
			m.Body = []byte{0, 1, 2, 0xff}
		}
		msgs = append(msgs, m)
	}
	concat := "group_concat(x, ';')"
	if engine == "postgres" {
		concat = "string_agg(x, ';')"
	}
	rows := func(s *store.Store) string {
		var out string
		err := s.ReaderForTest().QueryRow(`SELECT ` + concat + ` FROM (SELECT m.sequence_number || ' ' || g.key || ' ' || g.description_pattern
			|| ' ' || g.present || ' ' || m.body_preview AS x FROM messages m JOIN groups g ON g.id = m.group_id
			WHERE m.sequence_number > 1 ORDER BY m.sequence_number) AS r`).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Prepared: the range 2..31 is new.
	s1 := indexStore(t, store.FreshTarget(t, engine))
	applyIndexPage(t, s1, 2, 31, msgs...)
	// Not prepared: the range holds message 1 already.
	s2 := indexStore(t, store.FreshTarget(t, engine))
	applyIndexPage(t, s2, 1, 1, indexMessage(1, "first", "acme"))
	applyIndexPage(t, s2, 1, 31, append([]dlq.Message{indexMessage(1, "first", "acme")}, msgs...)...)
	a, b := rows(s1), rows(s2)
	if a == "" || a != b {
		t.Errorf("prepared:\n%s\nin the transaction:\n%s", a, b)
	}
}

// While someone reads through the indexes, the ingest indexes its own pages
// in their transaction (nothing older waiting), so those reads do not wait.
func TestIngestIndexesInlineWhileReadersSearch(t *testing.T) {
	store.ForEachEngine(t, testIngestIndexesInlineWhileReadersSearch)
}

func testIngestIndexesInlineWhileReadersSearch(t *testing.T, engine string) {
	s := indexStore(t, store.FreshTarget(t, engine))
	applyIndexPage(t, s, 1, 1, indexMessage(1, "before", "acme"))
	if n := readCount(t, s, ftsCountOn(engine), "before"); n != 0 {
		t.Skipf("the indexer ran before the check (its timer): %d search rows", n)
	}
	// A search: it waits for message 1, and marks readers active.
	if got := seqsOf(t, s, dlq.Filter{Query: "before"}); len(got) != 1 {
		t.Fatalf("search: %v", got)
	}
	applyIndexPage(t, s, 2, 2, indexMessage(2, "inline", "initech"))
	// Indexed when ApplyPage returns, without a read asking.
	if n := readCount(t, s, ftsCountOn(engine), "inline"); n != 1 {
		t.Errorf("%d search rows of the page right after it, want 1 (indexed in its transaction)", n)
	}
	if n := readCount(t, s, propCount, "initech"); n != 1 {
		t.Errorf("%d property rows of the page right after it, want 1", n)
	}
	through, newest, err := store.IndexProgressForTest(t.Context(), s)
	if err != nil || through != newest {
		t.Errorf("watermark %d, newest %d, %v", through, newest, err)
	}
}

// A replay job's filter selection, summarised and frozen right after the
// ingest, holds the messages the indexer has not indexed yet.
func TestJobSelectionFindsUnindexedMessages(t *testing.T) {
	store.ForEachEngine(t, testJobSelectionFindsUnindexedMessages)
}

func testJobSelectionFindsUnindexedMessages(t *testing.T, engine string) {
	s := indexStore(t, store.FreshTarget(t, engine))
	ctx := t.Context()
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "alpha", "umbrella"), indexMessage(2, "beta", "umbrella"))
	f := dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "umbrella"}}, Query: "alpha"}
	// Frozen in the writer's transaction, with the indexer paused.
	j, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if j.Total != 1 {
		t.Errorf("job of %d messages, want 1", j.Total)
	}
	applyIndexPage(t, s, 3, 3, indexMessage(3, "alpha", "umbrella"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, err := s.SummariseSelection(ctx, replay.Selection{Filter: &f}, 1, 5)
		if err != nil || sum.Total != 2 {
			t.Errorf("summary of %d messages, %v; want 2", sum.Total, err)
		}
	}()
	// The summary is a read: it waits for the indexer.
	time.Sleep(100 * time.Millisecond)
	store.PauseIndexerForTest(s)()
	<-done
}

// TestSearchDrivenReadsFindUnindexedMessage: a search's count and the
// property picker read the search's hits themselves (searchDrive), not
// through a list's plan, and must wait for the indexer as the lists do.
func TestSearchDrivenReadsFindUnindexedMessage(t *testing.T) {
	store.ForEachEngine(t, testSearchDrivenReadsFindUnindexedMessage)
}

func testSearchDrivenReadsFindUnindexedMessage(t *testing.T, engine string) {
	defer store.SearchDriveMaxForTest(-1)() // always read the hits
	for _, read := range []struct {
		name string
		n    func(s *store.Store) (int, error)
	}{
		{"count", func(s *store.Store) (int, error) {
			n, err := s.CountMessages(t.Context(), dlq.Filter{Query: "kiwi"}, 100)
			return int(n), err
		}},
		{"property keys", func(s *store.Store) (int, error) {
			keys, err := s.PropertyKeys(t.Context(), dlq.Filter{Query: "kiwi"}, 10)
			return len(keys), err
		}},
	} {
		t.Run(read.name, func(t *testing.T) {
			s := indexStore(t, store.FreshTarget(t, engine))
			applyIndexPage(t, s, 1, 1, indexMessage(1, "kiwi", "initech"))
			if n := readCount(t, s, ftsCountOn(engine), "kiwi"); n != 0 {
				t.Skipf("the indexer ran before the read (its timer): %d search rows", n)
			}
			if n, err := read.n(s); err != nil || n != 1 {
				t.Errorf("right after the page: %d, %v; want 1", n, err)
			}
		})
	}
}
