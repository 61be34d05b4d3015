package dlq_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

type harness struct {
	t       *testing.T
	broker  *fakeBroker
	store   *store.Store
	db      *sql.DB // a read-only look at the same file, for assertions
	mu      sync.Mutex
	changes []dlq.Change
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st, path := openStore(t)
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// One connection, with the catalog's index file (the search and
	// property rows) attached as the store attaches it.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if _, err := db.Exec(`ATTACH DATABASE ? AS idx`, "file:"+store.IndexPath(path)+"?mode=ro"); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, broker: newFakeBroker(), store: st, db: db}
}

// start runs an ingester until the test ends (or stop is called).
func (h *harness) start(tweak func(*dlq.Config)) (in *dlq.Ingester, stop func()) {
	h.t.Helper()
	cfg := dlq.Config{Broker: h.broker, Catalog: h.store, Namespace: "fake", Poll: 5 * time.Millisecond,
		MinFullInterval: time.Millisecond, MainInterval: time.Millisecond, PageSize: 3,
		Publish: func(c dlq.Change) {
			h.mu.Lock()
			h.changes = append(h.changes, c)
			h.mu.Unlock()
		}}
	if tweak != nil {
		tweak(&cfg)
	}
	in = dlq.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("Run: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return in, stop
}

// waitFor polls cond until it holds or 10 s pass.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// polls waits until the ingester has listed the entities n more times.
func (h *harness) polls(n int64) {
	h.t.Helper()
	target := h.broker.lists.Load() + n
	h.waitFor(fmt.Sprintf("%d polls", n), func() bool { return h.broker.lists.Load() >= target })
}

// present returns the sequence numbers of present messages in (entity, q).
func (h *harness) present(entity string, q int) map[int64]bool {
	h.t.Helper()
	rows, err := h.db.Query(`SELECT m.sequence_number FROM messages m JOIN entities e ON e.id = m.entity_id
		WHERE e.path = ? AND m.subqueue = ? AND m.gone_at IS NULL`, entity, q)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			h.t.Fatal(err)
		}
		out[s] = true
	}
	return out
}

func (h *harness) count(query string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.db.QueryRow(query, args...).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func sameSet(got map[int64]bool, want ...int64) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		if !got[w] {
			return false
		}
	}
	return true
}

const (
	sqMain = 0
	sqDLQ  = 1
	sqTDLQ = 2
)

func TestCatalogsEveryDeadLetterAndNoticesNewAndGone(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	var want []int64
	for range 10 { // more than three pages of three
		want = append(want, h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "SqlTimeout"))
	}
	_, stop := h.start(nil)
	h.waitFor("10 dead letters", func() bool { return sameSet(h.present("orders", sqDLQ), want...) })
	h.waitFor("the pass's cursor saved", func() bool {
		return h.count(`SELECT count(*) FROM cursors WHERE subqueue = 1 AND broker_count = 10`) == 1
	})
	stop()
	curs, err := h.store.Cursors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range curs {
		if c.Entity == "orders" && c.SubQueue == dlq.SubQueueDeadLetter && (c.MaxSeen != want[9] || c.Present != 10 || c.BrokerCount != 10) {
			t.Errorf("stored cursor %+v, want max_seen %d, present 10, broker count 10", c, want[9])
		}
	}
	h.start(nil)

	s := h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "SqlTimeout")
	want = append(want, s)
	h.waitFor("the new dead letter", func() bool { return sameSet(h.present("orders", sqDLQ), want...) })

	h.broker.remove("orders", dlq.SubQueueDeadLetter, want[4])
	h.waitFor("the removed message to be gone", func() bool {
		return h.count(`SELECT count(*) FROM messages WHERE sequence_number = ? AND gone_at IS NOT NULL`, want[4]) == 1
	})
	if n := h.count(`SELECT count(*) FROM messages`); n != 11 {
		t.Errorf("messages rows = %d, want 11 (gone ones are kept, nothing twice)", n)
	}
	if n := h.count(`SELECT present FROM groups WHERE reason = 'SqlTimeout'`); n != 10 {
		t.Errorf("group present = %d, want 10", n)
	}
	if n := h.count(`SELECT total FROM groups WHERE reason = 'SqlTimeout'`); n != 11 {
		t.Errorf("group total = %d, want 11", n)
	}
	if n := h.count(`SELECT sum(present) FROM catalog_counts`); n != 10 {
		t.Errorf("catalog_counts present = %d, want 10", n)
	}
	// The search rows are written behind the message rows (the store's
	// indexer), within a second or when the ingester is idle.
	h.waitFor("the search index to find all 11", func() bool {
		return h.count(`SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'SqlTimeout'`) == 11
	})
}

