package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// fixture is a catalog filled by storetest, with the records as inserted
// (IDs set) so that tests can compute what each query should return.
type fixture struct {
	s    *store.Store
	path string
	recs []dlq.Record
}

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// newFixture builds a catalog of n random records over a few entities, with
// everything the filters look at varied: subqueues, states, reasons and
// descriptions (so groups), properties of every JSON type, words in bodies,
// missing and equal enqueued times, gone messages, binary bodies.
func newFixture(t *testing.T, n int) *fixture { return newFixtureOn(t, "sqlite", n) }

// newFixtureOn is newFixture on engine (store.Engines).
func newFixtureOn(t *testing.T, engine string, n int) *fixture {
	t.Helper()
	path := store.FreshTarget(t, engine)
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	entities := []string{"orders", "payments/Subscriptions/audit", "email", "invoices"}
	reasons := []string{"MaxDeliveryCountExceeded", "SqlTimeout", "ValidationFailed", "<script>alert(1)</script>"}
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	var recs []dlq.Record
	for i := range n {
		var r dlq.Record
		r.Entity = entities[rng.IntN(len(entities))]
		switch rng.IntN(10) {
		case 0:
			r.SubQueue, r.State = dlq.SubQueueMain, dlq.StateDeferred
		case 1:
			r.SubQueue, r.State = dlq.SubQueueMain, dlq.StateScheduled
			r.ScheduledEnqueueAt = ptr(t0.Add(48 * time.Hour))
		case 2:
			r.SubQueue, r.State = dlq.SubQueueTransferDeadLetter, dlq.StateActive
		default:
			r.SubQueue, r.State = dlq.SubQueueDeadLetter, dlq.StateActive
		}
		r.SequenceNumber = int64(i + 1)
		r.MessageID = fmt.Sprintf("msg-%d", i)
		if rng.IntN(3) == 0 {
			r.Subject = ptr("OrderCreated")
		}
		switch rng.IntN(20) {
		case 0: // no enqueued time
		case 1, 2: // many share one instant: ties break by id
			r.EnqueuedAt = ptr(t0)
		default:
			r.EnqueuedAt = ptr(t0.Add(time.Duration(rng.IntN(100000)) * time.Second))
		}
		if r.SubQueue != dlq.SubQueueMain {
			r.DeadLetterReason = ptr(reasons[rng.IntN(len(reasons))])
			r.DeadLetterErrorDescription = ptr(fmt.Sprintf("failed after %d ms on %s", rng.IntN(5000), words[rng.IntN(3)]))
		}
		props := map[string]any{
			"tenant":      fmt.Sprintf("t%d", rng.IntN(5)),
			"retries":     rng.IntN(3),
			"flag":        rng.IntN(2) == 0,
			"dotted.key":  words[rng.IntN(2)],
			"big":         uint64(18446744073709551615) - uint64(rng.IntN(2)),
			"html<&>":     "<b>" + words[rng.IntN(2)] + "</b>",
			"ratio":       0.5,
			"quote\"key":  "x",
			"line\nbreak": "a\nb",
		}
		if rng.IntN(4) == 0 {
			delete(props, "tenant")
		}
		r.ApplicationProperties = dlq.EncodeProperties(props)
		switch rng.IntN(8) {
		case 0:
			r.Body = []byte{0, 1, 2, 0xff, 0xfe}
		case 1:
			r.Body = []byte(`<img src=x onerror=alert(1)> ` + words[rng.IntN(len(words))])
			r.ContentType = ptr("text/html")
		default:
			r.Body = []byte(fmt.Sprintf(`{"n":%d,"note":"%s %s"}`, i, words[rng.IntN(len(words))], words[rng.IntN(len(words))]))
			r.ContentType = ptr("application/json")
		}
		r.FirstSeenAt = t0.Add(time.Duration(i) * time.Second)
		r.LastSeenAt = r.FirstSeenAt.Add(time.Minute)
		if rng.IntN(8) == 0 {
			r.GoneAt = ptr(r.LastSeenAt.Add(time.Hour))
		}
		r.ReplayCount = rng.IntN(2)
		recs = append(recs, r)
	}
	ids := storetest.Insert(t, path, recs...)
	for i := range recs {
		recs[i].ID = ids[i]
		recs[i].BodySize = int64(len(recs[i].Body))
		if g, ok := dlq.GroupOf(&recs[i].Message, recs[i].SubQueue); ok {
			recs[i].GroupID = g.ID
		}
	}
	return &fixture{s: s, path: path, recs: recs}
}

