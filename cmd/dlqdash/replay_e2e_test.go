package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestReplayAPI drives the job API of a real dlqdash serve against the
// emulator: the answers and status codes of docs/api.md, on a SQLite file
// and on a PostgreSQL database.
func TestReplayAPI(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testReplayAPI(t, filepath.Join(t.TempDir(), "dlqdash.db"), "") })
	t.Run("postgres", func(t *testing.T) { testReplayAPI(t, pgtest.Start(t).Database(t), strings.Repeat("k", 32)) })
}

func testReplayAPI(t *testing.T, db, auditKey string) {
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"api","Queues":[
		{"Name":"orders","Properties":{"LockDuration":"PT10S"}}],
		"Topics":[{"Name":"payments","Subscriptions":[{"Name":"audit","Properties":{"LockDuration":"PT10S"}},{"Name":"billing"}]}]}],
		"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, adminAddr := startTestEmulator(t, cfg)
	client := testClient(t, conn)
	deadLetter := func(r *azservicebus.Receiver, n int, reason string) {
		t.Helper()
		defer r.Close(ctx)
		deadLetterFrom(t, r, n, reason, "")
	}
	send := func(to string, ids ...string) {
		t.Helper()
		s, err := client.NewSender(to, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		for _, id := range ids {
			if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(`{"id":"` + id + `"}`)}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("orders", "o-1", "o-2", "o-3", "o-4")
	r, _ := client.NewReceiverForQueue("orders", nil)
	deadLetter(r, 4, "SqlTimeout")
	send("payments", "p-1")
	r, _ = client.NewReceiverForSubscription("payments", "audit", nil)
	deadLetter(r, 1, "Boom")

	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "100ms", "--admin-endpoint", "http://" + adminAddr, "--log-level", "debug"},
		env(envConnectionString, conn, envAuditKey, auditKey))
	defer s.stop(t)
	defer func() {
		if t.Failed() {
			t.Log(s.stderr.String())
		}
	}()
	api := func(method, path string, body any, out any) int {
		t.Helper()
		return callAPI(t, s.addr, method, path, body, out)
	}
	type msgList struct {
		Messages []struct {
			ID          string `json:"id"`
			MessageID   string `json:"message_id"`
			ReplayCount int    `json:"replay_count"`
		} `json:"messages"`
	}
	var orders msgList
	waitFor(t, "the catalog", func() bool {
		var sub msgList
		api("GET", "/api/v1/messages?entity=orders&subqueue=dead_letter", nil, &orders)
		api("GET", "/api/v1/messages?entity=payments/Subscriptions/audit", nil, &sub)
		return len(orders.Messages) == 4 && len(sub.Messages) == 1
	})
	type apiErr struct {
		Error struct {
			Code, Message, Parameter string
		} `json:"error"`
	}

	// Bad input: 400 naming the parameter.
	for _, c := range []struct {
		body  string
		param string
	}{
		{`{"action":"replay"}`, "ids"},
		{`{"action":"launch","ids":["1"]}`, "action"},
		{`{"action":"discard","ids":["1"]}`, "reason"},
		{`{"action":"replay","filter":{"subqueue":"nope"}}`, "subqueue"},
		{`{"action":"replay","ids":["1"],"rate_per_second":-1}`, "rate_per_second"},
		{`{"action":"replay","ids":["1"],"colour":"red"}`, "colour"},
		{`{"action":"replay","ids":["1"],"destination":"nowhere"}`, "destination"},
	} {
		var e apiErr
		if code := api("POST", "/api/v1/jobs", rawJSON(c.body), &e); code != http.StatusBadRequest || e.Error.Code != "invalid_argument" || e.Error.Parameter != c.param {
			t.Errorf("%s: %d %+v, want 400 invalid_argument naming %s", c.body, code, e, c.param)
		}
	}

	// A dry run: 200, the count, a sample, warnings; nothing created.
	var dry struct {
		DryRun   bool     `json:"dry_run"`
		Total    int      `json:"total"`
		Sample   []any    `json:"sample"`
		Warnings []string `json:"warnings"`
	}
	filter := map[string]any{"entity": "orders", "reason": "SqlTimeout"}
	if code := api("POST", "/api/v1/jobs", map[string]any{"action": "replay", "filter": filter, "dry_run": true}, &dry); code != 200 ||
		!dry.DryRun || dry.Total != 4 || len(dry.Sample) != 4 || len(dry.Warnings) == 0 {
		t.Fatalf("dry run: %d %+v", code, dry)
	}
	var jobs struct {
		Jobs []job `json:"jobs"`
	}
	if api("GET", "/api/v1/jobs", nil, &jobs); len(jobs.Jobs) != 0 {
		t.Fatalf("a dry run created jobs: %+v", jobs)
	}

	// The fan-out guard: 422 without acknowledge_fan_out.
	var sub msgList
	api("GET", "/api/v1/messages?entity=payments/Subscriptions/audit", nil, &sub)
	var e apiErr
	if code := api("POST", "/api/v1/jobs", map[string]any{"action": "replay", "ids": []string{sub.Messages[0].ID}}, &e); code != http.StatusUnprocessableEntity ||
		e.Error.Code != "failed_precondition" || !strings.Contains(e.Error.Message, "acknowledge_fan_out") {
		t.Errorf("fan-out: %d %+v", code, e)
	}

	// A paused job holds its messages: another job over them is a 409.
	var j job
	if code := api("POST", "/api/v1/jobs", map[string]any{"action": "replay", "filter": filter, "rate_per_second": 1}, &j); code != http.StatusCreated ||
		j.Total != 4 || j.CreatedBy != "local" || j.Action != "replay" {
		t.Fatalf("create: %d %+v", code, j)
	}
	if code := api("POST", "/api/v1/jobs/"+j.ID+"/pause", nil, &j); code != 200 || j.Status != "paused" {
		t.Fatalf("pause: %d %+v", code, j)
	}
	if code := api("POST", "/api/v1/jobs", map[string]any{"action": "discard", "ids": []string{orders.Messages[0].ID}, "reason": "x"}, &e); code != http.StatusConflict || e.Error.Code != "conflict" {
		t.Errorf("overlap: %d %+v, want 409 conflict", code, e)
	}
	if code := api("POST", "/api/v1/jobs/"+j.ID+"/pause", nil, &e); code != http.StatusUnprocessableEntity {
		t.Errorf("pausing a paused job: %d", code)
	}
	if code := api("POST", "/api/v1/jobs/"+j.ID+"/resume", map[string]any{}, &j); code != 200 || j.Status != "queued" {
		t.Fatalf("resume: %d %+v", code, j)
	}
	// Faster: cancel it and replay at full speed.
	if code := api("POST", "/api/v1/jobs/"+j.ID+"/cancel", nil, &j); code != 200 || j.Status != "cancelling" {
		t.Fatalf("cancel: %d %+v", code, j)
	}
	waitFor(t, "the cancel", func() bool { api("GET", "/api/v1/jobs/"+j.ID, nil, &j); return j.Status == "cancelled" })
	// What the cancelled job replayed before it stopped is not replayed
	// again: the next job finds those originals gone.
	copies := j.Counts.Completed
	if j.Counts.Completed+j.Counts.Cancelled != 4 {
		t.Errorf("cancelled job %+v: every message completed or cancelled", j)
	}
	if code := api("POST", "/api/v1/jobs", map[string]any{"action": "replay", "filter": filter}, &j); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	// The cancelled job's receiver held locks on these messages: they come
	// back when the locks (10 s) lapse.
	waitForWithin(t, 30*time.Second, "the job", func() bool { api("GET", "/api/v1/jobs/"+j.ID, nil, &j); return j.Status == "completed" })
	if j.Counts.Completed+j.Counts.Failed != 4 || j.Counts.Failed != copies || j.FinishedAt == nil {
		t.Errorf("job %+v, want %d completed and the %d the cancelled job replayed failed (not found)", j, 4-copies, copies)
	}
	copies += j.Counts.Completed
	if copies != 4 {
		t.Fatalf("%d copies of 4 messages", copies)
	}
	var items struct {
		Messages []struct {
			Message struct {
				ID             string `json:"id"`
				Entity         string `json:"entity"`
				SequenceNumber int64  `json:"sequence_number"`
				MessageID      string `json:"message_id"`
			} `json:"message"`
			State         string  `json:"state"`
			CopyMessageID *string `json:"copy_message_id"`
		} `json:"messages"`
		NextCursor *string `json:"next_cursor"`
	}
	if code := api("GET", "/api/v1/jobs/"+j.ID+"/messages?limit=2", nil, &items); code != 200 || len(items.Messages) != 2 || items.NextCursor == nil {
		t.Fatalf("job messages: %d %+v", code, items)
	}
	for _, it := range items.Messages {
		if it.Message.Entity != "orders" || it.Message.MessageID == "" || (it.State == "completed" && (it.CopyMessageID == nil ||
			!strings.HasPrefix(*it.CopyMessageID, it.Message.MessageID+"/dlqdash-"))) {
			t.Errorf("item %+v", it)
		}
	}
	if code := api("GET", "/api/v1/jobs/999", nil, &e); code != 404 || e.Error.Code != "not_found" {
		t.Errorf("unknown job: %d %+v", code, e)
	}

	// The copies dead-letter again; the catalog counts their lineage, and
	// edit-and-replay sends one back with a fixed body.
	r, _ = client.NewReceiverForQueue("orders", nil)
	deadLetter(r, copies, "StillBroken")
	var again msgList
	waitFor(t, "the copies back in the DLQ", func() bool {
		api("GET", "/api/v1/messages?reason=StillBroken", nil, &again)
		return len(again.Messages) == copies
	})
	if again.Messages[0].ReplayCount != 1 {
		t.Errorf("a dead-lettered copy's replay_count = %d, want 1", again.Messages[0].ReplayCount)
	}
	var edited job
	if code := api("POST", "/api/v1/messages/"+again.Messages[0].ID+"/replay", map[string]any{"body": `{"fixed":true}`,
		"application_properties": map[string]any{"tenant": "t9"}}, &edited); code != http.StatusCreated {
		t.Fatalf("edit and replay: %d", code)
	}
	waitFor(t, "the edited replay", func() bool { api("GET", "/api/v1/jobs/"+edited.ID, nil, &edited); return edited.Status == "completed" })
	r, _ = client.NewReceiverForQueue("orders", nil)
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	r.Close(ctx)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != `{"fixed":true}` || ms[0].ApplicationProperties["tenant"] != "t9" ||
		ms[0].ApplicationProperties["dlqdash.replay_count"] != int64(2) {
		if len(ms) == 1 {
			t.Fatalf("edited copy: body %s, properties %v", ms[0].Body, ms[0].ApplicationProperties)
		}
		t.Fatalf("edited copy: %v %d", err, len(ms))
	}

	// The audit trail has it all, by the local actor and the engine.
	var audit struct {
		Entries []struct {
			Action string `json:"action"`
			Actor  string `json:"actor"`
		} `json:"entries"`
	}
	api("GET", "/api/v1/audit?limit=500", nil, &audit)
	seen := map[string]bool{}
	for _, en := range audit.Entries {
		seen[en.Action] = true
	}
	for _, a := range []string{"replay_job_created", "job_paused", "job_resumed", "job_cancelled", "replay", "job_completed", "edit_and_replay"} {
		if !seen[a] {
			t.Errorf("no %s entry in the audit trail: %v", a, seen)
		}
	}
}

type job struct {
	ID         string  `json:"id"`
	Action     string  `json:"action"`
	Status     string  `json:"status"`
	CreatedBy  string  `json:"created_by"`
	Total      int     `json:"total"`
	FinishedAt *string `json:"finished_at"`
	Counts     struct {
		Pending, Sent, Completed, Failed, Skipped, Cancelled int
	} `json:"counts"`
}

// rawJSON is a request body sent as it is.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
