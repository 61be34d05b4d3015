package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestJobAlertsEndToEnd runs the real program, dlqdash serve with a config
// file naming a Slack-format webhook (a receiver in this test) for the job
// events, against `dlqdash emulator`, with a consumer of the replay's
// destination that dead-letters what it is told to:
//
//   - a job that completed, whose copies its consumer then dead-letters
//     again: the webhook is told the job's copies came back, linking to
//     the job's page;
//   - a job whose canary copies keep failing pauses itself: the webhook is
//     told it paused itself and why, linking to the job's page;
//   - the group of the originals, marked known, stays silent while it
//     grows, while the new group of the failing copies is told.
func TestJobAlertsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the emulator and dlqdash serve")
	}
	dir := t.TempDir()
	emuCfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(emuCfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"ns","Queues":[
		{"Name":"orders","Properties":{"LockDuration":"PT10S","MaxDeliveryCount":10}},
		{"Name":"target","Properties":{"LockDuration":"PT10S","MaxDeliveryCount":10}}]}],
		"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, admin := startTestEmulator(t, emuCfg)

	hook := &slackReceiver{path: "/services/T000/B000/XXXXjobsXXXX"}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	cfgFile := filepath.Join(dir, "dlqdash.yaml")
	if err := os.WriteFile(cfgFile, []byte(`namespaces:
  - name: prod
    connection_string_env: SB_PROD
    admin_endpoint: http://`+admin+`
alerts:
  - name: ops-slack
    url_env: OPS_SLACK_URL
    format: slack
    events: [new_group, group_growth, job_paused, job_redeadlettered]
    growth_per_minute: 5
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, []string{"serve", "--config", cfgFile, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "dlqdash.db"),
		"--poll", "100ms", "--public-url", "https://dlq.example.test/"},
		"SB_PROD="+conn, "OPS_SLACK_URL="+srv.URL+hook.path, envConnectionString+"=")
	defer c.kill()
	defer func() {
		if t.Failed() {
			for _, p := range hook.posts() {
				t.Logf("posted: %s", p.text)
			}
		}
	}()

	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(context.Background())
	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close(context.Background())
	deadLetter := func(n int, reason string) {
		t.Helper()
		for i := range n {
			if err := sender.SendMessage(t.Context(), &azservicebus.Message{Body: []byte(reason + " " + string(rune('a'+i%26)))}, nil); err != nil {
				t.Fatal(err)
			}
		}
		deadLetterFrom(t, receiver, n, reason, "")
	}

	// The destination's consumer: while reject is on, it dead-letters
	// every copy it receives (the fix did not work).
	var reject atomic.Bool
	var rejected atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	consumer, err := client.NewReceiverForQueue("target", nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer consumer.Close(context.Background())
		reason := "StillBroken"
		for ctx.Err() == nil {
			if !reject.Load() {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			ms, err := consumer.ReceiveMessages(rctx, 10, nil)
			rcancel()
			if err != nil {
				continue
			}
			for _, m := range ms {
				if consumer.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason}) == nil {
					rejected.Add(1)
				}
			}
		}
	}()

	start := time.Now()
	deadLetter(10, "Boom")
	deadLetter(4, "Bang")
	waitForWithin(t, 10*time.Second, "the new groups' alerts", func() bool {
		_, boom := hook.find("New failure group: Boom")
		_, bang := hook.find("New failure group: Bang")
		return boom && bang
	})
	var groups struct {
		Groups []struct{ ID, Reason string }
	}
	c.api(t, "GET", "/api/v1/groups", nil, &groups)
	keys := map[string]string{}
	for _, g := range groups.Groups {
		keys[g.Reason] = g.ID
	}
	if keys["Boom"] == "" {
		t.Fatalf("groups %+v", groups)
	}
	var patched struct{ Status string }
	if code := c.api(t, "PATCH", "/api/v1/groups/"+url.PathEscape(keys["Boom"]), map[string]any{"status": "known"}, &patched); code != 200 || patched.Status != "known" {
		t.Fatalf("mark Boom known: %d %+v", code, patched)
	}
	markedKnown := len(hook.posts())

	type jobView struct {
		ID           string  `json:"id"`
		Status       string  `json:"status"`
		Total        int     `json:"total"`
		PausedReason *string `json:"paused_reason"`
		Counts       struct {
			Completed      int `json:"completed"`
			Redeadlettered int `json:"redeadlettered"`
		} `json:"counts"`
	}
	replay := func(reason string, n int, opts map[string]any) jobView {
		t.Helper()
		waitForWithin(t, 20*time.Second, "the "+reason+" dead letters cataloged", func() bool {
			var dry struct {
				Total int `json:"total"`
			}
			c.api(t, "POST", "/api/v1/jobs", map[string]any{"action": "replay", "dry_run": true,
				"filter": map[string]any{"entity": "orders", "subqueue": "dead_letter", "reason": reason}}, &dry)
			return dry.Total == n
		})
		body := map[string]any{"action": "replay", "destination": "target",
			"filter": map[string]any{"entity": "orders", "subqueue": "dead_letter", "reason": reason}}
		for k, v := range opts {
			body[k] = v
		}
		var j jobView
		if code := c.api(t, "POST", "/api/v1/jobs", body, &j); code != http.StatusCreated || j.Total != n {
			t.Fatalf("create the %s job: %d %+v", reason, code, j)
		}
		return j
	}
	job := func(id string) jobView {
		t.Helper()
		var j jobView
		if code := c.api(t, "GET", "/api/v1/jobs/"+id, nil, &j); code != http.StatusOK {
			t.Fatalf("GET job %s: %d", id, code)
		}
		return j
	}

	// 1. A job completes; then its consumer dead-letters its copies again.
	done := replay("Bang", 4, nil)
	waitForWithin(t, 20*time.Second, "the Bang job to complete", func() bool { return job(done.ID).Status == "completed" })
	reject.Store(true)
	waitForWithin(t, 20*time.Second, "the Bang copies dead-lettered again", func() bool { return job(done.ID).Counts.Redeadlettered == 4 })
	var back slackPost
	waitForWithin(t, 10*time.Second, "the Slack alert of the completed job's copies dead-lettered again", func() bool {
		var ok bool
		back, ok = hook.find("Replay job " + done.ID + ": copies dead-lettered again")
		return ok
	})
	if !strings.Contains(back.body, `"blocks"`) || !strings.Contains(back.body, "<https://dlq.example.test/jobs/"+done.ID+"|") {
		t.Errorf("the redeadlettered alert is not Slack's with a link to the job's page: %s", back.body)
	}

	// 2. A canary whose copies keep failing: the job pauses itself.
	paused := replay("Boom", 10, map[string]any{"canary_count": 3, "canary_watch": "30s", "pause_on_redeadletter": 0.5})
	var pj jobView
	waitForWithin(t, 40*time.Second, "the Boom job to pause itself", func() bool {
		pj = job(paused.ID)
		if pj.Status == "completed" || pj.Status == "failed" || pj.Status == "cancelled" {
			t.Fatalf("the job ended instead of pausing: %+v", pj)
		}
		return pj.Status == "paused"
	})
	var pausedPost slackPost
	waitForWithin(t, 10*time.Second, "the Slack alert of the job that paused itself", func() bool {
		var ok bool
		pausedPost, ok = hook.find("Replay job " + paused.ID + " paused itself")
		return ok
	})
	if pj.PausedReason == nil || !strings.Contains(slackText(t, pausedPost.body), *pj.PausedReason) {
		t.Errorf("the pause alert does not say why (%v): %s", pj.PausedReason, pausedPost.body)
	}
	if !strings.Contains(pausedPost.body, "<https://dlq.example.test/jobs/"+paused.ID+"|") {
		t.Errorf("the pause alert does not link to the job's page: %s", pausedPost.body)
	}
	waitForWithin(t, 10*time.Second, "the Slack alert of the paused job's copies dead-lettered again", func() bool {
		_, ok := hook.find("Replay job " + paused.ID + ": copies dead-lettered again")
		return ok
	})

	// 3. The known group grows and stays silent; the copies' new group
	// (StillBroken, in target) is told.
	time.Sleep(time.Until(start.Add(7 * time.Second))) // the loop's growth window
	deadLetter(12, "Boom")
	waitForWithin(t, 10*time.Second, "the new group of the copies dead-lettered again", func() bool {
		_, ok := hook.find("New failure group: StillBroken")
		return ok
	})
	time.Sleep(3 * time.Second) // evaluations after the growth
	for _, p := range hook.posts()[markedKnown:] {
		if strings.Contains(p.text, "group") && strings.Contains(p.text, "Boom") {
			t.Errorf("the known group alerted: %s", p.text)
		}
	}
	if logs := c.stderr.String(); strings.Contains(logs, "XXXXjobsXXXX") {
		t.Error("the webhook URL is in the log")
	}
	t.Logf("%d alerts; %d copies rejected", len(hook.posts()), rejected.Load())
}

// slackText is every text of a Slack message body (its text and its
// blocks'), joined.
func slackText(t *testing.T, body string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}