// tokens splits text the way the unicode61 tokenizer does for ASCII.
func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}

// propertyText is what a property filter compares: a string's characters,
// anything else its JSON text.
func propertyText(props json.RawMessage, key string) (string, bool) {
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(props))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		panic(err)
	}
	v, ok := m[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	return string(v), true
}

// want is the reference: the records f matches, in list order.
func (fx *fixture) want(f dlq.Filter) []int64 {
	var out []dlq.Record
	for _, r := range fx.recs {
		if !matches(r, f) {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b dlq.Record) int {
		ka, kb := int64(-1), int64(-1)
		if a.EnqueuedAt != nil {
			ka = a.EnqueuedAt.UnixMilli()
		}
		if b.EnqueuedAt != nil {
			kb = b.EnqueuedAt.UnixMilli()
		}
		if ka != kb {
			return -cmpInt(ka, kb)
		}
		return -cmpInt(a.ID, b.ID)
	})
	ids := []int64{}
	for _, r := range out {
		ids = append(ids, r.ID)
	}
	return ids
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func matches(r dlq.Record, f dlq.Filter) bool {
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	switch {
	case !f.IncludeGone && r.GoneAt != nil,
		f.Entity != "" && r.Entity != f.Entity,
		f.SubQueue != "" && r.SubQueue != f.SubQueue,
		f.State != "" && r.State != f.State,
		f.Reason != "" && deref(r.DeadLetterReason) != f.Reason,
		f.Group != "" && r.GroupID != f.Group,
		f.Since != nil && (r.EnqueuedAt == nil || r.EnqueuedAt.Before(*f.Since)),
		f.Until != nil && (r.EnqueuedAt == nil || !r.EnqueuedAt.Before(*f.Until)):
		return false
	}
	for _, pm := range f.Properties {
		if v, ok := propertyText(r.ApplicationProperties, pm.Key); !ok || v != pm.Value {
			return false
		}
	}
	if f.Query != "" {
		text := ""
		if !bytes.ContainsRune(r.Body, 0) && !f.QueryNotBodies {
			text = string(r.Body)
		}
		have := tokens(text + " " + deref(r.DeadLetterReason) + " " + deref(r.DeadLetterErrorDescription) + " " + string(r.ApplicationProperties))
		for _, w := range tokens(f.Query) {
			if !slices.Contains(have, w) {
				return false
			}
		}
	}
	return true
}

// listAll walks every page of f with the given page size.
func listAll(t *testing.T, s *store.Store, f dlq.Filter, limit int) []int64 {
	t.Helper()
	ids := []int64{}
	seen := map[int64]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("pagination does not end")
		}
		recs, next, err := s.ListMessages(t.Context(), f, limit, cursor)
		if err != nil {
			t.Fatalf("ListMessages(%+v): %v", f, err)
		}
		if len(recs) > limit {
			t.Fatalf("page of %d rows, limit %d", len(recs), limit)
		}
		if next != "" && len(recs) != limit {
			t.Fatalf("short page (%d of %d) with a next cursor", len(recs), limit)
		}
		for _, r := range recs {
			if seen[r.ID] {
				t.Fatalf("message %d on two pages", r.ID)
			}
			seen[r.ID] = true
			if r.Body != nil {
				t.Fatalf("list returned the body of message %d", r.ID)
			}
			ids = append(ids, r.ID)
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

// referenceFilters are the filters the reference test compares, alone and
// combined, including ones that match nothing.
func referenceFilters(fx *fixture) []dlq.Filter {
	group := fx.recs[slices.IndexFunc(fx.recs, func(r dlq.Record) bool { return r.GroupID != "" })].GroupID
	since, until := t0.Add(20000*time.Second), t0.Add(60000*time.Second)
	return []dlq.Filter{
		{},
		{IncludeGone: true},
		{Entity: "orders"},
		{Entity: "payments/Subscriptions/audit", IncludeGone: true},
		{SubQueue: dlq.SubQueueDeadLetter},
		{SubQueue: dlq.SubQueueTransferDeadLetter},
		{SubQueue: dlq.SubQueueMain},
		{State: dlq.StateActive},
		{State: dlq.StateDeferred},
		{State: dlq.StateScheduled, IncludeGone: true},
		{SubQueue: dlq.SubQueueMain, State: dlq.StateActive},
		{Reason: "SqlTimeout"},
		{Reason: "<script>alert(1)</script>", Entity: "email"},
		{Reason: "NoSuchReason"},
		{Group: group},
		{Group: group, IncludeGone: true, Entity: "orders"},
		{Group: "0000000000000000"},
		{Since: &since},
		{Until: &until},
		{Since: &since, Until: &until, Entity: "invoices"},
		{Since: &until, Until: &since},
		{Query: "alpha"},
		{Query: "ALPHA bravo"},
		{Query: "sqltimeout"},
		{Query: "charlie", Entity: "orders", SubQueue: dlq.SubQueueDeadLetter},
		{Query: "t3"}, // a property value
		{Query: "onerror"},
		{Query: "alpha", QueryNotBodies: true},
		{Query: "sqltimeout", QueryNotBodies: true},
		{Query: "t3 alpha", QueryNotBodies: true},
		{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}}},
		{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}, {Key: "flag", Value: "true"}}},
		{Properties: []dlq.PropertyMatch{{Key: "retries", Value: "2"}}},
		{Properties: []dlq.PropertyMatch{{Key: "big", Value: "18446744073709551615"}}},
		{Properties: []dlq.PropertyMatch{{Key: "big", Value: "18446744073709551614"}, {Key: "flag", Value: "false"}}},
		{Properties: []dlq.PropertyMatch{{Key: "ratio", Value: "0.5"}}},
		{Properties: []dlq.PropertyMatch{{Key: "dotted.key", Value: "bravo"}}},
		{Properties: []dlq.PropertyMatch{{Key: "html<&>", Value: "<b>alpha</b>"}}},
		{Properties: []dlq.PropertyMatch{{Key: "quote\"key", Value: "x"}}},
		{Properties: []dlq.PropertyMatch{{Key: "line\nbreak", Value: "a\nb"}}},
		{Properties: []dlq.PropertyMatch{{Key: "missing", Value: ""}}},
		{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t2"}}, Query: "delta", IncludeGone: true},
		{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, State: dlq.StateActive, Reason: "SqlTimeout",
			Since: &since, Properties: []dlq.PropertyMatch{{Key: "flag", Value: "true"}}, Query: "alpha"},
	}
}

