package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestReplicasReplayJobSurvivesKills is issue 20's end-to-end test of job
// claims: three `dlqdash serve` processes (distinct --replica-id) share one
// PostgreSQL database and one emulator; a paced replay is submitted to one
// of them; the replica whose claim runs the job (the jobs table's
// claimed_by) is killed with SIGKILL at a random point, a replacement with
// a new id is started so that two replicas always survive, and the kill is
// repeated on whichever replica runs the job next. The job must be adopted
// by a survivor each time (the adoption time, kill → progress again, is
// logged), end completed under a survivor's claim, deliver every message to
// its target exactly once, and leave the DLQ empty.
//
// The target queue has duplicate detection (as TestCrashDuringReplay's
// "dedup"): a copy sent again by an adopter after a kill mid-batch carries
// the same message id and is dropped by the broker, so the queue holds
// each message exactly once. The DLQ holds issue 20's 3,000 messages,
// replayed at 300/s: each kill comes within 1.2 s of progress, so the five
// kills fall within the first 1,800 copies, and each adoption waits about
// 20 s (a claim's silence before another replica takes it, plus the dead
// replica's message locks, 5 s here): about two minutes in all.
func TestReplicasReplayJobSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts serve replicas for about two minutes")
	}
	const (
		n     = 3000
		rate  = 300
		kills = 5
	)
	db := pgtest.Start(t).Database(t)
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"kills","Queues":[
		{"Name":"dedup","Properties":{"RequiresDuplicateDetection":true,"DuplicateDetectionHistoryTimeWindow":"PT10M","LockDuration":"PT5S"}}]}],"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	connStr, adminAddr := startTestEmulator(t, cfg)
	client := testClient(t, connStr)
	s, err := client.NewSender("dedup", nil)
	if err != nil {
		t.Fatal(err)
	}
	for first := 0; first < n; first += 500 {
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := first; i < min(first+500, n); i++ {
			id := fmt.Sprintf("kill-%d", i)
			if err := batch.AddMessage(&azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Close(ctx)
	r, err := client.NewReceiverForQueue("dedup", nil)
	if err != nil {
		t.Fatal(err)
	}
	deadLetterFrom(t, r, n, "Kills", "")
	r.Close(ctx)

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms", "--admin-endpoint", "http://" + adminAddr}
	envv := []string{envConnectionString + "=" + connStr, envAuditKey + "=" + strings.Repeat("k", 32)}
	replicas := map[string]*child{}
	next := 0
	spawn := func() string {
		next++
		id := fmt.Sprintf("pod-%d", next)
		replicas[id] = startChild(t, append(slices.Clone(args), "--replica-id", id), envv...)
		return id
	}
	defer func() {
		for _, c := range replicas {
			c.kill()
		}
	}()
	for range 3 {
		spawn()
	}
	// anyAlive is a replica that is up: the API answers the same from each.
	anyAlive := func() *child {
		for _, c := range replicas {
			return c
		}
		t.Fatal("no replica alive")
		return nil
	}
	waitForWithin(t, 60*time.Second, "the catalog of the DLQ", func() bool {
		var out struct{ Count int }
		replicas["pod-1"].api(t, "GET", "/api/v1/messages/count?entity=dedup&subqueue=dead_letter", nil, &out)
		return out.Count == n
	})

	var job struct{ ID string }
	if code := replicas["pod-1"].api(t, "POST", "/api/v1/jobs", map[string]any{"action": "replay", "rate_per_second": rate,
		"filter": map[string]any{"entity": "dedup", "subqueue": "dead_letter"}}, &job); code != http.StatusCreated {
		t.Fatalf("create the replay job: %d", code)
	}
	// claim reads the job's row: who holds it (empty when nobody), its
	// claim term, status and progress (sent + completed).
	claim := func() (holder string, term int64, status string, done int64) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT coalesce(claimed_by, ''), claim_term, status, sent + completed FROM jobs WHERE id::text = $1`, job.ID).
			Scan(&holder, &term, &status, &done); err != nil {
			t.Fatal(err)
		}
		return
	}
	dump := func() string {
		var b strings.Builder
		for id, c := range replicas {
			fmt.Fprintf(&b, "--- %s:\n%s\n", id, c.stderr.String())
		}
		return b.String()
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 20))
	// The first run: wait until some replica holds the job and has made progress.
	var runner string
	pollUntil(t, 30*time.Second, "a replica running the job", func() bool {
		h, _, st, d := claim()
		runner = h
		return h != "" && st == "running" && d > 0
	}, dump)
	t.Logf("job %s first claimed by %s", job.ID, runner)
	var adoptions []time.Duration
	killed := map[string]bool{}
	for len(adoptions) < kills {
		// A random point of the run: up to 1.2 s after progress was seen.
		time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
		h, term, st, before := claim()
		if st != "running" || h == "" || before >= n {
			break // it finished (or is finishing) before the next kill
		}
		c := replicas[h]
		if c == nil {
			t.Fatalf("the job is claimed by %q, which is not a replica this test runs", h)
		}
		c.kill()
		killAt := time.Now()
		delete(replicas, h)
		killed[h] = true
		fresh := spawn()
		// Adopted: another replica holds the job at a later term and has
		// moved it forward since the kill.
		pollUntil(t, 90*time.Second, fmt.Sprintf("a survivor adopting the job after %s was killed", h), func() bool {
			h2, term2, st2, d := claim()
			if st2 == "completed" {
				t.Fatalf("the job completed while its replica %s was dead (%d of %d sent)\n%s", h, d, n, dump())
			}
			runner = h2
			return h2 != "" && h2 != h && term2 > term && d > before
		}, dump)
		took := time.Since(killAt)
		adoptions = append(adoptions, took)
		if killed[runner] {
			t.Fatalf("the job runs on %s, killed before", runner)
		}
		t.Logf("kill %d: %s killed at %d of %d sent (term %d); %s adopted it, progress again after %s (replacement %s)",
			len(adoptions), h, before, n, term, runner, took.Round(100*time.Millisecond), fresh)
	}
	if len(adoptions) < 2 {
		t.Fatalf("only %d kills before the job finished: make it slower", len(adoptions))
	}

	// The end: completed, under the last claim of a survivor.
	last := runner
	pollUntil(t, 120*time.Second, "the job completing", func() bool {
		h, _, st, _ := claim()
		if h != "" {
			last = h
		}
		if st == "failed" || st == "paused" || st == "cancelled" {
			t.Fatalf("the job ended %s\n%s", st, dump())
		}
		return st == "completed"
	}, dump)
	if killed[last] || replicas[last] == nil {
		t.Errorf("the job finished under %s's claim, which is not a survivor", last)
	}
	var final struct {
		Status string
		Counts struct{ Completed, Failed, Skipped, Pending int }
	}
	anyAlive().api(t, "GET", "/api/v1/jobs/"+job.ID, nil, &final)
	if final.Status != "completed" {
		t.Errorf("the job's status on a survivor is %q; want completed", final.Status)
	}
	if final.Counts.Completed != n || final.Counts.Failed != 0 || final.Counts.Skipped != 0 || final.Counts.Pending != 0 {
		t.Errorf("job counts %+v; want %d completed and nothing else", final.Counts, n)
	}
	t.Logf("%d kills; adoption (kill → progress again) %v; finished on %s", len(adoptions), adoptions, last)

	// Every message on the target exactly once, by message id.
	rt, err := client.NewReceiverForQueue("dedup", nil)
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]int{}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		ms, _ := rt.ReceiveMessages(rctx, 500, nil)
		rcancel()
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			copies[m.MessageID]++
			if err := rt.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	rt.Close(ctx)
	t.Logf("%d copies received from the target for %d messages", total(copies), n)
	// A copy's message id is the original's with the job's suffix (the
	// engine's derived id, which duplicate detection acts on).
	for i := range n {
		id := fmt.Sprintf("kill-%d/dlqdash-%s", i, job.ID)
		if k := copies[id]; k != 1 {
			t.Errorf("message %s arrived %d times on the target", id, k)
		}
		delete(copies, id)
	}
	if len(copies) != 0 {
		t.Errorf("unexpected messages on the target: %v", copies)
	}
	dl, err := client.NewReceiverForQueue("dedup", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	left, err := dl.PeekMessages(ctx, 10, nil)
	dl.Close(ctx)
	if err != nil || len(left) != 0 {
		t.Errorf("%d messages left in the DLQ (%v)", len(left), err)
	}
}

// pollUntil is waitForWithin polling every 50 ms (the conditions here read
// the database, and adoptions take tens of seconds) that shows logs() when
// it gives up.
func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; the replicas' logs:\n%s", within, what, logs())
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not a wait for an event
	}
}

func total(m map[string]int) (sum int) {
	for _, k := range m {
		sum += k
	}
	return sum
}
