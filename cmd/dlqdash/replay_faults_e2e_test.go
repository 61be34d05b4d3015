package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Issue 15's end-to-end tests: `dlqdash emulator` and `dlqdash serve` run
// in this process, the test drives replay jobs through the HTTP API and
// injects the emulator's faults over its admin listener.

// faultJob is a job as GET /api/v1/jobs/{id} answers it (docs/api.md),
// with the keys these tests read.
type faultJob struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	Total         int     `json:"total"`
	PausedReason  *string `json:"paused_reason"`
	LastError     *string `json:"last_error"`
	RetryAttempts int     `json:"retry_attempts"`
	Flagged       int     `json:"flagged"`
	CanaryVerdict *string `json:"canary_verdict"`
	Counts        struct {
		Pending        int `json:"pending"`
		Sent           int `json:"sent"`
		Completed      int `json:"completed"`
		Failed         int `json:"failed"`
		Skipped        int `json:"skipped"`
		Cancelled      int `json:"cancelled"`
		Redeadlettered int `json:"redeadlettered"`
	} `json:"counts"`
}

func (j faultJob) String() string {
	s := func(p *string) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("job %s %s total %d counts %+v flagged %d attempts %d paused_reason %s last_error %s canary_verdict %s",
		j.ID, j.Status, j.Total, j.Counts, j.Flagged, j.RetryAttempts, s(j.PausedReason), s(j.LastError), s(j.CanaryVerdict))
}

// faultRig is an emulator with a source queue "orders" and a destination
// queue "target" (duplicate detection on, so a resent copy is never a
// second copy), a dlqdash serve reading it, and an SDK client.
type faultRig struct {
	t         *testing.T
	conn      string
	adminAddr string
	auth      string
	client    *azservicebus.Client
	s         *started
}

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	conn, adminAddr := startTestEmulator(t, faultConfig(t))
	return faultRigOn(t, conn, adminAddr)
}

// faultConfig writes the rig's Config.json and returns its path.
func faultConfig(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"faults","Queues":[
		{"Name":"orders","Properties":{"LockDuration":"PT10S","MaxDeliveryCount":10}},
		{"Name":"target","Properties":{"LockDuration":"PT10S","MaxDeliveryCount":10,
		 "RequiresDuplicateDetection":true,"DuplicateDetectionHistoryTimeWindow":"PT10M"}}]}],
		"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// faultRigOn is the rig on an emulator already started with faultConfig.
func faultRigOn(t *testing.T, conn, adminAddr string) *faultRig {
	t.Helper()
	r := &faultRig{t: t, conn: conn, adminAddr: adminAddr}
	if r.adminAddr == "" {
		t.Fatal("no emulator admin address")
	}
	r.auth = sasAuthorization("http://"+r.adminAddr+"/", "RootManageSharedAccessKey", "SAS_KEY_VALUE", time.Hour)
	client, err := azservicebus.NewClientFromConnectionString(r.conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.client = client
	t.Cleanup(func() { client.Close(context.Background()) })
	return r
}

// serve starts dlqdash serve against the rig's emulator with a short
// Service Bus deadline and a fast poll.
func (r *faultRig) serve() { r.serveWith("3s") }

// serveWith starts dlqdash serve with the Service Bus deadline timeout
// and the extra flags.
func (r *faultRig) serveWith(timeout string, extra ...string) {
	t := r.t
	t.Helper()
	db := filepath.Join(t.TempDir(), "dlqdash.db")
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms", "--servicebus-timeout", timeout,
		"--admin-endpoint", "http://" + r.adminAddr}
	r.s = start(t, append(args, extra...), env(envConnectionString, r.conn))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(r.s.stderr.String())
		}
		r.s.cancel()
		<-r.s.done
	})
}

func (r *faultRig) api(method, path string, body, out any) int {
	r.t.Helper()
	return callAPI(r.t, r.s.addr, method, path, body, out)
}

func (r *faultRig) job(id string) faultJob {
	r.t.Helper()
	var j faultJob
	if code := r.api("GET", "/api/v1/jobs/"+id, nil, &j); code != http.StatusOK {
		r.t.Fatalf("GET job %s = %d", id, code)
	}
	return j
}