func TestListMessagesMatchesReference(t *testing.T) {
	store.ForEachEngine(t, func(t *testing.T, engine string) { testListMessagesMatchesReference(t, engine) })
}

func testListMessagesMatchesReference(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 250)
	filters := referenceFilters(fx)
	empty := 0
	for _, f := range filters {
		if len(fx.want(f)) == 0 {
			empty++
		}
	}
	if empty > 10 {
		t.Fatalf("%d of the %d filters match nothing in the fixture: the test would prove little", empty, len(filters))
	}
	// Every way of combining a search with the page: fetch the hits, walk
	// against the set of hits, walk asking the search index about each row,
	// walk checking each row's properties (property filters only).
	for _, how := range []string{"fetch", "collect", "probe", "check"} {
		// The strategy is a package variable: set it around a group of
		// parallel subtests, which all end before t.Run returns.
		restore := store.ForceSearchForTest(how)
		t.Run(how, func(t *testing.T) {
			for i, f := range filters {
				if how != "fetch" && f.Query == "" && len(f.Properties) == 0 {
					continue
				}
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					t.Parallel()
					want := fx.want(f)
					// Page sizes: all on one page, several pages, and for a
					// few filters small pages (limit 1: every row a page).
					limits := []int{500, 13}
					switch {
					case how != "fetch":
					case i == 0:
						limits = append(limits, 1, 7)
					case i < 8:
						limits = append(limits, 7)
					}
					for _, limit := range limits {
						got := listAll(t, fx.s, f, limit)
						if !slices.Equal(got, want) {
							t.Fatalf("filter %+v limit %d:\n got %v\nwant %v", f, limit, got, want)
						}
					}
					// The count walks what the page walks: all of it, and
					// capped.
					for _, max := range []int64{0, 5} {
						n, err := fx.s.CountMessages(t.Context(), f, max)
						want := int64(len(want))
						if max > 0 {
							want = min(want, max)
						}
						if err != nil || n != want {
							t.Fatalf("CountMessages(%+v, %d) = %d, %v; want %d", f, max, n, err, want)
						}
					}
				})
			}
		})
		restore()
	}
}