// TestLateDeadLetterBelowNumbersAlreadyRead is the trap of the package doc:
// a message sent early and dead-lettered late lands below the numbers the
// catalog has already read.
func TestLateDeadLetterBelowNumbersAlreadyRead(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	early := h.broker.send("orders", dlq.SubQueueMain, dlq.StateActive, "") // still being retried
	var dl []int64
	for range 5 {
		s := h.broker.send("orders", dlq.SubQueueMain, dlq.StateActive, "")
		h.broker.deadLetter("orders", s, "Poison")
		dl = append(dl, s)
	}
	h.start(nil)
	h.waitFor("the first dead letters", func() bool { return sameSet(h.present("orders", sqDLQ), dl...) })

	h.broker.deadLetter("orders", early, "MaxDeliveryCountExceeded")
	h.waitFor("the late, low-numbered dead letter", func() bool {
		return sameSet(h.present("orders", sqDLQ), append(dl, early)...)
	})
}

func TestSteadyStatePeeksNothingAndRestartResumes(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	h.broker.addQueue("email")
	for range 7 {
		h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	}
	h.broker.send("email", dlq.SubQueueMain, dlq.StateDeferred, "")
	in, stop := h.start(func(c *dlq.Config) { c.Sweep = time.Hour; c.MinFullInterval = time.Hour })
	h.waitFor("the catalog", func() bool { return len(h.present("orders", sqDLQ)) == 7 && len(h.present("email", sqMain)) == 1 })
	h.waitFor("a healthy status", func() bool { return in.Status().Healthy })

	// Let several polls go by with nothing changing.
	h.polls(5) // lets passes in flight finish
	before := h.broker.peeks.Load()
	h.polls(20)
	if got := h.broker.peeks.Load() - before; got != 0 {
		t.Errorf("steady state made %d peeks, want 0", got)
	}
	stop()

	// A new ingester on the same catalog, with nothing changed, reads
	// nothing again.
	before = h.broker.peeks.Load()
	in2, _ := h.start(func(c *dlq.Config) { c.Sweep = time.Hour; c.MinFullInterval = time.Hour })
	h.waitFor("the restarted ingester to poll", func() bool { return in2.Status().Healthy })
	h.polls(10)
	if got := h.broker.peeks.Load() - before; got != 0 {
		t.Errorf("restart with unchanged counts made %d peeks, want 0", got)
	}
	if n := h.count(`SELECT count(*) FROM messages`); n != 8 {
		t.Errorf("messages = %d after restart, want 8", n)
	}
}

func TestDeferredAndScheduledOfTheMainEntity(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	h.broker.send("orders", dlq.SubQueueMain, dlq.StateActive, "")
	d := h.broker.send("orders", dlq.SubQueueMain, dlq.StateDeferred, "")
	s := h.broker.send("orders", dlq.SubQueueMain, dlq.StateScheduled, "")
	h.broker.send("orders", dlq.SubQueueMain, dlq.StateActive, "")
	h.start(nil)
	h.waitFor("deferred and scheduled only", func() bool { return sameSet(h.present("orders", sqMain), d, s) })
	if n := h.count(`SELECT count(*) FROM messages WHERE group_id IS NOT NULL`); n != 0 {
		t.Errorf("%d main-entity messages in failure groups, want 0", n)
	}

	// The scheduled message activates (with a new number, as Service Bus
	// does): its scheduled copy is gone.
	h.broker.remove("orders", dlq.SubQueueMain, s)
	h.broker.send("orders", dlq.SubQueueMain, dlq.StateActive, "")
	h.waitFor("the scheduled copy to be gone", func() bool { return sameSet(h.present("orders", sqMain), d) })
}

func TestDeletedEntityIsMarkedNotRetried(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	h.broker.addQueue("email")
	h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	h.broker.send("email", dlq.SubQueueDeadLetter, dlq.StateActive, "Y")
	h.start(nil)
	h.waitFor("both", func() bool { return len(h.present("orders", sqDLQ)) == 1 && len(h.present("email", sqDLQ)) == 1 })

	h.broker.deleteEntity("orders")
	h.waitFor("orders deleted", func() bool {
		return h.count(`SELECT count(*) FROM entities WHERE path = 'orders' AND deleted_at IS NOT NULL`) == 1
	})
	if got := h.present("orders", sqDLQ); len(got) != 0 {
		t.Errorf("deleted entity still has present messages %v", got)
	}
	if n := h.count(`SELECT present FROM groups WHERE reason = 'X'`); n != 0 {
		t.Errorf("group of the deleted entity's messages has present = %d, want 0", n)
	}
	// The other entity goes on.
	s := h.broker.send("email", dlq.SubQueueDeadLetter, dlq.StateActive, "Y")
	h.waitFor("email keeps being read", func() bool { return h.present("email", sqDLQ)[s] })

	// Created again: its numbers start at 1 again and are read afresh.
	h.broker.addQueue("orders")
	h.broker.nextSeq["orders"] = 0
	s = h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	h.waitFor("the recreated queue's message", func() bool { return h.present("orders", sqDLQ)[s] })
	if n := h.count(`SELECT count(*) FROM messages m JOIN entities e ON e.id = m.entity_id WHERE e.path = 'orders'`); n != 2 {
		t.Errorf("orders has %d rows, want 2 (one gone, one present)", n)
	}
}

