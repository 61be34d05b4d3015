package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/replica"
)

// On PostgreSQL the indexer writes the search documents and property rows
// behind the ingest (postgres_index.go), and every replica runs one: a
// crashed ingester's unindexed tail is indexed by the others from the
// watermark, each message once, however many index at the same time.
func TestPostgresIndexerCrashAndReplicas(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	a := indexStore(t, target)
	applyIndexPage(t, a, 1, 2, indexMessage(1, "alpha", "acme"), indexMessage(2, "beta", "acme"))
	if err := a.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	var replicas []*store.Store
	for range 3 {
		r, err := store.Open(ctx, target, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		store.PauseIndexerForTest(r)
		replicas = append(replicas, r)
	}
	// The ingester writes three pages its indexer never gets to, and dies.
	store.PauseIndexerForTest(a)
	const n = 300
	for page := range 3 {
		var msgs []dlq.Message
		for i := range n / 3 {
			seq := int64(3 + page*n/3 + i)
			msgs = append(msgs, indexMessage(seq, fmt.Sprintf("w%d", seq), fmt.Sprintf("t%d", seq%7)))
		}
		applyIndexPage(t, a, msgs[0].SequenceNumber, msgs[len(msgs)-1].SequenceNumber, msgs...)
	}
	if err := store.CrashForTest(a); err != nil {
		t.Fatal(err)
	}
	r0 := replicas[0]
	if got := readCount(t, r0, `SELECT count(*) FROM messages_fts`); got != 2 {
		t.Fatalf("%d search documents after the crash, want 2 (the tail unindexed)", got)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, r0); err != nil || through != 2 || newest != n+2 {
		t.Fatalf("watermark %d, newest %d, %v; want 2, %d", through, newest, err, n+2)
	}
	// Every replica indexes at once, several times over.
	var wg sync.WaitGroup
	for _, r := range replicas {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := store.CatchUpIndexForTest(ctx, r); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if got := readCount(t, r0, `SELECT count(*) FROM messages_fts`); got != n+2 {
		t.Errorf("%d search documents, want %d: each message once", got, n+2)
	}
	if got := readCount(t, r0, `SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM messages_fts f WHERE f.rowid = m.id)`); got != 0 {
		t.Errorf("%d messages without a search document", got)
	}
	if got := readCount(t, r0, `SELECT count(*) FROM message_properties`); got != n+2 {
		t.Errorf("%d property rows, want %d", got, n+2)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, r0); err != nil || through != newest {
		t.Errorf("watermark %d, newest %d, %v", through, newest, err)
	}
	// The reads of another replica find the tail, through both indexes.
	if got := seqsOf(t, replicas[1], dlq.Filter{Query: "w150"}); !slices.Equal(got, []int64{150}) {
		t.Errorf("w150: %v", got)
	}
	if got := seqsOf(t, replicas[2], dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t3"}}, Query: "w10"}); !slices.Equal(got, []int64{10}) {
		t.Errorf("tenant t3 and w10: %v", got)
	}
}

// An indexer killed in the middle of its batch (its backend terminated, as
// when its replica dies) leaves none of the batch's rows: the next batch
// waits for its lock, then indexes from the watermark, every message once.
func TestPostgresIndexerKilledMidBatch(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	s := indexStore(t, target)
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 1, 3, indexMessage(1, "one", "acme"), indexMessage(2, "two", "acme"), indexMessage(3, "three", "acme"))

	// Another replica's batch, half written when its backend dies.
	half, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close(context.Background())
	for _, q := range []string{
		"BEGIN",
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", store.IndexLockKeyForTest),
		"INSERT INTO messages_fts (rowid, doc) SELECT id, to_tsvector('simple', 'half') FROM messages WHERE id = (SELECT min(id) FROM messages)",
		"INSERT INTO meta (key, value) SELECT 'index.through', CAST(min(id) AS text) FROM messages ON CONFLICT (key) DO UPDATE SET value = excluded.value",
	} {
		if _, err := half.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- store.CatchUpIndexForTest(ctx, s) }()
	select {
	case err := <-done:
		t.Fatalf("a batch ran while another held the indexer's lock (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	admin, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", half.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readCount(t, s, `SELECT count(*) FROM messages_fts`); got != 3 {
		t.Errorf("%d search documents, want 3", got)
	}
	if got := readCount(t, s, `SELECT count(*) FROM messages_fts WHERE doc @@ CAST('half' AS tsquery)`); got != 0 {
		t.Errorf("%d rows of the killed batch", got)
	}
	if got := seqsOf(t, s, dlq.Filter{Query: "one", Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "acme"}}}); !slices.Equal(got, []int64{1}) {
		t.Errorf("one, tenant acme: %v", got)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, s); err != nil || through != newest || newest != 3 {
		t.Errorf("watermark %d, newest %d, %v; want 3, 3", through, newest, err)
	}
}

// A batch's two transactions (search documents and watermark on one
// connection, property rows on another, in parallel) commit one after the
// other: a batch that dies between the two commits leaves property rows
// above the watermark, which reads find right and the next batch replaces,
// every message's rows once.
func TestPostgresIndexerDiesBetweenItsCommits(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	s := indexStore(t, target)
	resume := store.PauseIndexerForTest(s)
	const n = 120
	var msgs []dlq.Message
	for seq := int64(1); seq <= n; seq++ {
		msgs = append(msgs, indexMessage(seq, fmt.Sprintf("w%d", seq), fmt.Sprintf("t%d", seq%7)))
	}
	applyIndexPage(t, s, 1, n, msgs...)

	died := errors.New("the replica died")
	restore := store.FailAfterPropertiesCommittedForTest(s, died)
	if err := store.CatchUpIndexForTest(ctx, s); !errors.Is(err, died) {
		t.Fatalf("the batch: %v, want %v", err, died)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, s); err != nil || through != 0 || newest != n {
		t.Fatalf("watermark %d, newest %d, %v; want 0, %d", through, newest, err, n)
	}
	if got := readCount(t, s, `SELECT count(*) FROM messages_fts`); got != 0 {
		t.Errorf("%d search documents after the batch died, want 0", got)
	}
	if got := readCount(t, s, `SELECT count(*) FROM message_properties`); got != n {
		t.Fatalf("%d property rows after the batch died, want %d (committed before it died)", got, n)
	}
	restore()

	resume()
	if got := seqsOf(t, s, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t3"}}, Query: "w10"}); !slices.Equal(got, []int64{10}) {
		t.Errorf("tenant t3 and w10: %v", got)
	}
	if got := readCount(t, s, `SELECT count(*) FROM message_properties`); got != n {
		t.Errorf("%d property rows, want %d: each message's once", got, n)
	}
	if got := readCount(t, s, `SELECT count(*) FROM messages_fts`); got != n {
		t.Errorf("%d search documents, want %d", got, n)
	}
	want := 0
	for seq := 1; seq <= n; seq++ {
		if seq%7 == 3 {
			want++
		}
	}
	if got := len(seqsOf(t, s, dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t3"}}})); got != want {
		t.Errorf("tenant t3: %d messages, want %d", got, want)
	}
}

// The property rows' transaction of a batch waits for the lock that
// every other writer of index rows holds too (lockIndexPG): while a
// transaction holds it, a batch moves no watermark, and then goes on.
func TestPostgresIndexerPropertiesWaitForTheirLock(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	s := indexStore(t, target)
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "one", "acme"), indexMessage(2, "two", "acme"))

	holder, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	htx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := htx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, store.IndexPropsLockKeyForTest); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- store.CatchUpIndexForTest(ctx, s) }()
	select {
	case err := <-done:
		t.Fatalf("the batch ended while another transaction held its property rows' lock: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if through, _, err := store.IndexProgressForTest(ctx, s); err != nil || through != 0 {
		t.Fatalf("watermark %d, %v while the property rows wait: want 0", through, err)
	}
	if err := htx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, s); err != nil || through != 2 || newest != 2 {
		t.Errorf("watermark %d, newest %d, %v; want 2, 2", through, newest, err)
	}
	if got := readCount(t, s, `SELECT count(*) FROM message_properties`); got != 2 {
		t.Errorf("%d property rows, want 2", got)
	}
}

