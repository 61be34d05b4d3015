package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestPropertySuggestionsMatchReference: the keys and a key's values are
// those of the list's messages (the fixture is smaller than the sample),
// counted, the most common first.
func TestPropertySuggestionsMatchReference(t *testing.T) {
	store.ForEachEngine(t, testPropertySuggestionsMatchReference)
}

func testPropertySuggestionsMatchReference(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 250)
	byID := map[int64]dlq.Record{}
	for _, r := range fx.recs {
		byID[r.ID] = r
	}
	for _, f := range []dlq.Filter{
		{},
		{Query: "bravo", Entity: "email"},
		{Entity: "orders"},
		{Query: "alpha"},
		{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}}},
		{Reason: "SqlTimeout", IncludeGone: true},
		{Reason: "NoSuchReason"},
	} {
		keys := map[string]int64{}
		values := map[string]map[string]int64{}
		for _, id := range fx.want(f) {
			var m map[string]json.RawMessage
			d := json.NewDecoder(bytes.NewReader(byID[id].ApplicationProperties))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Fatal(err)
			}
			for k := range m {
				keys[k]++
				v, _ := propertyText(byID[id].ApplicationProperties, k)
				if values[k] == nil {
					values[k] = map[string]int64{}
				}
				values[k][v]++
			}
		}
		// A search's sample is its hits read by id (-1), or the list's
		// plan (0).
		for _, driveMax := range []int64{-1, 0} {
			restore := store.SearchDriveMaxForTest(driveMax)
			got, err := fx.s.PropertyKeys(t.Context(), f, 100)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if want := ranked(keys, 100); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%+v, drive max %d: keys\n got %v\nwant %v", f, driveMax, got, want)
			}
		}
		for _, k := range []string{"tenant", "flag", "html<&>", "line\nbreak", "big", "missing"} {
			got, err := fx.s.PropertyValues(t.Context(), f, k, 3)
			if err != nil {
				t.Fatal(err)
			}
			if want := ranked(values[k], 3); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%+v: values of %q\n got %v\nwant %v", f, k, got, want)
			}
		}
	}
	// Every suggested value filters to messages that have it.
	vs, _ := fx.s.PropertyValues(t.Context(), dlq.Filter{}, "html<&>", 10)
	for _, v := range vs {
		recs, _, err := fx.s.ListMessages(t.Context(), dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "html<&>", Value: v.Text}}}, 500, "")
		if err != nil || int64(len(recs)) < v.Count {
			t.Errorf("value %q: %d messages (%v), suggested for %d", v.Text, len(recs), err, v.Count)
		}
	}
}

// ranked is counts as the suggestions order them, at most n.
func ranked(counts map[string]int64, n int) []dlq.PropertyCount {
	out := []dlq.PropertyCount{}
	for k, c := range counts {
		out = append(out, dlq.PropertyCount{Text: k, Count: c})
	}
	slices.SortFunc(out, func(a, b dlq.PropertyCount) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Text, b.Text)
	})
	return out[:min(n, len(out))]
}
