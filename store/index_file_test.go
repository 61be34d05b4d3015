package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// The search index and the property rows live in a file of their own
// (store.IndexPath), written by the indexer's connection in parallel with
// the ingest's: these tests kill a process mid-ingest, more than once, and
// hold the two files to "no index row lost for good, none twice, none
// without its message".

const killChildEnv = "DLQDASH_TEST_KILL_INGEST"

// childIngesting is what the child prints once its first page is written.
const childIngesting = "child: ingesting"

// killPageSize is how many messages the child writes a page.
const killPageSize = 200

// TestIndexFileSurvivesKill runs a child process that ingests pages of
// new messages as fast as it can (nobody reads, so the indexer runs behind
// it, in parallel), SIGKILLs it at a moment that varies, and checks the two
// files after each kill: once the indexer has caught up, every message has
// exactly one search row and its property rows, and no index row belongs to
// a message the catalog does not hold.
func TestIndexFileSurvivesKill(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		ingestUntilKilled(t, path)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	path := filepath.Join(t.TempDir(), "catalog.db")
	var total int64
	for round, after := range []time.Duration{700 * time.Millisecond, 1100 * time.Millisecond, 1500 * time.Millisecond} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestIndexFileSurvivesKill$", "-test.v")
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		out, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("child%d.log", round)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill comes after the child's first page (a slow start, under
		// the race detector, must not make it a kill before any ingest).
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if log, _ := os.ReadFile(out.Name()); strings.Contains(string(log), childIngesting) {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("round %d: the child wrote no page within a minute", round)
			}
		}
		time.Sleep(after)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		out.Close()

		// What the kill left: the watermark and the newest message, read
		// before the store's Open resumes the indexer.
		through := rawCount(t, path, `SELECT coalesce((SELECT CAST(value AS INTEGER) FROM index_meta WHERE key = 'index.through'), 0)`)
		newest := rawCount(t, path, `SELECT coalesce(max(id), 0) FROM messages`)
		t.Logf("round %d: after the kill the index covers ids up to %d of %d", round, through, newest)
		if through > newest {
			t.Errorf("round %d: the watermark %d is past the newest message %d", round, through, newest)
		}
		s, err := store.Open(t.Context(), path, store.Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		n := checkIndexFile(t, s, path, round)
		if n <= total {
			log, _ := os.ReadFile(out.Name())
			t.Fatalf("round %d: the child wrote nothing before it was killed (%d messages, %d before); its output:\n%s", round, n, total, log)
		}
		t.Logf("round %d: killed after %s: %d messages (%d new), every one indexed once", round, after, n, n-total)
		total = n
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkIndexFile waits for the indexer and checks both files; it returns
// how many messages the catalog holds.
func checkIndexFile(t *testing.T, s *store.Store, path string, round int) int64 {
	t.Helper()
	ctx := t.Context()
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	through, newest, err := store.IndexProgressForTest(ctx, s)
	if err != nil || through != newest {
		t.Errorf("round %d: watermark %d, newest message %d, %v", round, through, newest, err)
	}
	msgs := readCount(t, s, `SELECT count(*) FROM messages`)
	if n := readCount(t, s, `SELECT count(*) FROM messages_fts`); n != msgs {
		t.Errorf("round %d: %d search rows for %d messages", round, n, msgs)
	}
	// Every message has the properties tenant and seq. seq is unique per
	// message: once the indexer has seen it 2,000 times it decides it is
	// not indexed (property_keys.go; its rows written before are left to
	// the purge); until then it has a row for every message. tenant has a
	// row for every message.
	if n := readCount(t, s, `SELECT count(*) FROM message_properties WHERE key = 'tenant'`); n != msgs {
		t.Errorf("round %d: %d tenant property rows for %d messages", round, n, msgs)
	}
	seqDecided := readCount(t, s, `SELECT coalesce((SELECT indexed FROM property_keys WHERE key = 'seq'), -1)`)
	switch seqDecided {
	case 0:
		t.Logf("round %d: seq is decided not indexed", round)
	case -1:
		if n := readCount(t, s, `SELECT count(*) FROM message_properties WHERE key = 'seq'`); n != msgs {
			t.Errorf("round %d: seq is undecided and has %d rows for %d messages", round, n, msgs)
		}
	default:
		t.Errorf("round %d: seq, unique per message, is decided indexed (%d)", round, seqDecided)
	}
	// Each index batch samples up to 2,048 of its messages: with every
	// message indexed, seq was seen min(messages, 2,048) times at least.
	if msgs >= 2000 && seqDecided != 0 {
		t.Errorf("round %d: seq is not decided after %d messages", round, msgs)
	}
	if n := readCount(t, s, `SELECT count(*) FROM property_keys WHERE key = 'tenant' AND indexed = 1`); n != 1 {
		t.Errorf("round %d: tenant is not decided a key with rows", round)
	}
	if n := readCount(t, s, `SELECT count(*) FROM message_properties WHERE message_id NOT IN (SELECT id FROM messages)`); n != 0 {
		t.Errorf("round %d: %d property rows of no message", round, n)
	}
	if n := readCount(t, s, `SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM message_properties p
		WHERE p.key = 'tenant' AND p.value = 't' || (m.sequence_number % 7) AND p.message_id = m.id)`); n != 0 {
		t.Errorf("round %d: %d messages without their tenant property row", round, n)
	}
	// Each message's own word finds it, once, through the store's reads
	// (the newest, the oldest and one in the middle).
	for _, q := range []string{`SELECT min(sequence_number) FROM messages`, `SELECT max(sequence_number) FROM messages`,
		`SELECT sequence_number FROM messages ORDER BY id LIMIT 1 OFFSET (SELECT count(*) / 2 FROM messages)`} {
		seq := readCount(t, s, q)
		word := "kw" + strconv.FormatInt(seq, 10)
		if got := seqsOf(t, s, dlq.Filter{Query: word}); len(got) != 1 || got[0] != seq {
			t.Errorf("round %d: search %q found %v, want [%d]", round, word, got, seq)
		}
		// seq has no rows: the JSON check, narrowed by the search index.
		f := dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "seq", Value: strconv.FormatInt(seq, 10)}}}
		if got := seqsOf(t, s, f); len(got) != 1 || got[0] != seq {
			t.Errorf("round %d: property seq=%d found %v", round, seq, got)
		}
		tenant := fmt.Sprint("t", seq%7)
		f = dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "seq", Value: strconv.FormatInt(seq, 10)}, {Key: "tenant", Value: tenant}}}
		if got := seqsOf(t, s, f); len(got) != 1 || got[0] != seq {
			t.Errorf("round %d: properties seq=%d, tenant=%s found %v", round, seq, tenant, got)
		}
	}
	return msgs
}

