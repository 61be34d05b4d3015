package store_test

import (
	"errors"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

// A filter naming an entity the catalog never saw is an error in every
// reader (the API's 404, export's exit 1, a job's refusal), never an empty
// answer; a live list (MessagesByID) just gets nothing. A known entity with
// no matching messages stays an empty answer.
func TestUnknownEntityIsAnError(t *testing.T) { store.ForEachEngine(t, testUnknownEntityIsAnError) }

func testUnknownEntityIsAnError(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 20)
	f := dlq.Filter{Entity: "nosuch", SubQueue: dlq.SubQueueDeadLetter}
	check := func(what string, err error) {
		t.Helper()
		var u *dlq.UnknownEntityError
		if !errors.As(err, &u) || u.Entity != "nosuch" || err.Error() == "" {
			t.Errorf("%s: %v, want an UnknownEntityError for nosuch", what, err)
		}
		if u != nil && u.Error() != "no entity 'nosuch' in the catalog" {
			t.Errorf("%s: says %q", what, u.Error())
		}
	}
	_, _, err := fx.s.ListMessages(t.Context(), f, 10, "")
	check("ListMessages", err)
	_, err = fx.s.CountMessages(t.Context(), f, 100)
	check("CountMessages", err)
	check("ExportMessages", fx.s.ExportMessages(t.Context(), f, func(dlq.Record) error { return nil }))
	_, err = fx.s.SummariseSelection(t.Context(), replay.Selection{Filter: &f}, 3, 10)
	check("SummariseSelection", err)
	_, err = fx.s.CreateJob(t.Context(), replay.Job{Action: replay.ActionReplay}, replay.Selection{Filter: &f}, 3)
	check("CreateJob", err)

	// Deferred messages by sequence number, of an entity never seen.
	_, err = fx.s.SummariseSelection(t.Context(), replay.Selection{Entity: "nosuch", SequenceNumbers: []int64{1}}, 3, 10)
	check("SummariseSelection by sequence numbers", err)

	if recs, err := fx.s.MessagesByID(t.Context(), []int64{1, 2, 3}, f); err != nil || len(recs) != 0 {
		t.Errorf("MessagesByID: %v %v, want none and no error", recs, err)
	}
	// Known, nothing matching: empty, no error.
	recs, _, err := fx.s.ListMessages(t.Context(), dlq.Filter{Entity: "orders", Reason: "NoSuchReason"}, 10, "")
	if err != nil || len(recs) != 0 {
		t.Errorf("a known entity without matches: %v %v", recs, err)
	}
}