func (r *faultRig) fault(pathQuery string) {
	r.t.Helper()
	if code, body := adminFault(r.t, http.MethodPost, r.adminAddr, pathQuery, r.auth); code != http.StatusNoContent {
		r.t.Fatalf("POST /$emulator/faults%s = %d %s", pathQuery, code, body)
	}
}

// seed sends n messages with ids prefix-i to orders and dead-letters them.
func (r *faultRig) seed(prefix string, n int) {
	t := r.t
	t.Helper()
	ctx := t.Context()
	s, err := r.client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := 0; i < n; {
		b, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for ; i < n; i++ {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if err := b.AddMessage(&azservicebus.Message{MessageID: &id, Body: []byte(`{"id":"` + id + `"}`)}, nil); err != nil {
				if errors.Is(err, azservicebus.ErrMessageTooLarge) {
					break
				}
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	rcv, err := r.client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(context.Background())
	for left := n; left > 0; left -= 5000 { // the most one receive may ask for
		deadLetterFrom(t, rcv, min(left, 5000), "Boom", "")
	}
}

var ordersDLQ = map[string]any{"entity": "orders", "subqueue": "dead_letter"}

// cataloged waits until the catalog holds n dead letters of orders.
func (r *faultRig) cataloged(n int) {
	r.t.Helper()
	waitForWithin(r.t, 60*time.Second, fmt.Sprintf("%d dead letters in the catalog", n), func() bool {
		var dry struct {
			Total int `json:"total"`
		}
		r.api("POST", "/api/v1/jobs", map[string]any{"action": "replay", "filter": ordersDLQ, "dry_run": true}, &dry)
		return dry.Total == n
	})
}

// replayAll waits until the catalog holds n dead letters of orders and
// starts a replay job over them to target with the extra options.
func (r *faultRig) replayAll(n int, opts map[string]any) faultJob {
	t := r.t
	t.Helper()
	r.cataloged(n)
	body := map[string]any{"action": "replay", "filter": ordersDLQ, "destination": "target"}
	for k, v := range opts {
		body[k] = v
	}
	var j faultJob
	if code := r.api("POST", "/api/v1/jobs", body, &j); code != http.StatusCreated || j.Total != n {
		t.Fatalf("create: %d %s", code, j)
	}
	return j
}

// peekAll peeks every message of queue (subqueue sq) through the SDK.
func (r *faultRig) peekAll(queue string, sq azservicebus.SubQueue) []*azservicebus.ReceivedMessage {
	t := r.t
	t.Helper()
	rcv, err := r.client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: sq})
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(context.Background())
	var all []*azservicebus.ReceivedMessage
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		ms, err := rcv.PeekMessages(ctx, 250, nil)
		cancel()
		if err != nil {
			t.Fatalf("peek %s: %v", queue, err)
		}
		if len(ms) == 0 {
			return all
		}
		all = append(all, ms...)
	}
}

// originals counts messages by dlqdash.original_message_id (copies) or,
// when they have none, by their MessageId (originals).
func originals(ms []*azservicebus.ReceivedMessage) map[string]int {
	n := map[string]int{}
	for _, m := range ms {
		if id, ok := m.ApplicationProperties["dlqdash.original_message_id"].(string); ok {
			n[id]++
		} else {
			n[m.MessageID]++
		}
	}
	return n
}

