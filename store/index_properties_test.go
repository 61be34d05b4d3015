package store

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// propertyRowsSQL is how the SQLite indexer wrote the property rows before
// it walked the properties in Go (and what migration 0013's backfill
// still does): SQLite's own json_each, a string's characters or anything
// else's JSON text, values over maxIndexedValue bytes left out. Kept as the
// reference the Go walk is compared with.
const propertyRowsSQL = `SELECT DISTINCT key, value, at, id FROM (
	SELECT j.key AS key, CASE j.type WHEN 'text' THEN j.value ELSE m.properties -> j.fullkey END AS value,
		coalesce(m.enqueued_at, -1) AS at, m.id AS id
	FROM messages m, json_each(m.properties) j
	WHERE json_valid(m.properties) AND json_type(m.properties) = 'object'
) WHERE length(CAST(value AS BLOB)) <= 256`

// TestIndexerPropertyRows: the SQLite indexer's property rows, built in Go
// (index_properties.go), in several index transactions (the batch bound
// made small).
//
//   - For objects whose keys are distinct and not empty (what
//     dlq.EncodeProperties writes from a map), they are the rows SQLite's
//     json_each gave (propertyRowsSQL): hand-picked objects (escapes,
//     nested values with whitespace, numbers as written, values at and past
//     maxIndexedValue, non-objects) and 2,000 random ones.
//   - For an object that repeats a key or has an empty one, json_each's
//     path lookup answers with the first occurrence, or with nothing for
//     the empty key; the rows are propertyPairs' (each pair as written),
//     as on PostgreSQL, so both engines hold the same rows.
//   - Pruning every message deletes every row, edge cases included: the
//     prune finds the rows by the same walk.
func TestIndexerPropertyRows(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "rows.db"))
	s.batchMax = 700
	ctx := t.Context()
	long := `"` + string(slices.Repeat([]byte("v"), maxIndexedValue)) + `"`
	plain := []string{
		``, `null`, `[]`, `"x"`, `12`, `{}`, ` { } `, `{"a":1}`, `{"a": "b", "b": "b"}`,
		"{\"t\":\"a\\tb\", \"u\":\"\\u00e9\\ud83d\\ude00\"}", `{"n": -1.50e+10, "t": true, "f": false, "z": null}`,
		"{ \"o\" : { \"x\" : [ 1 , \"a b\" , { } ] } ,\n\"s\":\"q\\\"}\"}", `{"deep":[[[["x"]]]],"e":{}}`,
		`{"long":` + long + `,"longer":` + long[:len(long)-1] + `x"}`, `{"k":""}`, `{"dotted.key":1,"q\"uote":2,"$":3}`,
		`{"big":12345678901234567890,"small":0.000001,"exp":1E9}`,
	}
	edge := []string{`{"a":"b","a":"b"}`, `{"a":"b","a":"c"}`, `{"a":"b","a":false}`, `{"a":{"x":1},"a":[2]}`,
		`{"":"text"}`, `{"":1}`, `{"":{"x":1},"k":"v"}`}
	r := rand.New(rand.NewPCG(7, 8))
	for len(plain) < 2000 {
		// Valid UTF-8 only: the ingest stores what dlq.EncodeProperties
		// (encoding/json) writes, which never holds invalid UTF-8.
		c := randomObject(r, 0)
		if containsReplacement(c) {
			continue
		}
		if keysDistinct(c) {
			plain = append(plain, c)
		} else {
			edge = append(edge, c)
		}
	}
	if len(edge) < 20 {
		t.Fatalf("only %d random objects with a repeated or empty key", len(edge))
	}
	cases := slices.Concat(plain, edge)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	var msgs []dlq.Message
	for i, c := range cases {
		enq := at.Add(time.Duration(i%50) * time.Second) // ties in at, ordered by id
		m := dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: "m", Body: []byte("x"),
			ApplicationProperties: []byte(c)}
		if i%10 != 3 {
			m.EnqueuedAt = &enq
		}
		msgs = append(msgs, m)
	}
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 1, Through: int64(len(msgs)),
		Messages: msgs, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}

	// Keys decided not indexed have no rows: compare the others.
	notIndexed := ` AND key NOT IN (SELECT key FROM property_keys WHERE indexed = 0)`
	firstEdge := strconv.Itoa(len(plain)) // the messages' ids are 1…len(cases), in order
	got := readRows(t, s, `SELECT key, value, at, message_id FROM message_properties WHERE message_id <= `+firstEdge+notIndexed)
	want := readRows(t, s, `SELECT * FROM (`+propertyRowsSQL+`) WHERE id <= `+firstEdge+notIndexed)
	if len(want) < len(plain) {
		t.Fatalf("the fixture gives only %d rows", len(want))
	}
	compareRows(t, "objects with distinct keys, against json_each", got, want)

	got = readRows(t, s, `SELECT key, value, at, message_id FROM message_properties WHERE message_id > `+firstEdge+notIndexed)
	skip := map[string]bool{}
	for _, k := range readRows(t, s, `SELECT key, '', '', '' FROM property_keys WHERE indexed = 0`) {
		skip[k[0]] = true
	}
	want = nil
	for i, c := range edge {
		m := msgs[len(plain)+i]
		enq := int64(-1)
		if m.EnqueuedAt != nil {
			enq = m.EnqueuedAt.UnixMilli()
		}
		for _, row := range appendPropertyRows(nil, []byte(c), enq, int64(len(plain)+i+1), skip, false) {
			want = append(want, [4]string{row[0].(string), row[1].(string), strconv.FormatInt(row[2].(int64), 10),
				strconv.FormatInt(row[3].(int64), 10)})
		}
	}
	slices.SortFunc(want, func(a, b [4]string) int { return slices.Compare(a[:], b[:]) })
	compareRows(t, "objects with a repeated or empty key, against propertyPairs", got, want)

	// Every message gone, then pruned: no row is left behind.
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 1, Through: math.MaxInt64,
		SeenAt: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := s.PruneGone(ctx, at.Add(time.Hour), 500)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if left := readRows(t, s, `SELECT key, value, at, message_id FROM message_properties`); len(left) != 0 {
		t.Errorf("%d property rows left after every message was pruned, first %q", len(left), left[0])
	}
}

