package web

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// A dead letter replayed by a job, whose copy was dead-lettered again: the
// page and the API of each show one lineage, linking the copy to its
// original and the job, and the original to its copy.
func TestLineageLinksBothWays(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "lineage.db")
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders", Counts: dlq.Counts{DeadLetter: 2}})
	dl := func(seq int64, msgID, reason string, props map[string]any, replays int, at time.Time) dlq.Record {
		return dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, FirstSeenAt: at, LastSeenAt: at, ReplayCount: replays,
			Message: dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: msgID, EnqueuedAt: &at,
				DeadLetterReason: ptr(reason), ApplicationProperties: dlq.EncodeProperties(props)}}
	}
	orig := storetest.Insert(t, path, dl(1, "o-1", "SqlTimeout", nil, 0, t0))[0]
	job, err := st.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{IDs: []int64{orig}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	copyID := replay.DerivedMessageID("o-1", 1, job.ID)
	for _, u := range []replay.Update{{MessageID: orig, State: replay.ItemLocked}, {MessageID: orig, State: replay.ItemSent, CopyMessageID: copyID},
		{MessageID: orig, State: replay.ItemCompleted}} {
		if _, err := st.UpdateItems(ctx, job.ID, []replay.Update{u}); err != nil {
			t.Fatal(err)
		}
	}
	cp := storetest.Insert(t, path, dl(2, copyID, "ValidationFailed",
		map[string]any{replay.PropJobID: strconv.FormatInt(job.ID, 10), replay.PropReplayCount: int64(1)}, 1, t0.Add(time.Hour)))[0]

	fx := &apiFixture{st: st, h: New(Config{Catalog: st, Jobs: newFakeJobs(nil), Audit: st}).Handler()}
	jobLink := fmt.Sprintf(`href="/jobs/%d" data-testid="lineage-job-link"`, job.ID)
	copyPage := fx.page(t, "/messages/"+idStr(cp), 200)
	for _, want := range []string{`data-testid="lineage"`, fmt.Sprintf(`href="/messages/%d" data-testid="lineage-message-link">Dead-lettered in orders (dead-letter): SqlTimeout</a>`, orig),
		jobLink, "replayed as copy " + copyID + " (completed)", `data-testid="lineage-current">Dead-lettered again in orders (dead-letter): ValidationFailed (this message)`} {
		if !strings.Contains(copyPage, want) {
			t.Errorf("the copy's page lacks %s", want)
		}
	}
	origPage := fx.page(t, "/messages/"+idStr(orig), 200)
	for _, want := range []string{fmt.Sprintf(`href="/messages/%d" data-testid="lineage-message-link">Dead-lettered again in orders`, cp), jobLink,
		`data-testid="lineage-current">Dead-lettered in orders (dead-letter): SqlTimeout (this message)`} {
		if !strings.Contains(origPage, want) {
			t.Errorf("the original's page lacks %s", want)
		}
	}

	res, v, _ := fx.get(t, "/api/v1/messages/"+idStr(cp))
	if res.StatusCode != http.StatusOK {
		t.Fatal(res.StatusCode)
	}
	lin, _ := v["lineage"].([]any)
	var got []string
	for _, e := range lin {
		m := e.(map[string]any)
		got = append(got, fmt.Sprintf("%v %v %v %v %v", m["event"], m["id"], m["job_id"], m["copy_message_id"], m["current"]))
	}
	want := []string{fmt.Sprintf("dead_lettered %d <nil> <nil> false", orig), fmt.Sprintf("replayed %d %d %s false", orig, job.ID, copyID),
		fmt.Sprintf("dead_lettered %d <nil> <nil> true", cp)}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("API lineage\n got %q\nwant %q", got, want)
	}
	// A message outside any replay: its lineage is itself, and the page
	// shows no timeline.
	lone := storetest.Insert(t, path, dl(3, "lone", "SqlTimeout", nil, 0, t0))[0]
	if strings.Contains(fx.page(t, "/messages/"+idStr(lone), 200), `data-testid="lineage"`) {
		t.Error("a timeline for a message never replayed")
	}
	if _, v, _ := fx.get(t, "/api/v1/messages/"+idStr(lone)); len(v["lineage"].([]any)) != 1 {
		t.Errorf("lone lineage %v", v["lineage"])
	}
}
