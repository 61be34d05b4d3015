package store_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/replica"
)

// TestIngestKeepsOddText: what the ingest writes for search and property
// filters, from text with the characters COPY's text format escapes (tab,
// newline, carriage return, backslash), quotes, NUL and invalid UTF-8, and
// a properties object with a repeated pair, is found the same way on both
// engines (on PostgreSQL the ingest writes these rows with COPY).
func TestIngestKeepsOddText(t *testing.T) { store.ForEachEngine(t, testIngestKeepsOddText) }

func testIngestKeepsOddText(t *testing.T, engine string) {
	s := indexStore(t, store.FreshTarget(t, engine))
	odd := indexMessage(1, "alpha", "acme")
	odd.Body = []byte("alpha\tbravo \\ charlie\r\ndelta \\t 'quoted' \"dq\"")
	desc := "nul\x00 bad\xff zulu"
	odd.DeadLetterErrorDescription = &desc
	odd.ApplicationProperties = dlq.EncodeProperties(map[string]any{
		`pa\th`: "C:\\temp\tx\ny", "it's": "o'k", "nul": "a\x00b", "tenant": "acme"})
	reason := "Tab\there \\ back"
	odd.DeadLetterReason = &reason
	dup := indexMessage(2, "special", "zenith")
	dup.ApplicationProperties = json.RawMessage(`{"dup":"v","dup":"v","dup":"w","n":1}`)
	applyIndexPage(t, s, 1, 2, odd, dup)

	for _, c := range []struct {
		name string
		f    dlq.Filter
		want []int64
	}{
		{"word after a tab", dlq.Filter{Query: "bravo"}, []int64{1}},
		{"word after a backslash", dlq.Filter{Query: "charlie"}, []int64{1}},
		{"word after CR LF", dlq.Filter{Query: "delta"}, []int64{1}},
		{"word of the description after invalid UTF-8", dlq.Filter{Query: "zulu"}, []int64{1}},
		{"word of the reason", dlq.Filter{Query: "here"}, []int64{1}},
		{"phrase across a tab", dlq.Filter{Query: `"alpha bravo"`}, []int64{1}},
		{"the other message", dlq.Filter{Query: "special"}, []int64{2}},
		{"property with a backslash, tab and newline", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: `pa\th`, Value: "C:\\temp\tx\ny"}}}, []int64{1}},
		{"property with quotes", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "it's", Value: "o'k"}}}, []int64{1}},
		{"property with NUL", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "nul", Value: "a\x00b"}}}, []int64{1}},
		{"repeated pair", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "dup", Value: "v"}}}, []int64{2}},
		{"repeated key, other value", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "dup", Value: "w"}}}, []int64{2}},
		{"number", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "n", Value: "1"}}}, []int64{2}},
		{"reason with a tab", dlq.Filter{Reason: reason}, []int64{1}},
	} {
		if got := seqsOf(t, s, c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	recs, _, err := s.ListMessages(t.Context(), dlq.Filter{Query: "zulu"}, 10, "")
	if err != nil || len(recs) != 1 {
		t.Fatalf("search: %d, %v", len(recs), err)
	}
	r, err := s.GetMessage(t.Context(), recs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Body) != string(odd.Body) || *r.DeadLetterReason != reason || *r.DeadLetterErrorDescription != desc ||
		string(r.ApplicationProperties) != string(odd.ApplicationProperties) {
		t.Errorf("stored %q %q %q %s, want %q %q %q %s", r.Body, *r.DeadLetterReason, *r.DeadLetterErrorDescription,
			r.ApplicationProperties, odd.Body, reason, desc, odd.ApplicationProperties)
	}
}

// TestFencedBulkPageOnPostgres: a page of many new messages (the COPY
// path) written under a stale lease term is refused before anything is
// written, and one written under the current term commits every row with
// its search and property rows; a page whose COPY fails part way (a row
// the schema refuses) leaves none of its rows either.
func TestFencedBulkPageOnPostgres(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	target := store.FreshTarget(t, "postgres")
	open := func() *store.Store {
		s, err := store.Open(ctx, target, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	pool, _ := a.ReplicaDB()
	const lease = "ingest/prod"
	old, ok, err := replica.Acquire(ctx, pool, lease, "pod-b", time.Second)
	if err != nil || !ok {
		t.Fatalf("acquire: %d %v %v", old, ok, err)
	}
	if err := replica.Release(ctx, pool, lease, "pod-b", old); err != nil {
		t.Fatal(err)
	}
	term, ok, err := replica.Acquire(ctx, pool, lease, "pod-a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %d %v %v", term, ok, err)
	}
	current := a.FencedNamespace("prod", replica.LeaseFence{Name: lease, Term: term})
	stale := b.FencedNamespace("prod", replica.LeaseFence{Name: lease, Term: old})
	if _, err := current.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, indexAt); err != nil {
		t.Fatal(err)
	}
	page := func(from int64, n int, word string) dlq.Page {
		p := dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: from, Through: from + int64(n) - 1, SeenAt: indexAt}
		for i := range n {
			p.Messages = append(p.Messages, indexMessage(from+int64(i), word, "acme"))
		}
		return p
	}
	if _, err := stale.ApplyPage(ctx, page(1, 500, "stale")); !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("the stale term's page: %v, want ErrStaleTerm", err)
	}
	res, err := current.ApplyPage(ctx, page(501, 500, "holder"))
	if err != nil || len(res.New) != 500 {
		t.Fatalf("the holder's page: %d new, %v", len(res.New), err)
	}
	// A page whose last message the schema refuses (a state code no
	// column allows cannot be made through dlq; a sequence number taken
	// twice in one page is refused by messages_present) writes nothing.
	bad := page(1001, 300, "broken")
	bad.Messages = append(bad.Messages, bad.Messages[0])
	bad.Through++
	if _, err := current.ApplyPage(ctx, bad); err == nil {
		t.Error("a page holding one sequence number twice was written")
	}
	for _, c := range []struct {
		name string
		f    dlq.Filter
		want int
	}{
		{"stale", dlq.Filter{Query: "stale"}, 0},
		{"holder", dlq.Filter{Query: "holder"}, 500},
		{"broken", dlq.Filter{Query: "broken"}, 0},
		{"tenant", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "acme"}}}, 500},
	} {
		n, err := b.CountMessages(ctx, c.f, 10_000)
		if err != nil || n != int64(c.want) {
			t.Errorf("%s: %d messages, %v; want %d", c.name, n, err, c.want)
		}
	}
	all, err := b.CountMessages(ctx, dlq.Filter{}, 10_000)
	if err != nil || all != 500 {
		t.Errorf("messages: %d, %v; want 500", all, err)
	}
}