// TestReplayFaultsHangSequence is issue 15's hang with the real program:
// one second into the job, server busy for the next 20 operations on the
// destination, then every AMQP connection dropped. The job finishes
// completed, every original left the DLQ and every copy is in the
// destination exactly once, and the job was never running without
// progress for longer than the documented bound (longest back-off 22.5 s
// plus one call's deadline, 3 s here) without saying so.
func TestReplayFaultsHangSequence(t *testing.T) {
	const n = 300
	const bound = 22500*time.Millisecond + 3*time.Second
	const latency = 50 * time.Millisecond
	r := newFaultRig(t)
	r.seed("hang", n)
	r.serve()

	// Unhindered, 300 messages replay in a fifth of a second; every AMQP
	// reply and delivery delayed by a little keeps the job running when
	// the faults come.
	r.fault("/latency?d=" + latency.String())
	created := r.replayAll(n, nil)
	createdAt := time.Now()
	dropped := false

	var (
		j            faultJob
		sawRetrying  *faultJob
		statuses     = map[string]int{}
		lastCounts   = created.Counts
		lastChange   = time.Now()
		longestStall time.Duration
	)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if !dropped && time.Since(createdAt) >= time.Second {
			r.fault("/server-busy?entity=target&ops=20")
			r.fault("/drop-connections")
			dropped = true
			t.Logf("faults injected %v after the job was created: %s", time.Since(createdAt).Round(time.Millisecond), j)
		}
		j = r.job(created.ID)
		statuses[j.Status]++
		if j.Status == "retrying" && sawRetrying == nil && j.LastError != nil && *j.LastError != "" {
			c := j
			sawRetrying = &c
		}
		if j.Counts != lastCounts || j.Status != "running" {
			lastCounts, lastChange = j.Counts, time.Now()
		} else if d := time.Since(lastChange); d > longestStall {
			longestStall = d
			if d > bound {
				t.Fatalf("running without progress for %v (bound %v), saying nothing: %s", d, bound, j)
			}
		}
		if j.Status == "completed" || j.Status == "failed" || j.Status == "paused" || j.Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not finished within 60 s: %s", j)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !dropped {
		t.Logf("the job finished before the faults, within a second")
	}
	// The checks below read through the SDK: no more faults, no latency.
	if code, body := adminFault(t, http.MethodDelete, r.adminAddr, "", r.auth); code != http.StatusNoContent {
		t.Fatalf("DELETE /$emulator/faults = %d %s", code, body)
	}
	took := time.Since(createdAt)
	if sawRetrying != nil {
		t.Logf("seen retrying: %s", *sawRetrying)
		if sawRetrying.RetryAttempts < 1 {
			t.Errorf("retrying without its attempts: %s", *sawRetrying)
		}
	} else {
		t.Logf("never seen retrying; longest time running without progress %v", longestStall)
	}
	t.Logf("finished in %v, statuses polled %v: %s", took.Round(time.Millisecond), statuses, j)
	if j.Status != "completed" || j.Counts.Completed != n || j.Counts.Failed != 0 || j.Counts.Pending != 0 {
		t.Fatalf("want completed with %d completed: %s", n, j)
	}

	copies := originals(r.peekAll("target", mainQueue))
	if left := r.peekAll("orders", azservicebus.SubQueueDeadLetter); len(left) != 0 {
		states := map[string]string{}
		for _, it := range r.jobMessages(created.ID, "") {
			states[it.MessageID] = it.State
		}
		for i, m := range left[:min(5, len(left))] {
			t.Logf("left in the DLQ %d: %s seq %d delivery count %d locked until %v; job item state %q; copies in the destination %d",
				i, m.MessageID, *m.SequenceNumber, m.DeliveryCount, m.LockedUntil, states[m.MessageID], copies[m.MessageID])
		}
		t.Errorf("a completed job left %d of %d originals in the DLQ", len(left), n)
	}
	if len(copies) != n {
		t.Errorf("%d distinct originals in the destination, want %d", len(copies), n)
	}
	for i := range n {
		id := fmt.Sprintf("hang-%d", i)
		if copies[id] != 1 {
			t.Errorf("%d copies of %s in the destination, want 1", copies[id], id)
		}
	}
}

// TestReplayFaultsPauseAndCancel: a paced job (20/s) is paused, and its
// counts stop moving (what was in flight when pause answered may finish
// within the first second); resumed, it moves again; cancelled, it says
// cancelled with the unsent messages counted as cancelled, and those
// originals are still in the DLQ, with no copy beside its original.
func TestReplayFaultsPauseAndCancel(t *testing.T) {
	const n = 200
	r := newFaultRig(t)
	r.seed("pace", n)
	r.serve()

	created := r.replayAll(n, map[string]any{"rate_per_second": 20})
	var j faultJob
	waitForWithin(t, 20*time.Second, "40 completed", func() bool { j = r.job(created.ID); return j.Counts.Completed >= 40 })

	var paused faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/pause", nil, &paused); code != http.StatusOK || paused.Status != "paused" {
		t.Fatalf("pause: %d %s", code, paused)
	}
	time.Sleep(time.Second)
	after1 := r.job(created.ID)
	time.Sleep(2 * time.Second)
	after3 := r.job(created.ID)
	t.Logf("pause answered: %+v; 1 s later: %+v; 3 s later: %+v", paused.Counts, after1.Counts, after3.Counts)
	if after1.Status != "paused" || after3.Status != "paused" {
		t.Errorf("status after pause: %s, then %s", after1.Status, after3.Status)
	}
	if after3.Counts != after1.Counts {
		t.Errorf("counts moved while paused: 1 s after pause %+v, 3 s after %+v", after1.Counts, after3.Counts)
	}
	// In flight when pause answered: at most one second's worth of sends
	// (20) for a paced job, and their completes.
	if moved := after1.Counts.Completed - paused.Counts.Completed; moved > 20 {
		t.Errorf("%d completed after pause answered, want at most one second's worth (20)", moved)
	}
	if after3.Counts.Completed >= n {
		t.Fatalf("the job finished before it could be paused: %s", after3)
	}

	var resumed faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/resume", map[string]any{}, &resumed); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, resumed)
	}
	waitForWithin(t, 20*time.Second, "progress after resume", func() bool {
		j = r.job(created.ID)
		return j.Counts.Completed >= after3.Counts.Completed+20
	})

	var cancelling faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/cancel", nil, &cancelling); code != http.StatusOK ||
		(cancelling.Status != "cancelling" && cancelling.Status != "cancelled") {
		t.Fatalf("cancel: %d %s", code, cancelling)
	}
	waitForWithin(t, 20*time.Second, "the cancel", func() bool { j = r.job(created.ID); return j.Status == "cancelled" })
	r.checkCancelled(created.ID, j, n)
}