func TestListMessagesPagesAreStableUnderInserts(t *testing.T) {
	store.ForEachEngine(t, testListMessagesPagesAreStableUnderInserts)
}

func testListMessagesPagesAreStableUnderInserts(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 200)
	f := dlq.Filter{IncludeGone: true}
	first, next, err := fx.s.ListMessages(t.Context(), f, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	// New messages arrive (newer and older than the page boundary) between
	// pages: the next pages neither repeat a row nor skip an old one.
	storetest.Insert(t, fx.path,
		dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{SequenceNumber: 9001, State: dlq.StateActive, EnqueuedAt: ptr(t0.Add(1000 * time.Hour))}},
		dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{SequenceNumber: 9002, State: dlq.StateActive, EnqueuedAt: ptr(t0.Add(-1000 * time.Hour))}},
	)
	got := []int64{}
	for _, r := range first {
		got = append(got, r.ID)
	}
	for next != "" {
		var recs []dlq.Record
		recs, next, err = fx.s.ListMessages(t.Context(), f, 50, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.ID)
		}
	}
	want := fx.want(f)
	newOld := int64(len(fx.recs) + 2) // the older arrival sorts after the first page
	want = append(want[:len(want)-countNull(fx)], append([]int64{newOld}, want[len(want)-countNull(fx):]...)...)
	if !slices.Equal(got, want) {
		t.Fatalf("pages after inserts:\n got %v\nwant %v", got, want)
	}
}

func countNull(fx *fixture) int {
	n := 0
	for _, r := range fx.recs {
		if r.EnqueuedAt == nil {
			n++
		}
	}
	return n
}

func TestListMessagesRecordFields(t *testing.T) { store.ForEachEngine(t, testListMessagesRecordFields) }

