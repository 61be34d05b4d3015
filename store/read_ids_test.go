package store_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// MessagesByID agrees with the reference for every filter, on a subset of
// the ids (every third one, plus an id that does not exist).
func TestMessagesByIDMatchesReference(t *testing.T) {
	store.ForEachEngine(t, testMessagesByIDMatchesReference)
}

func testMessagesByIDMatchesReference(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 250)
	var ids []int64
	in := map[int64]bool{}
	for i, r := range fx.recs {
		if i%3 == 0 {
			ids = append(ids, r.ID)
			in[r.ID] = true
		}
	}
	ids = append(ids, 1_000_000)
	for i, f := range referenceFilters(fx) {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			var want []int64
			for _, id := range fx.want(f) {
				if in[id] {
					want = append(want, id)
				}
			}
			recs, err := fx.s.MessagesByID(t.Context(), ids, f)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range recs {
				got = append(got, r.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("filter %+v:\n got %v\nwant %v", f, got, want)
			}
		})
	}
}

func TestMessagesByIDLimits(t *testing.T) { store.ForEachEngine(t, testMessagesByIDLimits) }

func testMessagesByIDLimits(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 5)
	recs, err := fx.s.MessagesByID(t.Context(), nil, dlq.Filter{})
	if err != nil || len(recs) != 0 {
		t.Errorf("no ids: %v, %v", recs, err)
	}
	recs, err = fx.s.MessagesByID(t.Context(), []int64{fx.recs[0].ID}, dlq.Filter{IncludeGone: true})
	if err != nil || len(recs) != 1 || recs[0].MessageID != fx.recs[0].MessageID || recs[0].Entity != fx.recs[0].Entity {
		t.Errorf("one id: %+v, %v", recs, err)
	}
	_, err = fx.s.MessagesByID(t.Context(), make([]int64, store.MaxByIDs+1), dlq.Filter{})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) {
		t.Errorf("too many ids: %v", err)
	}
}
