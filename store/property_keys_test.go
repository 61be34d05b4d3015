package store

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// The property keys worth indexing (property_keys.go), on both engines: a
// key whose values are unique per message gets no rows once decided, and
// every filter finds what it found before, whether its keys have rows,
// had rows for some messages before the decision, or lost those too.

// pkMessage is message i (sequence number i+1) of the fixture: traceId and
// seqNo unique per message (two messages share traceId "--", which has no
// token), tenant one of five, flag a boolean.
func pkMessage(i int) (dlq.Message, map[string]string) {
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	props := map[string]string{
		"traceId": fmt.Sprintf("00-%08x-tr%d-01", i*7919, i),
		"seqNo":   strconv.Itoa(i),
		"tenant":  fmt.Sprint("t", i%5),
		"flag":    strconv.FormatBool(i%2 == 0),
	}
	if i == 7 || i == 1900 {
		props["traceId"] = "--"
	}
	m := dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint(i), EnqueuedAt: &at,
		Body: []byte("x"), ApplicationProperties: dlq.EncodeProperties(map[string]any{
			"traceId": props["traceId"], "seqNo": i, "tenant": props["tenant"], "flag": i%2 == 0})}
	return m, props
}

// pkApply ingests messages from through to-1 as one page and waits for the
// indexer.
func pkApply(t *testing.T, s *Store, from, to int) {
	t.Helper()
	var msgs []dlq.Message
	for i := from; i < to; i++ {
		m, _ := pkMessage(i)
		msgs = append(msgs, m)
	}
	if _, err := s.ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: int64(from + 1),
		Through: int64(to), Messages: msgs, SeenAt: time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushIndex(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func pkCount(t *testing.T, s *Store, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.writer.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// pkDecision is key's indexed column: -1 for undecided or unknown.
func pkDecision(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	return pkCount(t, s, `SELECT coalesce((SELECT indexed FROM property_keys WHERE key = ?), -1)`, key)
}

// pkCheck runs each filter as a list (every page), a count and an export,
// and compares them with the fixture's messages 0 through n-1 matched in Go.
func pkCheck(t *testing.T, s *Store, n int, stage string) {
	t.Helper()
	ctx := t.Context()
	tr := func(i int) string { _, p := pkMessage(i); return p["traceId"] }
	filters := [][]dlq.PropertyMatch{
		{{Key: "traceId", Value: tr(5)}},     // a message indexed before the decision
		{{Key: "traceId", Value: tr(n - 3)}}, // one after it
		{{Key: "traceId", Value: "--"}},      // no token: the JSON check alone
		{{Key: "traceId", Value: "00-nope-01"}},
		{{Key: "seqNo", Value: "17"}},
		{{Key: "seqNo", Value: "17"}, {Key: "tenant", Value: "t2"}},
		{{Key: "seqNo", Value: "17"}, {Key: "tenant", Value: "t1"}},
		{{Key: "tenant", Value: "t3"}},
		{{Key: "tenant", Value: "t3"}, {Key: "flag", Value: "false"}},
		{{Key: "traceId", Value: tr(n - 10)}, {Key: "flag", Value: strconv.FormatBool((n-10)%2 == 0)}, {Key: "tenant", Value: fmt.Sprint("t", (n-10)%5)}},
		{{Key: "traceId", Value: tr(n - 10)}, {Key: "flag", Value: strconv.FormatBool((n-10)%2 != 0)}},
	}
	for _, pms := range filters {
		var want []int64
		for i := n - 1; i >= 0; i-- { // list order: newest first
			_, props := pkMessage(i)
			ok := true
			for _, pm := range pms {
				ok = ok && props[pm.Key] == pm.Value
			}
			if ok {
				want = append(want, int64(i+1))
			}
		}
		f := dlq.Filter{Entity: "orders", Properties: pms}
		var got []int64
		cursor := ""
		for {
			recs, next, err := s.ListMessages(ctx, f, 500, cursor)
			if err != nil {
				t.Fatalf("%s: list %v: %v", stage, pms, err)
			}
			for _, r := range recs {
				got = append(got, r.SequenceNumber)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: list %v: %d messages %v, want %d %v", stage, pms, len(got), head(got), len(want), head(want))
		}
		if c, err := s.CountMessages(ctx, f, 0); err != nil || c != int64(len(want)) {
			t.Errorf("%s: count %v: %d, %v; want %d", stage, pms, c, err, len(want))
		}
		var exported int
		if err := s.ExportMessages(ctx, f, func(dlq.Record) error { exported++; return nil }); err != nil || exported != len(want) {
			t.Errorf("%s: export %v: %d, %v; want %d", stage, pms, exported, err, len(want))
		}
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 5)] }

func TestPropertyKeysWorthIndexing(t *testing.T) { ForEachEngine(t, testPropertyKeysWorthIndexing) }

func testPropertyKeysWorthIndexing(t *testing.T, engine string) {
	ctx := t.Context()
	s := OpenFresh(t, engine)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}

	// 300 messages: too few to decide the unique keys, which have rows;
	// tenant and flag repeat their values and are decided indexed early.
	pkApply(t, s, 0, 300)
	for key, want := range map[string]int64{"traceId": -1, "seqNo": -1, "tenant": 1, "flag": 1} {
		if got := pkDecision(t, s, key); got != want {
			t.Errorf("after 300 messages %s is decided %d, want %d", key, got, want)
		}
	}
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties WHERE key = 'traceId'`); got != 300 {
		t.Errorf("after 300 messages traceId has %d rows, want 300 (undecided keys have rows)", got)
	}
	pkCheck(t, s, 300, "undecided")

	// 2,000 more: seen 2,300 times with 2,299 values, traceId and seqNo
	// are decided not indexed, before this batch's rows are written.
	pkApply(t, s, 300, 2300)
	for key, want := range map[string]int64{"traceId": 0, "seqNo": 0, "tenant": 1, "flag": 1} {
		if got := pkDecision(t, s, key); got != want {
			t.Errorf("after 2,300 messages %s is decided %d, want %d", key, got, want)
		}
	}
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties WHERE key = 'traceId'`); got != 300 {
		t.Errorf("after the decision traceId has %d rows, want the 300 written before it", got)
	}
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties WHERE key = 'tenant'`); got != 2300 {
		t.Errorf("tenant has %d rows, want 2300", got)
	}
	if got := pkCount(t, s, `SELECT count(*) FROM property_key_values`); got != 0 {
		t.Errorf("%d sampled values left after every key was decided", got)
	}
	pkCheck(t, s, 2300, "decided")

	// The rows written before the decision are purged once it is old
	// enough, in bounded batches; the results do not change.
	old := purgeAfter
	purgeAfter = 0
	t.Cleanup(func() { purgeAfter = old })
	if err := s.catchUpIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties WHERE key IN ('traceId', 'seqNo')`); got != 0 {
		t.Errorf("after the purge the keys not indexed have %d rows", got)
	}
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties`); got != 2*2300 {
		t.Errorf("after the purge %d property rows, want tenant's and flag's 4600", got)
	}
	pkCheck(t, s, 2300, "purged")

	// New messages: still no rows for the keys not indexed.
	pkApply(t, s, 2300, 2400)
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties WHERE key IN ('traceId', 'seqNo')`); got != 0 {
		t.Errorf("new messages wrote %d rows of keys not indexed", got)
	}
	pkCheck(t, s, 2400, "after")
}