// An index batch on PostgreSQL takes its second connection (the property
// rows') before its lock, not while holding it: a write that waits for the
// index lock (retention, CreateJob's tail) holds the write lock, the writes
// queued behind it hold the rest of the writer pool, and a batch that
// needed one more connection then waited for them forever.
func TestPostgresIndexerDoesNotWaitForAConnectionUnderItsLock(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	target := store.FreshTarget(t, "postgres")
	s := indexStore(t, target)
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "one", "acme"), indexMessage(2, "two", "acme"))

	holder, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			var got int
			if err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d transactions wait for an advisory lock, want %d", got, n)
			}
		}
	}
	htx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := htx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, store.IndexLockKeyForTest); err != nil {
		t.Fatal(err)
	}

	// The batch waits for the index lock.
	batch := make(chan error, 1)
	go func() { batch <- store.CatchUpIndexForTest(ctx, s) }()
	waiting(1)
	// A write holding the write lock waits for the index lock behind it.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tx, err := store.BeginWriteForTest(ctx, s)
		if err != nil {
			return
		}
		defer tx.Rollback()
		if store.LockIndexForTest(ctx, tx) == nil {
			tx.Commit()
		}
	}()
	waiting(2)
	// Writes queued behind the write lock take the rest of the pool.
	for range store.WriterPoolSizeForTest - 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tx, err := store.BeginWriteForTest(ctx, s); err == nil {
				tx.Rollback()
			}
		}()
	}
	waiting(2 + store.WriterPoolSizeForTest - 3) // one may wait for a connection instead
	time.Sleep(200 * time.Millisecond)
	if err := htx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-batch:
		if err != nil {
			t.Fatalf("the batch failed once its lock was free: %v", err)
		}
	case <-time.After(15 * time.Second):
		cancel()
		<-batch
		wg.Wait()
		t.Fatal("the index batch still waits 15 s after its lock was free: deadlocked on the writer pool")
	}
	wg.Wait()
	if through, newest, err := store.IndexProgressForTest(t.Context(), s); err != nil || through != 2 || newest != 2 {
		t.Errorf("watermark %d, newest %d, %v; want 2, 2", through, newest, err)
	}
}