// checkCancelled checks a cancelled job j (jobID) of n messages against the
// broker: its counts add up with none pending or sent, every copy in the
// destination once and never beside its original, every original the
// cancel left unsent still in the DLQ.
func (r *faultRig) checkCancelled(jobID string, j faultJob, n int) {
	t := r.t
	t.Helper()
	c := j.Counts
	if c.Cancelled == 0 || c.Pending != 0 || c.Sent != 0 || c.Completed+c.Cancelled+c.Failed+c.Skipped != n {
		t.Errorf("cancelled job's counts: %s", j)
	}

	dlq := originals(r.peekAll("orders", azservicebus.SubQueueDeadLetter))
	copies := originals(r.peekAll("target", mainQueue))
	if len(copies) != c.Completed {
		t.Errorf("%d copies in the destination, want the %d completed", len(copies), c.Completed)
	}
	for id, k := range copies {
		if k != 1 {
			t.Errorf("%d copies of %s", k, id)
		}
		if dlq[id] != 0 {
			t.Errorf("%s has a copy in the destination and its original in the DLQ", id)
		}
	}
	// Every original the cancel left unsent is still in the DLQ; a failed
	// one (its copy was being sent) is in one place or the other.
	if len(dlq) < c.Cancelled || len(dlq) > c.Cancelled+c.Failed || len(dlq)+len(copies) != n {
		t.Errorf("%d originals in the DLQ and %d copies, want %d cancelled (+ up to %d failed) in the DLQ, %d in all",
			len(dlq), len(copies), c.Cancelled, c.Failed, n)
	}
	// Every message the job lists as cancelled is one of those originals.
	cancelled := 0
	for _, it := range r.jobMessages(jobID, "") {
		if it.State != "cancelled" {
			continue
		}
		cancelled++
		if dlq[it.MessageID] != 1 {
			t.Errorf("cancelled %s is not in the DLQ once (%d)", it.MessageID, dlq[it.MessageID])
		}
	}
	if cancelled != c.Cancelled {
		t.Errorf("%d cancelled messages listed, counts say %d", cancelled, c.Cancelled)
	}
}

type jobItem struct {
	MessageID string
	State     string
}