// TestPropertyKeysSurviveReopen: the decisions are durable: a store opened
// again writes no rows for a key decided not indexed.
func TestPropertyKeysSurviveReopen(t *testing.T) { ForEachEngine(t, testPropertyKeysSurviveReopen) }

func testPropertyKeysSurviveReopen(t *testing.T, engine string) {
	ctx := t.Context()
	target := FreshTarget(t, engine)
	s, err := Open(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	pkApply(t, s, 0, 2100)
	if got := pkDecision(t, s, "traceId"); got != 0 {
		t.Fatalf("traceId decided %d, want 0", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pkApply(t, s, 2100, 2200)
	if got := pkCount(t, s, `SELECT count(*) FROM message_properties WHERE key = 'traceId'`); got != 0 {
		t.Errorf("after reopening traceId has %d rows", got)
	}
	pkCheck(t, s, 2200, "reopened")
}

// TestCopyCarriesPropertyKeys: store copy carries the decisions over: the
// destination knows which keys have no rows, has none of them (neither the
// rows the source wrote before its decision nor any of the tail its
// indexer had not indexed), and answers every filter as the source does.
func TestCopyCarriesPropertyKeys(t *testing.T) {
	if !slices.Contains(Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	path := FreshTarget(t, "sqlite")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	pkApply(t, s, 0, 300)
	pkApply(t, s, 300, 2300) // traceId and seqNo decided; 300 rows of each left
	PauseIndexerForTest(s)
	var tail []dlq.Message
	for i := 2300; i < 2400; i++ {
		m, _ := pkMessage(i)
		tail = append(tail, m)
	}
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 2301, Through: 2400,
		Messages: tail, SeenAt: time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if err := CrashForTest(s); err != nil { // the tail stays unindexed
		t.Fatal(err)
	}
	src, err := OpenReadOnly(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if got := pkCount(t, src, `SELECT count(*) FROM message_properties WHERE key = 'traceId'`); got != 300 {
		t.Fatalf("the source has %d traceId rows, want the 300 from before the decision", got)
	}
	dst := OpenFresh(t, "postgres")
	for run := range 2 { // a second run changes nothing, and verifies
		if err := src.CopyTo(ctx, dst, nil); err != nil {
			t.Fatalf("copy %d: %v", run+1, err)
		}
	}
	for key, want := range map[string]int64{"traceId": 0, "seqNo": 0, "tenant": 1, "flag": 1} {
		if got := pkDecision(t, dst, key); got != want {
			t.Errorf("on the copy %s is decided %d, want %d", key, got, want)
		}
	}
	if got := pkCount(t, dst, `SELECT count(*) FROM message_properties WHERE key IN ('traceId', 'seqNo')`); got != 0 {
		t.Errorf("the copy has %d rows of keys not indexed", got)
	}
	if got := pkCount(t, dst, `SELECT count(*) FROM message_properties WHERE key = 'tenant'`); got != 2400 {
		t.Errorf("the copy has %d tenant rows, want 2400 (the tail's too)", got)
	}
	pkCheck(t, dst, 2400, "copy")
}

// TestPropertyKeyPurgeByDatabaseClock: the rows a key had before it was
// decided not indexed go purgeAfter after the decision, both times read
// from the database's clock, so that on PostgreSQL the replica that
// decided and the one that purges agree even when their own clocks do not.
func TestPropertyKeyPurgeByDatabaseClock(t *testing.T) {
	ForEachEngine(t, testPropertyKeyPurgeByDatabaseClock)
}

func testPropertyKeyPurgeByDatabaseClock(t *testing.T, engine string) {
	ctx := t.Context()
	s, err := Open(ctx, FreshTarget(t, engine), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	pkApply(t, s, 0, 300)
	pkApply(t, s, 300, 2300) // traceId and seqNo decided not indexed, 300 rows each from before
	dbNow := pkCount(t, s, `SELECT `+s.eng.dbClockMillis())
	decided := pkCount(t, s, `SELECT decided_at FROM property_keys WHERE key = 'traceId'`)
	if decided > dbNow || dbNow-decided > time.Minute.Milliseconds() {
		t.Fatalf("traceId decided at %d, the database's time is %d: want a moment before it, in Unix ms", decided, dbNow)
	}
	unindexed := `SELECT count(*) FROM message_properties WHERE key IN ('traceId', 'seqNo')`
	// decidedAgo moves the decisions back by d on the database's clock,
	// and lets the indexer run.
	decidedAgo := func(d time.Duration) {
		t.Helper()
		if _, err := s.writer.ExecContext(ctx, `UPDATE property_keys SET decided_at = `+s.eng.dbClockMillis()+` - ? WHERE indexed = 0`,
			d.Milliseconds()); err != nil {
			t.Fatal(err)
		}
		if err := s.catchUpIndex(ctx); err != nil {
			t.Fatal(err)
		}
	}
	decidedAgo(purgeAfter - 10*time.Second)
	if got := pkCount(t, s, unindexed); got != 600 {
		t.Errorf("%s after the decision: %d rows of the keys not indexed, want the 600 from before it kept", purgeAfter-10*time.Second, got)
	}
	decidedAgo(purgeAfter + time.Second)
	if got := pkCount(t, s, unindexed); got != 0 {
		t.Errorf("%s after the decision: %d rows of the keys not indexed are left, want them purged", purgeAfter+time.Second, got)
	}
	pkCheck(t, s, 2300, "purged")
}