func TestBrokerDownKeepsCatalogAndRecovers(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	in, _ := h.start(func(c *dlq.Config) { c.MaxBackoff = 20 * time.Millisecond })
	h.waitFor("first read", func() bool { return len(h.present("orders", sqDLQ)) == 1 })
	h.waitFor("healthy", func() bool { return in.Status().Healthy })
	ok := in.Status().LastSuccessAt

	h.broker.setFail(fmt.Errorf("dial: %w", dlq.ErrUnreachable))
	h.waitFor("unhealthy", func() bool { return !in.Status().Healthy })
	st := in.Status()
	if st.Error == "" || st.ErrorSince == nil || st.LastSuccessAt == nil || st.LastSuccessAt.Before(*ok) {
		t.Errorf("status while down = %+v, want an error, since, and the last success kept", st)
	}
	if len(h.present("orders", sqDLQ)) != 1 {
		t.Error("catalog lost while the broker is down")
	}

	s := h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	h.broker.setFail(nil)
	h.waitFor("recovered and caught up", func() bool { return in.Status().Healthy && h.present("orders", sqDLQ)[s] })

	h.mu.Lock()
	defer h.mu.Unlock()
	var flips int
	for _, c := range h.changes {
		if c.Kind == dlq.ChangeFreshness {
			flips++
		}
	}
	if flips < 3 { // healthy, unhealthy, healthy
		t.Errorf("freshness changes = %d, want at least 3", flips)
	}
}

func TestChangesPublished(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	h.start(nil)
	s := h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	h.waitFor("a new-message change", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.changes {
			if c.Kind == dlq.ChangeNew && c.Entity == "orders" && c.SubQueue == dlq.SubQueueDeadLetter && len(c.IDs) == 1 {
				return true
			}
		}
		return false
	})
	h.broker.remove("orders", dlq.SubQueueDeadLetter, s)
	h.waitFor("a gone change and a counts change", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		var gone, counts bool
		for _, c := range h.changes {
			gone = gone || c.Kind == dlq.ChangeGone
			counts = counts || (c.Kind == dlq.ChangeCounts && c.Counts != nil && c.Counts.DeadLetter == 0 && c.Entity == "orders")
		}
		return gone && counts
	})
}

// TestNumberingStartsAgainWhileStopped: the queue was deleted and created
// again while dlqdash was not running (or the demo's emulator is new), so
// the same path holds new messages under old sequence numbers.
func TestNumberingStartsAgainWhileStopped(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	for range 3 {
		h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "Old")
	}
	_, stop := h.start(nil)
	h.waitFor("the old messages", func() bool { return len(h.present("orders", sqDLQ)) == 3 })
	stop()

	h.broker.deleteEntity("orders")
	h.broker.addQueue("orders")
	h.broker.nextSeq["orders"] = 0
	for range 2 {
		seq := h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "New")
		h.broker.mu.Lock()
		m := h.broker.entities["orders"].msgs[dlq.SubQueueDeadLetter][seq]
		m.MessageID = "new-" + itoa(seq)
		h.broker.entities["orders"].msgs[dlq.SubQueueDeadLetter][seq] = m
		h.broker.mu.Unlock()
	}
	h.start(nil)
	h.waitFor("only the new messages present", func() bool {
		return h.count(`SELECT count(*) FROM messages WHERE gone_at IS NULL AND message_id LIKE 'new-%'`) == 2 &&
			h.count(`SELECT count(*) FROM messages WHERE gone_at IS NULL`) == 2
	})
	if n := h.count(`SELECT count(*) FROM messages WHERE gone_at IS NOT NULL AND dead_letter_reason = 'Old'`); n != 3 {
		t.Errorf("%d old messages kept as gone, want 3", n)
	}
	if n := h.count(`SELECT present FROM groups WHERE reason = 'Old'`); n != 0 {
		t.Errorf("old group present = %d, want 0", n)
	}
}

func TestRetentionPrunesGoneMessages(t *testing.T) {
	h := newHarness(t)
	h.broker.addQueue("orders")
	keep := h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	drop := h.broker.send("orders", dlq.SubQueueDeadLetter, dlq.StateActive, "X")
	h.start(func(c *dlq.Config) { c.Retention = 50 * time.Millisecond; c.PruneEvery = 10 * time.Millisecond })
	h.waitFor("both cataloged", func() bool { return len(h.present("orders", sqDLQ)) == 2 })

	h.broker.remove("orders", dlq.SubQueueDeadLetter, drop)
	h.waitFor("the removed message pruned with its body and search entry", func() bool {
		return h.count(`SELECT count(*) FROM messages`) == 1 && h.count(`SELECT count(*) FROM bodies`) == 1 &&
			h.count(`SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'X'`) == 1
	})
	if !h.present("orders", sqDLQ)[keep] {
		t.Error("the present message was pruned")
	}
}