// ingestUntilKilled is the child: pages of new messages of orders, with
// sequence numbers after the catalog's newest, until it is killed.
func ingestUntilKilled(t *testing.T, path string) {
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, indexAt); err != nil {
		t.Fatal(err)
	}
	seq := readCount(t, s, `SELECT coalesce(max(sequence_number), 0) FROM messages`)
	for page := 0; ; page++ {
		if page == 1 {
			fmt.Println(childIngesting)
		}
		var msgs []dlq.Message
		for range killPageSize {
			seq++
			m := indexMessage(seq, "kw"+strconv.FormatInt(seq, 10), fmt.Sprint("t", seq%7))
			m.ApplicationProperties = dlq.EncodeProperties(map[string]any{"tenant": fmt.Sprint("t", seq%7), "seq": seq})
			msgs = append(msgs, m)
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: msgs[0].SequenceNumber,
			Through: seq, Messages: msgs, SeenAt: indexAt}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexFileOfAnotherCatalog: a catalog opened beside the index file of
// another catalog (a backup of the catalog file alone, restored where a
// newer index file lies) is indexed again from scratch, and its searches
// find its own messages only.
func TestIndexFileOfAnotherCatalog(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	sa := indexStore(t, a)
	applyIndexPage(t, sa, 1, 2, indexMessage(1, "apple", "acme"), indexMessage(2, "apricot", "acme"))
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	sb := indexStore(t, b)
	applyIndexPage(t, sb, 1, 1, indexMessage(1, "banana", "initech"))
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	// b's catalog beside a's index file.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(store.IndexPath(b) + suffix)
	}
	if err := os.Rename(store.IndexPath(a), store.IndexPath(b)); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), b, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := seqsOf(t, s, dlq.Filter{Query: "banana"}); len(got) != 1 {
		t.Errorf("b's own word: %v", got)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "apricot"}); len(got) != 0 {
		t.Errorf("a's word in b: %v", got)
	}
	if n := readCount(t, s, `SELECT count(*) FROM messages_fts`); n != 1 {
		t.Errorf("%d search rows, want b's 1", n)
	}
	if n := readCount(t, s, `SELECT count(*) FROM message_properties`); n != 1 {
		t.Errorf("%d property rows, want b's 1", n)
	}
}

// TestCatalogOfAnOlderDlqdashMovesItsIndexes: a catalog written before the
// index file had its own file (messages_fts, message_properties and the
// watermark in the catalog) loses those tables at Open and is indexed
// again in the index file, with the same answers.
func TestCatalogOfAnOlderDlqdashMovesItsIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s := indexStore(t, path)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "quince", "acme"), indexMessage(2, "plum", "initech"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What an older dlqdash left: the tables in the catalog, stale rows in
	// them, the watermark in meta, and no index file.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE VIRTUAL TABLE messages_fts USING fts5 (body, reason, description, properties, content = '', contentless_delete = 1)`,
		`INSERT INTO messages_fts (rowid, body, reason, description, properties) VALUES (1, 'stale', '', '', '')`,
		`CREATE TABLE message_properties (key TEXT NOT NULL, value TEXT NOT NULL, at INTEGER NOT NULL, message_id INTEGER NOT NULL,
			PRIMARY KEY (key, value, at, message_id)) STRICT, WITHOUT ROWID`,
		`INSERT INTO message_properties VALUES ('tenant', 'stale', 0, 1)`,
		`INSERT INTO meta (key, value) VALUES ('index.through', '2')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(store.IndexPath(path) + suffix)
	}

	s, err = store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := rawCount(t, path, `SELECT count(*) FROM main.sqlite_schema WHERE name IN ('messages_fts', 'message_properties')`); n != 0 {
		t.Errorf("%d of the old index tables left in the catalog", n)
	}
	if n := rawCount(t, path, `SELECT count(*) FROM main.meta WHERE key = 'index.through'`); n != 0 {
		t.Errorf("the old watermark is still in the catalog's meta")
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "quince"}); len(got) != 1 || got[0] != 1 {
		t.Errorf("search after the move: %v", got)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "stale"}); len(got) != 0 {
		t.Errorf("the old index's rows answer: %v", got)
	}
	f := dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "initech"}}}
	if got := seqsOf(t, s, f); len(got) != 1 || got[0] != 2 {
		t.Errorf("property filter after the move: %v", got)
	}
}
