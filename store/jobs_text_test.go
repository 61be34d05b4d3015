package store_test

import (
	"testing"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// Text a job record keeps for display is valid UTF-8 (U+FFFD for each
// invalid sequence), whatever a form or a broker error carried; the
// catalog's message data keeps its exact bytes.
func TestJobRecordTextIsValidUTF8(t *testing.T) { store.ForEachEngine(t, testJobRecordTextIsValidUTF8) }

func testJobRecordTextIsValidUTF8(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 40)
	ctx := t.Context()
	f := dlq.Filter{Entity: "orders"}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "proxy:b\xffb", Reason: "bug \xfe\xff fixed",
		Destination: "orders"}, replay.Selection{Filter: &f}, 100)
	if err != nil {
		t.Fatal(err)
	}
	items, _, err := fx.s.ListItems(ctx, j.ID, "", 500, "")
	if err != nil || len(items) == 0 {
		t.Fatalf("items %v %v", items, err)
	}
	if _, err := fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: items[0].MessageID, State: replay.ItemFailed,
		Error: "broker said \xc3\x28"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.s.SetStatus(ctx, j.ID, replay.StatusPaused, "throttled \xff", replay.StatusQueued); err != nil {
		t.Fatal(err)
	}
	got, err := fx.s.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, pair := range map[string][2]string{
		"created_by":    {got.CreatedBy, "proxy:b\uFFFDb"},
		"reason":        {got.Reason, "bug \uFFFD fixed"},
		"paused_reason": {got.PausedReason, "throttled \uFFFD"},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s %q, want %q", what, pair[0], pair[1])
		}
	}
	failed, _, err := fx.s.ListItems(ctx, j.ID, replay.ItemFailed, 10, "")
	if err != nil || len(failed) != 1 || failed[0].Error != "broker said \uFFFD(" || !utf8.ValidString(failed[0].Error) {
		t.Errorf("item error %+v %v", failed, err)
	}
	// The catalog's data keeps its bytes: a dead-letter reason with
	// invalid UTF-8 is stored, found and returned exactly.
	raw := "bad \xff reason"
	ids := storetest.Insert(t, fx.path, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
		Message: dlq.Message{SequenceNumber: 9999, State: dlq.StateActive, DeadLetterReason: &raw}})
	recs, _, err := fx.s.ListMessages(ctx, dlq.Filter{Reason: raw}, 5, "")
	if err != nil || len(recs) != 1 || recs[0].ID != ids[0] || *recs[0].DeadLetterReason != raw {
		t.Errorf("catalog reason: %+v %v", recs, err)
	}
}