// readRows reads four columns of q's rows, as text, in order.
func readRows(t *testing.T, s *Store, q string) [][4]string {
	t.Helper()
	rows, err := s.reader.QueryContext(context.Background(), q+` ORDER BY 1, 2, 3, 4`)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][4]string
	for rows.Next() {
		var r [4]string
		if err := rows.Scan(&r[0], &r[1], &r[2], &r[3]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func compareRows(t *testing.T, what string, got, want [][4]string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	in := func(rows [][4]string) map[[4]string]bool {
		m := map[[4]string]bool{}
		for _, r := range rows {
			m[r] = true
		}
		return m
	}
	g, w := in(got), in(want)
	shown := 0
	for _, r := range got {
		if !w[r] && shown < 10 {
			t.Errorf("unexpected row %q", r)
			shown++
		}
	}
	for _, r := range want {
		if !g[r] && shown < 20 {
			t.Errorf("missing row %q", r)
			shown++
		}
	}
}

// keysDistinct reports whether a JSON object's top-level keys are all
// different and not empty (true for what is not an object).
func keysDistinct(js string) bool {
	seen := map[string]bool{}
	ok := true
	eachPropertyValue([]byte(js), func(key, _ []byte) {
		if len(key) == 0 || seen[string(key)] {
			ok = false
		}
		seen[string(key)] = true
	})
	return ok
}

func containsReplacement(s string) bool {
	for _, r := range s {
		if r == '\uFFFD' {
			return true
		}
	}
	return false
}

// TestPropertyRowDelete: retention's DELETE of property rows by their whole
// key (writePropertyRows with deletePropertyRows) deletes exactly the rows
// named, not their neighbours that differ in one column only, in statements
// of propertyInsertRows rows and a shorter last one; and each statement
// finds its rows by the primary key (SQLite 3.40's planner scanned the
// whole table for a row value IN (VALUES …): a prune batch would then read
// every property row of the catalog a statement).
func TestPropertyRowDelete(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "del.db"))
	ctx := t.Context()
	// Rows k{0,1} × v{0,1} × at{0,1} × id 1…300: every row has neighbours
	// that differ in one column.
	var strs = []string{"k0", "k1", "v0", "v1"}
	var all []propertyRow
	for k := uint32(0); k < 2; k++ {
		for v := uint32(2); v < 4; v++ {
			for at := int64(0); at < 2; at++ {
				for id := int64(1); id <= 300; id++ {
					all = append(all, propertyRow{key: k, value: v, at: at, id: id})
				}
			}
		}
	}
	tx, err := s.idxdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := writePropertyRows(ctx, tx, insertPropertyRows, strs, all); err != nil {
		t.Fatal(err)
	}
	// Delete one row in three (propertyInsertRows + a shorter statement).
	var gone []propertyRow
	left := map[[4]string]bool{}
	for i, r := range all {
		if i%3 == 0 {
			gone = append(gone, r)
		} else {
			left[[4]string{strs[r.key], strs[r.value], strconv.FormatInt(r.at, 10), strconv.FormatInt(r.id, 10)}] = true
		}
	}
	if len(gone) <= propertyInsertRows || len(gone)%propertyInsertRows == 0 {
		t.Fatalf("%d rows to delete: want more than one statement and a short last one", len(gone))
	}
	if err := writePropertyRows(ctx, tx, deletePropertyRows, strs, gone); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, value, at, message_id FROM idx.message_properties`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var r [4]string
		if err := rows.Scan(&r[0], &r[1], &r[2], &r[3]); err != nil {
			t.Fatal(err)
		}
		if !left[r] {
			t.Errorf("row %q was to be deleted", r)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if n != len(left) {
		t.Errorf("%d rows left, want %d", n, len(left))
	}

	for _, m := range []int{propertyInsertRows, 3} {
		args := make([]any, 0, 4*m)
		for _, r := range gone[:m] {
			args = append(args, strs[r.key], strs[r.value], r.at, r.id)
		}
		plan, err := tx.QueryContext(ctx, `EXPLAIN QUERY PLAN `+deletePropertyRows+placeholders(m, 4)+`)`, args...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for plan.Next() {
			var id, parent, notused int
			var detail string
			if err := plan.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		plan.Close()
		const want = "SEARCH idx.message_properties USING PRIMARY KEY (key=? AND value=? AND at=? AND message_id=?)"
		if len(lines) == 0 || lines[0] != want {
			t.Errorf("the DELETE of %d rows: plan %q, want it to start with %q", m, strings.Join(lines, "; "), want)
		}
	}
}