// jobMessages lists a job's messages (in state, "" for all), every page.
func (r *faultRig) jobMessages(id, state string) []jobItem {
	t := r.t
	t.Helper()
	var all []jobItem
	cursor := ""
	for {
		var page struct {
			Messages []struct {
				Message struct {
					MessageID string `json:"message_id"`
				} `json:"message"`
				State string `json:"state"`
			} `json:"messages"`
			NextCursor *string `json:"next_cursor"`
		}
		q := url.Values{"limit": {"500"}}
		if state != "" {
			q.Set("state", state)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if code := r.api("GET", "/api/v1/jobs/"+id+"/messages?"+q.Encode(), nil, &page); code != http.StatusOK {
			t.Fatalf("GET job %s messages?%s = %d", id, q.Encode(), code)
		}
		for _, m := range page.Messages {
			all = append(all, jobItem{m.Message.MessageID, m.State})
		}
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

// TestReplayFaultsCancelledStateFilter: docs/api.md lists "cancelled"
// among the states GET /api/v1/jobs/{id}/messages?state=S filters by.
func TestReplayFaultsCancelledStateFilter(t *testing.T) {
	const n = 20
	r := newFaultRig(t)
	r.seed("filter", n)
	r.serve()
	created := r.replayAll(n, map[string]any{"rate_per_second": 1})
	var j faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/cancel", nil, &j); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, j)
	}
	waitForWithin(t, 20*time.Second, "the cancel", func() bool { j = r.job(created.ID); return j.Status == "cancelled" })
	if j.Counts.Cancelled == 0 {
		t.Fatalf("nothing cancelled: %s", j)
	}
	items := r.jobMessages(created.ID, "cancelled")
	if len(items) != j.Counts.Cancelled {
		t.Errorf("%d messages listed as cancelled, counts say %d", len(items), j.Counts.Cancelled)
	}
	for _, it := range items {
		if it.State != "cancelled" {
			t.Errorf("state=cancelled listed %+v", it)
		}
	}
}

// TestReplayFaultsCanaryPausesOnRedeadletter: the destination's consumer
// still dead-letters everything. A job with a canary of 5 and
// pause_on_redeadletter 0.5 sends 5 copies, sees them dead-lettered again
// (the serve's ingester catalogs them) and pauses itself saying so; the
// other originals are still in the source DLQ.
func TestReplayFaultsCanaryPausesOnRedeadletter(t *testing.T) {
	const n, canary = 40, 5
	r := newFaultRig(t)
	r.seed("canary", n)
	r.serve()

	// The consumer that still rejects every message.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	rcv, err := r.client.NewReceiverForQueue("target", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rejected sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer rcv.Close(context.Background())
		reason := "StillBroken"
		for ctx.Err() == nil {
			ms, err := rcv.ReceiveMessages(ctx, 10, nil)
			if err != nil {
				continue
			}
			for _, m := range ms {
				if rcv.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason}) == nil {
					rejected.Store(m.MessageID, true)
				}
			}
		}
	}()

	created := r.replayAll(n, map[string]any{"canary_count": canary, "canary_watch": "30s", "pause_on_redeadletter": 0.5})
	start := time.Now()
	var j faultJob
	waitForWithin(t, 40*time.Second, "the job to pause itself", func() bool {
		j = r.job(created.ID)
		if j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled" {
			t.Fatalf("the job ended instead of pausing: %s", j)
		}
		return j.Status == "paused"
	})
	t.Logf("paused after %v: %s", time.Since(start).Round(time.Millisecond), j)
	if j.PausedReason == nil || !strings.Contains(*j.PausedReason, fmt.Sprint(canary)) {
		t.Errorf("paused_reason does not name the %d re-dead-lettered copies: %s", canary, j)
	}
	if sent := j.Counts.Sent + j.Counts.Completed; sent != canary {
		t.Errorf("%d copies sent before the pause, want the canary's %d: %s", sent, canary, j)
	}
	waitForWithin(t, 10*time.Second, "counts.redeadlettered = 5", func() bool {
		j = r.job(created.ID)
		return j.Counts.Redeadlettered == canary
	})
	if j.CanaryVerdict == nil || *j.CanaryVerdict != "failed" {
		t.Errorf("canary_verdict: %s", j)
	}
	// Nothing more is sent while it stays paused.
	time.Sleep(time.Second)
	if again := r.job(created.ID); again.Status != "paused" || again.Counts.Completed+again.Counts.Sent != canary {
		t.Errorf("the paused job moved: %s", again)
	}

	dlq := originals(r.peekAll("orders", azservicebus.SubQueueDeadLetter))
	if len(dlq) != n-canary {
		t.Errorf("%d originals in the source DLQ, want %d", len(dlq), n-canary)
	}
	back := originals(r.peekAll("target", azservicebus.SubQueueDeadLetter))
	if len(back) != canary {
		t.Errorf("%d copies dead-lettered again in the destination, want %d", len(back), canary)
	}
	for id := range back {
		if dlq[id] != 0 {
			t.Errorf("%s is both in the source DLQ and dead-lettered again as a copy", id)
		}
	}
}

// mainQueue is a queue's own messages, not a subqueue's.
const mainQueue azservicebus.SubQueue = 0
