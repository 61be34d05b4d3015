package store

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// propertyFixture is a catalog of 40 messages of queue "orders" with
// properties of every JSON type, some not an object, one value too long to
// index.
func propertyFixture(t *testing.T, engine string) *Store {
	t.Helper()
	ctx := t.Context()
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	s := OpenFresh(t, engine)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
		t.Fatal(err)
	}
	var msgs []dlq.Message
	for i := range 40 {
		enq := at.Add(time.Duration(i) * time.Second)
		m := dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint(i), Body: []byte("x")}
		if i%7 != 0 {
			m.EnqueuedAt = &enq // some without: sort key -1
		}
		switch i % 10 {
		case 8:
			m.ApplicationProperties = []byte(`[1, 2]`)
		case 9:
			m.ApplicationProperties = []byte(`{"tenant": "t9", "broken"`)
		default:
			m.ApplicationProperties = dlq.EncodeProperties(map[string]any{
				"tenant": fmt.Sprintf("t%d", i%3), "n": float64(i) + 0.5, "ok": i%2 == 0, "nil": nil,
				"obj": map[string]any{"a": i % 2}, "long": strings.Repeat("y", 250+i%10), "dotted.key": "v",
			})
		}
		msgs = append(msgs, m)
	}
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 0, Through: math.MaxInt64,
		Messages: msgs, SeenAt: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// The property rows are written behind the insert (ingest_index.go).
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func propertyRowsNow(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.writer.QueryContext(t.Context(), `SELECT key, value, at, message_id FROM message_properties`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, v string
		var at, id int64
		if err := rows.Scan(&k, &v, &at, &id); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%q=%q@%d#%d", k, v, at, id))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The rows an insert writes are the rows migration 0013's backfill makes of
// the same messages, and what they hold is what the JSON check compares.
func TestMessagePropertiesInsertMatchesBackfill(t *testing.T) {
	ForEachEngine(t, testMessagePropertiesInsertMatchesBackfill)
}

func testMessagePropertiesInsertMatchesBackfill(t *testing.T, engine string) {
	s := propertyFixture(t, engine)
	ctx := t.Context()
	inserted := propertyRowsNow(t, s)
	// 32 messages with an object: 6 indexed properties each (long is
	// indexed up to 256 bytes: i%10 of 0..6 of them).
	if len(inserted) < 32*6 {
		t.Fatalf("%d property rows", len(inserted))
	}
	for _, want := range []string{`"tenant"="t1"@`, `"n"="1.5"@`, `"ok"="true"@`, `"nil"="null"@`, `"obj"="{\"a\":1}"@`, `"dotted.key"="v"@`} {
		if !slices.ContainsFunc(inserted, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("no row %s in %d rows", want, len(inserted))
		}
	}
	for _, r := range inserted {
		if strings.Contains(r, `"t9"`) || strings.HasPrefix(r, `"long"=`) && len(r) > 256+40 {
			t.Errorf("unexpected row %s", r)
		}
	}
	// Every row's value is what the JSON check of a property filter
	// computes for its message (on PostgreSQL, its JSON function's: the
	// rows are written from Go there).
	check := `CASE json_type(m.properties, '$."' || p.key || '"') WHEN 'text'
			THEN json_extract(m.properties, '$."' || p.key || '"') ELSE m.properties -> ('$."' || p.key || '"') END`
	if s.eng.postgres {
		check = `dlqdash_json_text(m.properties, p.key)`
	}
	var mismatches int
	err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM message_properties p JOIN messages m ON m.id = p.message_id
		WHERE `+check+` IS DISTINCT FROM p.value OR p.at <> coalesce(m.enqueued_at, -1)`).Scan(&mismatches)
	if err != nil || mismatches != 0 {
		t.Errorf("%d rows differ from their message's JSON, %v", mismatches, err)
	}
	if s.eng.postgres {
		return // no backfill: every PostgreSQL catalog starts at the newest schema
	}
	// The same statement as the migration's.
	ddl, err := migrationFiles.ReadFile("migrations/0013_message_properties.sql")
	if err != nil {
		t.Fatal(err)
	}
	backfill := string(ddl)[strings.Index(string(ddl), "INSERT OR IGNORE"):]
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM message_properties`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, backfill); err != nil {
		t.Fatal(err)
	}
	if got := propertyRowsNow(t, s); !slices.Equal(got, inserted) {
		t.Errorf("backfill:\n%v\ninsert:\n%v", got, inserted)
	}
}

// Pruning a gone message deletes its property rows, and nothing else's.
func TestPruneGoneDeletesPropertyRows(t *testing.T) {
	ForEachEngine(t, testPruneGoneDeletesPropertyRows)
}

func testPruneGoneDeletesPropertyRows(t *testing.T, engine string) {
	s := propertyFixture(t, engine)
	ctx := t.Context()
	before := propertyRowsNow(t, s)
	at := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	// A page of messages 1..20 only: 21..40 are gone.
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 21, Through: 40, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneGone(ctx, at.Add(time.Hour), 1000)
	if err != nil || n != 20 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	var left, orphans int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE message_id NOT IN (SELECT id FROM messages))
		FROM message_properties`).Scan(&left, &orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 || left == 0 || left >= len(before) {
		t.Errorf("%d of %d property rows left, %d of deleted messages", left, len(before), orphans)
	}
}

// A property filter drives a page through message_properties' key, in list
// order (no sort), unless an index of messages has fewer rows; a property
// no message has matches nothing without a walk.
func TestPropertyDriverPlans(t *testing.T) { ForEachEngine(t, testPropertyDriverPlans) }

func testPropertyDriverPlans(t *testing.T, engine string) {
	s := propertyFixture(t, engine)
	ctx := t.Context()
	props := func(kv ...string) []dlq.PropertyMatch {
		var out []dlq.PropertyMatch
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, dlq.PropertyMatch{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	since := time.Date(2026, 11, 26, 3, 0, 10, 0, time.UTC)
	for _, f := range []dlq.Filter{
		{Properties: props("tenant", "t1")},
		{Properties: props("ok", "true", "tenant", "t1")},
		{Properties: props("tenant", "t2"), Since: &since, SubQueue: dlq.SubQueueDeadLetter},
	} {
		p, err := s.planList(ctx, f, DefaultListLimit)
		if err != nil {
			t.Fatal(err)
		}
		if p.prop == nil {
			t.Errorf("%+v: not driven by a property (%s)", f, p.index)
			continue
		}
		if s.eng.postgres {
			continue // PostgreSQL plans the query itself (no EXPLAIN QUERY PLAN)
		}
		where, args := p.bounded(&pageKey{at: time.Date(2026, 11, 26, 3, 0, 30, 0, time.UTC).UnixMilli(), id: 30})
		key, id := p.keys()
		var plan strings.Builder
		rows, err := s.reader.QueryContext(ctx, "EXPLAIN QUERY PLAN SELECT m.id FROM "+p.from()+" "+recordJoins+whereClause(where)+
			" ORDER BY "+key+" DESC, "+id+" DESC LIMIT 51", args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, b, c int
			var d string
			if err := rows.Scan(&a, &b, &c, &d); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(d + "\n")
		}
		rows.Close()
		if !strings.Contains(plan.String(), "SEARCH p USING PRIMARY KEY (key=? AND value=? AND at") || strings.Contains(plan.String(), "TEMP B-TREE") {
			t.Errorf("%+v: plan\n%s", f, plan.String())
		}
	}
	// An empty filter value of a key no message has: nothing to walk.
	p, err := s.planList(ctx, dlq.Filter{Properties: props("tenant", "nobody")}, DefaultListLimit)
	if err != nil || !p.empty {
		t.Errorf("a value no message has: %+v, %v", p, err)
	}
	// A long value is checked in the JSON (and still found).
	long := strings.Repeat("y", 257)
	recs, _, err := s.ListMessages(ctx, dlq.Filter{Properties: props("long", long)}, 50, "")
	if err != nil || len(recs) != 4 { // i%10 == 7 of 40, all objects
		t.Errorf("long value: %d, %v", len(recs), err)
	}
}
