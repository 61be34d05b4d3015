package replay_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// A bulk edit through the real SDK against the emulator: one fix (a
// JSON-path set) worked out for each dead letter from the catalog's body,
// each copy carrying its own message's body with the fix, and none carrying
// the broker's dead-letter properties, even where an edit's properties kept
// them (they are in the stored properties the edit form starts from).
func TestBulkEditAppliedPerMessage(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	for i := range 3 {
		e.send("orders", &azservicebus.Message{MessageID: ptr(fmt.Sprint("o-", i)),
			Body:                  []byte(fmt.Sprintf(`{"customer":{"id":"C-1","name":"n%d"},"n":%d}`, i, i)),
			ApplicationProperties: map[string]any{"tenant": "t1"}})
	}
	e.deadLetter("orders", "", 3, "CustomerUnknown")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 3)

	tr := &replay.Transform{JSONSet: map[string]json.RawMessage{"$.customer.id": json.RawMessage(`"C-42"`)}}
	edits := map[int64]*replay.Edit{}
	want := map[string]string{}
	for k, id := range ids {
		r, err := e.st.GetMessage(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := propsOf(t, r.ApplicationProperties)["DeadLetterReason"]; !ok {
			t.Fatalf("the catalog keeps no DeadLetterReason property: %s", r.ApplicationProperties)
		}
		body, err := tr.Apply(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		edits[id] = &replay.Edit{Body: body}
		if k == 0 {
			// As the edit form sends it: the stored properties, the
			// broker's dead-letter ones among them.
			edits[id].ApplicationProperties = r.ApplicationProperties
		}
		want[replay.DerivedMessageID(r.MessageID, r.SequenceNumber, 0)] = string(body) // job id fixed below
	}
	// The dry run sends nothing: no job, the dead letters where they were,
	// nothing new in the queue, the emulator's send count unchanged.
	sends := e.srv.Stats().Totals.Send
	dry, _ := e.submit(replay.Request{Action: replay.ActionReplay, DryRun: true, Selection: replay.Selection{IDs: ids, Edits: edits, Transform: tr}})
	if dry.Summary.Total != 3 {
		t.Fatalf("dry run %+v", dry.Summary)
	}
	if jobs, _, err := e.st.ListJobs(t.Context(), 10, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("a dry run created jobs: %v %v", jobs, err)
	}
	if n := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); n != 3 {
		t.Fatalf("%d dead letters after the dry run, want 3", n)
	}
	if n := len(e.peekAll("orders", 0)); n != 0 || e.srv.Stats().Totals.Send != sends {
		t.Fatalf("the dry run sent: %d in the queue, sends %d → %d", n, sends, e.srv.Stats().Totals.Send)
	}
	plan, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids, Edits: edits, Transform: tr}})
	if plan.Summary.Total != 3 {
		t.Fatalf("plan %+v", plan.Summary)
	}
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Completed != 3 {
		t.Fatalf("job %+v", j)
	}
	got := e.receiveAll("orders", "", 0)
	if len(got) != 3 {
		t.Fatalf("%d copies", len(got))
	}
	for _, c := range got {
		var orig string
		for _, id := range ids {
			r, _ := e.st.GetMessage(t.Context(), id)
			if replay.DerivedMessageID(r.MessageID, r.SequenceNumber, job.ID) == c.MessageID {
				orig = want[replay.DerivedMessageID(r.MessageID, r.SequenceNumber, 0)]
			}
		}
		if orig == "" || string(c.Body) != orig {
			t.Errorf("copy %s: body %s, want %s", c.MessageID, c.Body, orig)
		}
		if _, ok := c.ApplicationProperties["DeadLetterReason"]; ok {
			t.Errorf("copy %s carries DeadLetterReason: %v", c.MessageID, c.ApplicationProperties)
		}
		if _, ok := c.ApplicationProperties["DeadLetterErrorDescription"]; ok {
			t.Errorf("copy %s carries DeadLetterErrorDescription", c.MessageID)
		}
		if c.DeadLetterReason != nil || c.ApplicationProperties[replay.PropDeadLetterReason] != "CustomerUnknown" || c.ApplicationProperties["tenant"] != "t1" {
			t.Errorf("copy %s: reason %v, properties %v", c.MessageID, c.DeadLetterReason, c.ApplicationProperties)
		}
	}
	// The audit trail records the fix, as an edit and replay.
	entries, _, err := e.st.ListAudit(t.Context(), audit.Filter{Action: audit.ActionEditReplay}, 10, "")
	if err != nil || len(entries) != 1 || !strings.Contains(string(entries[0].Params), `"json_set":{"$.customer.id":"C-42"}`) {
		t.Errorf("audit %v %v", entries, err)
	}
}

func propsOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