func testListMessagesRecordFields(t *testing.T, engine string) {
	path := store.FreshTarget(t, engine)
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ttl := 90 * time.Second
	in := dlq.Record{
		Entity:   "payments/Subscriptions/audit",
		SubQueue: dlq.SubQueueDeadLetter,
		Message: dlq.Message{
			SequenceNumber: 42, State: dlq.StateActive, MessageID: "m-1",
			CorrelationID: ptr("c"), SessionID: ptr("s"), PartitionKey: ptr("p"), Subject: ptr("subj"),
			ContentType: ptr("application/json"), ReplyTo: ptr("r"), ReplyToSessionID: ptr("rs"), To: ptr("to"),
			DeadLetterReason: ptr("R"), DeadLetterErrorDescription: ptr("D 12"), DeadLetterSource: ptr("payments"),
			DeliveryCount: 7, EnqueuedAt: ptr(t0.Add(123 * time.Millisecond)), ScheduledEnqueueAt: ptr(t0.Add(time.Hour)),
			ExpiresAt: ptr(t0.Add(2 * time.Hour)), TimeToLive: &ttl,
			ApplicationProperties: dlq.EncodeProperties(map[string]any{"a": int64(-9007199254740993)}),
			Body:                  []byte("{\n  \"x\":   1\n}"),
		},
		FirstSeenAt: t0.Add(time.Second), LastSeenAt: t0.Add(time.Minute), GoneAt: ptr(t0.Add(time.Hour)), ReplayCount: 3,
	}
	ids := storetest.Insert(t, path, in, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueMain,
		Message: dlq.Message{SequenceNumber: 1, State: dlq.StateDeferred}})
	g, _ := dlq.GroupOf(&in.Message, in.SubQueue)

	want := in
	want.ID, want.BodySize, want.GroupID, want.BodyPreview = ids[0], int64(len(in.Body)), g.ID, `{ "x": 1 }`
	got, err := s.GetMessage(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if gj, wj := mustJSON(got), mustJSON(want); gj != wj {
		t.Errorf("GetMessage:\n got %s\nwant %s", gj, wj)
	}
	list, _, err := s.ListMessages(t.Context(), dlq.Filter{IncludeGone: true, Entity: in.Entity}, 10, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("ListMessages = %d, %v", len(list), err)
	}
	want.Body = nil
	if gj, wj := mustJSON(list[0]), mustJSON(want); gj != wj {
		t.Errorf("ListMessages:\n got %s\nwant %s", gj, wj)
	}

	// The other one: every optional field unset.
	got, err = s.GetMessage(t.Context(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageID != "" || got.Subject != nil || got.EnqueuedAt != nil || got.TimeToLive != nil || got.GroupID != "" ||
		got.GoneAt != nil || string(got.ApplicationProperties) != "{}" || got.Body == nil || len(got.Body) != 0 {
		t.Errorf("unset fields came back set: %+v", got)
	}

	body, ct, err := s.MessageBody(t.Context(), ids[0])
	if err != nil || !bytes.Equal(body, in.Body) || ct == nil || *ct != "application/json" {
		t.Errorf("MessageBody = %q, %v, %v", body, ct, err)
	}
	for _, id := range []int64{0, -1, ids[1] + 100} {
		if _, err := s.GetMessage(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetMessage(%d) = %v, want ErrNotFound", id, err)
		}
		if _, _, err := s.MessageBody(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("MessageBody(%d) = %v, want ErrNotFound", id, err)
		}
	}
	var nf interface{ NotFound() bool }
	if _, err := s.GetMessage(t.Context(), 999); !errors.As(err, &nf) || !nf.NotFound() {
		t.Errorf("not-found error %v has no NotFound method", err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestListMessagesInvalidArguments(t *testing.T) {
	store.ForEachEngine(t, testListMessagesInvalidArguments)
}

func testListMessagesInvalidArguments(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 10)
	tests := []struct {
		name   string
		f      dlq.Filter
		cursor string
		param  string
	}{
		{"garbage cursor", dlq.Filter{}, "not-a-cursor", "cursor"},
		{"base64 of nonsense", dlq.Filter{}, "aGVsbG8", "cursor"},
		{"zero id", dlq.Filter{}, store.EncodeCursorForTest(5, 0), "cursor"},
		{"unknown subqueue", dlq.Filter{SubQueue: "deadletter"}, "", "subqueue"},
		{"unknown state", dlq.Filter{State: "sleeping"}, "", "state"},
		{"empty property key", dlq.Filter{Properties: []dlq.PropertyMatch{{Value: "x"}}}, "", "property"},
		{"punctuation search", dlq.Filter{Query: `" * -- ()`}, "", "q"},
		{"long search", dlq.Filter{Query: strings.Repeat("a ", 600)}, "", "q"},
		{"many words", dlq.Filter{Query: strings.Repeat("w ", 40)}, "", "q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := fx.s.ListMessages(t.Context(), tt.f, 10, tt.cursor)
			var ia interface{ InvalidParameter() string }
			if !errors.As(err, &ia) || ia.InvalidParameter() != tt.param {
				t.Fatalf("err = %v, want an invalid %s", err, tt.param)
			}
		})
	}
}

func TestSearchSyntaxIsInert(t *testing.T) { store.ForEachEngine(t, testSearchSyntaxIsInert) }

func testSearchSyntaxIsInert(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 100)
	// Whatever a person types is words (or "quoted phrases"), never FTS5
	// syntax: none of these may fail, and each must find what its words
	// find. (A quote left open is an invalid q: TestSearchSyntaxErrorIsNamed.)
	for _, q := range []string{`alpha OR bravo`, `NOT alpha`, `body:alpha`, `"alpha"`, `alpha"bravo"`, `(alpha`,
		`alpha*`, `alph*`, `NEAR(alpha bravo)`, `{body}: alpha`, `alpha AND`, `^alpha`, `alpha -bravo`} {
		recs, _, err := fx.s.ListMessages(t.Context(), dlq.Filter{Query: q}, 500, "")
		if err != nil {
			t.Errorf("q=%q: %v", q, err)
			continue
		}
		if strings.Contains(q, "*") {
			// a prefix
			if len(recs) == 0 {
				t.Errorf("q=%q: found nothing", q)
			}
			continue
		}
		want := fx.want(dlq.Filter{Query: q})
		if len(recs) != len(want) {
			t.Errorf("q=%q: %d results, want %d", q, len(recs), len(want))
		}
	}
}

func TestListPlansUseTheirIndexes(t *testing.T) {
	fx := newFixture(t, 300)
	ctx := t.Context()
	group := fx.recs[slices.IndexFunc(fx.recs, func(r dlq.Record) bool { return r.GroupID != "" })].GroupID
	since := t0
	tests := []struct {
		f     dlq.Filter
		index string
	}{
		{dlq.Filter{}, "messages_by_time"},
		{dlq.Filter{SubQueue: dlq.SubQueueDeadLetter, State: dlq.StateActive}, "messages_by_time"},
		{dlq.Filter{Since: &since}, "messages_by_time"},
		{dlq.Filter{Entity: "orders"}, "messages_by_entity"},
		{dlq.Filter{Group: group}, "messages_by_group"},
		{dlq.Filter{Reason: "SqlTimeout"}, "messages_by_reason"},
		{dlq.Filter{State: dlq.StateDeferred}, "messages_by_state"},
		{dlq.Filter{SubQueue: dlq.SubQueueTransferDeadLetter}, "messages_by_subqueue"},
		{dlq.Filter{Group: group, Entity: "orders", Since: &since}, "messages_by_group"},
		{dlq.Filter{Entity: "orders", Reason: "SqlTimeout"}, "messages_by_entity_reason"},
	}
	for _, tt := range tests {
		index, where, err := store.ListPlanForTest(ctx, fx.s, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if index != "INDEXED BY "+tt.index {
			t.Errorf("%+v: %s, want %s", tt.f, index, tt.index)
			continue
		}
		// SQLite must be able to range-scan it, with no sort: EXPLAIN the
		// real query (INDEXED BY makes a plan that cannot use it an error).
		q := "EXPLAIN QUERY PLAN SELECT m.id FROM messages m " + index + " WHERE " + strings.Join(where, " AND ") +
			" AND coalesce(m.enqueued_at, -1) <= 5 AND (coalesce(m.enqueued_at, -1) < 5 OR m.id < 5)" +
			" ORDER BY coalesce(m.enqueued_at, -1) DESC, m.id DESC LIMIT 51"
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = 1
		}
		plan := explain(t, fx.s, q, args...)
		if !strings.Contains(plan, "SEARCH m USING") || !strings.Contains(plan, tt.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%+v: plan\n%s", tt.f, plan)
		}
	}
}

func explain(t *testing.T, s *store.Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.ReaderForTest().QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}

func TestListEntities(t *testing.T) { store.ForEachEngine(t, testListEntities) }

func testListEntities(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 300)
	deleted := t0.Add(time.Hour)
	storetest.AddEntities(t, fx.path,
		storetest.Entity{Path: "orders", Counts: dlq.Counts{Active: 5, DeadLetter: 6, TransferDeadLetter: 7, Scheduled: 8}, Status: "SendDisabled"},
		storetest.Entity{Path: "payments", Kind: dlq.KindTopic},
		storetest.Entity{Path: "old", DeletedAt: &deleted},
	)
	es, err := fx.s.ListEntities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range es {
		paths = append(paths, e.Path)
	}
	if want := []string{"email", "invoices", "old", "orders", "payments", "payments/Subscriptions/audit"}; !slices.Equal(paths, want) {
		t.Fatalf("paths = %v, want %v", paths, want)
	}
	deferred := map[string]int64{}
	for _, r := range fx.recs {
		if r.GoneAt == nil && r.SubQueue == dlq.SubQueueMain && r.State == dlq.StateDeferred {
			deferred[r.Entity]++
		}
	}
	for _, e := range es {
		if e.Deferred != deferred[e.Path] {
			t.Errorf("%s: deferred %d, want %d", e.Path, e.Deferred, deferred[e.Path])
		}
		switch e.Path {
		case "orders":
			if e.Counts != (dlq.Counts{Active: 5, DeadLetter: 6, TransferDeadLetter: 7, Scheduled: 8}) || e.Status != "SendDisabled" ||
				e.Kind != dlq.KindQueue || e.CountsAt == nil || e.DeletedAt != nil {
				t.Errorf("orders = %+v", e)
			}
		case "old":
			if e.DeletedAt == nil || !e.DeletedAt.Equal(deleted) {
				t.Errorf("old = %+v, want deleted at %s", e, deleted)
			}
		case "payments/Subscriptions/audit":
			if e.Kind != dlq.KindSubscription || e.Topic != "payments" {
				t.Errorf("subscription = %+v", e)
			}
		case "payments":
			if e.Kind != dlq.KindTopic {
				t.Errorf("topic = %+v", e)
			}
		}
	}
}

func TestListGroups(t *testing.T) { store.ForEachEngine(t, testListGroups) }

func testListGroups(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 400)
	gs, err := fx.s.ListGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type agg struct {
		present, total int64
		entities       map[string]bool
		first, last    time.Time
	}
	want := map[string]*agg{}
	for _, r := range fx.recs {
		if r.GroupID == "" {
			continue
		}
		a := want[r.GroupID]
		if a == nil {
			a = &agg{entities: map[string]bool{}}
			want[r.GroupID] = a
		}
		a.total++
		if r.GoneAt == nil {
			a.present++
		}
		a.entities[r.Entity] = true
		at := r.FirstSeenAt
		if r.EnqueuedAt != nil {
			at = *r.EnqueuedAt
		}
		if a.first.IsZero() || at.Before(a.first) {
			a.first = at
		}
		if at.After(a.last) {
			a.last = at
		}
	}
	if len(gs) != len(want) {
		t.Fatalf("%d groups, want %d", len(gs), len(want))
	}
	for i, g := range gs {
		a := want[g.ID]
		if a == nil {
			t.Fatalf("unexpected group %+v", g)
		}
		if g.Present != a.present || g.Total != a.total || len(g.Entities) != len(a.entities) ||
			!g.FirstSeenAt.Equal(a.first) || !g.LastSeenAt.Equal(a.last) || g.Reason == "" || g.DescriptionPattern == "" {
			t.Errorf("group %s = %+v, want %+v", g.ID, g, *a)
		}
		for _, e := range g.Entities {
			if !a.entities[e] {
				t.Errorf("group %s lists entity %s", g.ID, e)
			}
		}
		if i > 0 && gs[i-1].Present < g.Present {
			t.Errorf("groups not ordered by present count: %d before %d", gs[i-1].Present, g.Present)
		}
		// The group filter finds exactly the group's present messages.
		if n := len(fx.want(dlq.Filter{Group: g.ID})); int64(n) != g.Present {
			t.Errorf("group %s: %d present messages, counter says %d", g.ID, n, g.Present)
		}
	}
}

