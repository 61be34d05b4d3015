package store_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestCountMessagesMatchesReference: a count is exact up to its cap, by
// both ways of counting a search (reading the hits by id, or walking the
// list's plan).
func TestCountMessagesMatchesReference(t *testing.T) {
	store.ForEachEngine(t, testCountMessagesMatchesReference)
}

func testCountMessagesMatchesReference(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 250)
	filters := referenceFilters(fx)
	filters = append(filters, dlq.Filter{Query: `"failed after"`}, dlq.Filter{Query: "alph* bravo", Entity: "email"})
	for _, driveMax := range []int64{-1, 0} {
		restore := store.SearchDriveMaxForTest(driveMax)
		for i, f := range filters {
			want := int64(len(listAll(t, fx.s, f, 500)))
			if f.Query == "" || f.Query[0] != '"' && f.Query != "alph* bravo" {
				want = int64(len(fx.want(f)))
			}
			for _, max := range []int64{10_001, 3, 0} {
				got, err := fx.s.CountMessages(t.Context(), f, max)
				if err != nil {
					t.Fatalf("filter %d %+v: %v", i, f, err)
				}
				exp := want
				if max > 0 {
					exp = min(want, max)
				}
				if got != exp {
					t.Errorf("drive max %d, filter %d %+v, cap %d: counted %d, want %d", driveMax, i, f, max, got, exp)
				}
			}
		}
		restore()
	}
	// A phrase is narrower than its words.
	words, _ := fx.s.CountMessages(t.Context(), dlq.Filter{Query: "failed after"}, 0)
	phrase, _ := fx.s.CountMessages(t.Context(), dlq.Filter{Query: `"after failed"`}, 0)
	if words == 0 || phrase != 0 {
		t.Errorf("words %d, reversed phrase %d: want some and none", words, phrase)
	}
}

// TestSearchSyntaxErrorIsNamed: a quote left open is the person's mistake,
// reported as such (the API's 400 naming q), never a server error.
func TestSearchSyntaxErrorIsNamed(t *testing.T) { store.ForEachEngine(t, testSearchSyntaxErrorIsNamed) }

func testSearchSyntaxErrorIsNamed(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 20)
	for _, q := range []string{`"alpha`, `alpha "bravo`, `"" "`} {
		_, _, err := fx.s.ListMessages(t.Context(), dlq.Filter{Query: q}, 50, "")
		var ia *store.InvalidArgumentError
		if !errors.As(err, &ia) || ia.Param != "q" {
			t.Errorf("q=%s: %v, want an invalid q", strconv.Quote(q), err)
		}
		if _, err := fx.s.CountMessages(t.Context(), dlq.Filter{Query: q}, 100); !errors.As(err, &ia) {
			t.Errorf("count q=%s: %v, want an invalid q", strconv.Quote(q), err)
		}
	}
}