// A batch's property rows can take longer than its search documents (here
// their lock is held past the writer's idle_in_transaction_session_timeout):
// the watermark's transaction waits for them without going idle, which the
// server would end (replica.ConfigureWriter), failing the batch.
func TestPostgresIndexerWaitsForSlowPropertyRows(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	s := indexStore(t, target)
	store.PauseIndexerForTest(s)
	applyIndexPage(t, s, 1, 2, indexMessage(1, "one", "acme"), indexMessage(2, "two", "acme"))

	holder, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	htx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := htx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, store.IndexPropsLockKeyForTest); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- store.CatchUpIndexForTest(ctx, s) }()
	// The holder's own transaction keeps busy meanwhile (it is idle too).
	for end := time.Now().Add(replica.IdleInTransactionTimeout + time.Second); time.Now().Before(end); {
		if _, err := htx.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := htx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the batch failed while its property rows waited: %v", err)
	}
	if through, newest, err := store.IndexProgressForTest(ctx, s); err != nil || through != 2 || newest != 2 {
		t.Errorf("watermark %d, newest %d, %v; want 2, 2", through, newest, err)
	}
	if got := readCount(t, s, `SELECT count(*) FROM message_properties`); got != 2 {
		t.Errorf("%d property rows, want 2", got)
	}
}