func TestExportMessages(t *testing.T) { store.ForEachEngine(t, testExportMessages) }

func testExportMessages(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 300)
	since := t0.Add(30000 * time.Second)
	for _, f := range []dlq.Filter{
		{},
		{IncludeGone: true},
		{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter},
		{State: dlq.StateDeferred},
		{Reason: "SqlTimeout", Since: &since},
		{Query: "alpha"},
		{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}}},
	} {
		var got []int64
		err := fx.s.ExportMessages(t.Context(), f, func(r dlq.Record) error {
			src := fx.recs[slices.IndexFunc(fx.recs, func(x dlq.Record) bool { return x.ID == r.ID })]
			if !bytes.Equal(r.Body, src.Body) || r.Body == nil {
				t.Errorf("message %d: body %q, want %q", r.ID, r.Body, src.Body)
			}
			got = append(got, r.ID)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := fx.want(f)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("export %+v:\n got %v\nwant %v", f, got, want)
		}
	}

	stop := errors.New("stop")
	n := 0
	err := fx.s.ExportMessages(t.Context(), dlq.Filter{}, func(dlq.Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("export after the callback failed: %v after %d", err, n)
	}
}

func TestOpenReadOnly(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	if _, err := store.OpenReadOnly(ctx, filepath.Join(dir, "missing.db"), store.Options{}); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := filepath.Glob(filepath.Join(dir, "missing.db*")); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "missing.db*")); len(m) != 0 {
		t.Fatalf("OpenReadOnly created %v", m)
	}

	fx := newFixture(t, 50)
	ro, err := store.OpenReadOnly(ctx, fx.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.SetMeta(ctx, "k", "v"); err == nil {
		t.Error("a write through the read-only store succeeded")
	}

	// It reads while the serving process writes (WAL), and a long export
	// does not block the writer.
	var exported int
	err = ro.ExportMessages(ctx, dlq.Filter{IncludeGone: true}, func(dlq.Record) error {
		if exported == 0 {
			if err := fx.s.SetMeta(ctx, "during-export", "yes"); err != nil {
				return fmt.Errorf("writer blocked by the export: %w", err)
			}
			storetest.Insert(t, fx.path, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
				Message: dlq.Message{SequenceNumber: 777777, State: dlq.StateActive}})
		}
		exported++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if exported != len(fx.recs) {
		t.Errorf("exported %d, want the snapshot's %d", exported, len(fx.recs))
	}

	// Schema versions other than this binary's are refused, saying which.
	old := filepath.Join(dir, "old.db")
	s, err := store.Open(ctx, old, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	setVersion(t, old, store.SchemaVersion()-1)
	_, err = store.OpenReadOnly(ctx, old, store.Options{})
	var tooOld *store.SchemaTooOldError
	if !errors.As(err, &tooOld) || !strings.Contains(err.Error(), "version "+strconv.Itoa(store.SchemaVersion()-1)) {
		t.Errorf("older schema: %v", err)
	}
	setVersion(t, old, store.SchemaVersion()+1)
	_, err = store.OpenReadOnly(ctx, old, store.Options{})
	var tooNew *store.SchemaTooNewError
	if !errors.As(err, &tooNew) {
		t.Errorf("newer schema: %v", err)
	}
}

// setVersion makes the database at path claim schema version v.
func setVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := storetest.OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `DELETE FROM schema_migrations WHERE version > ?`, v); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= v; i++ {
		if _, err := db.ExecContext(t.Context(), `INSERT OR IGNORE INTO schema_migrations (version, name, applied_at) VALUES (?, 'x', 0)`, i); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStringsKeepTheirBytes: a message's strings are kept exactly as the
// broker gave them, NUL and invalid UTF-8 included (PostgreSQL's text
// refuses both: the store encodes them reversibly there), and filters
// compare them exactly.
func TestStringsKeepTheirBytes(t *testing.T) { store.ForEachEngine(t, testStringsKeepTheirBytes) }

func testStringsKeepTheirBytes(t *testing.T, engine string) {
	path := store.FreshTarget(t, engine)
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	odd := []string{"nul\x00inside", "bad \xff\xfe bytes", "\U0010FF41 a byte rune itself", "plain"}
	var recs []dlq.Record
	for i, v := range odd {
		recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{
			SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: v, Subject: ptr(v), DeadLetterReason: ptr(v),
			DeadLetterErrorDescription: ptr(v + " description"), Body: []byte(v)}})
	}
	ids := storetest.Insert(t, path, recs...)
	for i, v := range odd {
		r, err := s.GetMessage(t.Context(), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if r.MessageID != v || *r.Subject != v || *r.DeadLetterReason != v || *r.DeadLetterErrorDescription != v+" description" ||
			string(r.Body) != v {
			t.Errorf("message %d: %q %q %q %q %q, want %q", i, r.MessageID, *r.Subject, *r.DeadLetterReason,
				*r.DeadLetterErrorDescription, r.Body, v)
		}
		got, _, err := s.ListMessages(t.Context(), dlq.Filter{Reason: v}, 10, "")
		if err != nil || len(got) != 1 || got[0].ID != ids[i] {
			t.Errorf("reason filter %q: %d messages, %v", v, len(got), err)
		}
	}
	groups, err := s.ListGroups(t.Context())
	if err != nil || len(groups) != len(odd) {
		t.Fatalf("groups %d, %v", len(groups), err)
	}
	for _, g := range groups {
		if !slices.Contains(odd, g.Reason) {
			t.Errorf("group reason %q is none of the messages'", g.Reason)
		}
	}
}
