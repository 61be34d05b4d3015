package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestReplicasHoldDiesWithItsReplica: jobs on one queue run one at a time
// across replicas through a hold in the store (job_sources), and a hold is
// alive on PostgreSQL only while its job's claim heart-beats. Two `dlqdash
// serve` processes on one PostgreSQL and one emulator; a paced replay of
// every other message of a dead-letter queue runs on one replica (X); a
// second replay of the other messages, submitted to the other replica (Y),
// waits for it, saying so in its paused_reason, and sends nothing. X is
// killed with SIGKILL in the middle of its job: its hold must not keep the
// queue, so a job on the queue makes progress again within the issue's
// 30 s (the claim's 20 s of silence, then the next look for work), both
// jobs complete with nothing failed, the target (duplicate detection on)
// holds every message exactly once, the DLQ is empty, and `dlqdash audit
// verify` finds the chain intact with every job's creation and end.
func TestReplicasHoldDiesWithItsReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two serve processes on PostgreSQL and waits for a dead replica's claim to go stale")
	}
	const (
		n     = 40 // 20 a job
		rate  = 3  // a job's copies a second: job 1 takes about 7 s
		queue = "dedup"
		bound = 30 * time.Second
	)
	db := pgtest.Start(t).Database(t)
	emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	props := broker.DefaultQueueProperties()
	props.RequiresDuplicateDetection, props.DuplicateDetectionHistoryTimeWindow, props.LockDuration = true, 10*time.Minute, 5*time.Second
	if _, err := emu.Namespace().CreateQueue(queue, props); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	r := &threeReplicas{t: t, ns: emu.Namespace(), db: db, conn: conn, pods: map[string]*child{}}
	pods := []string{"pod-a", "pod-b"}
	for _, id := range pods {
		c := startChild(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms",
			"--admin-endpoint", emu.AdminURL(), "--replica-id", id},
			envConnectionString+"="+emu.ConnectionString(), envAuditKey+"="+strings.Repeat("k", 32))
		t.Cleanup(c.kill)
		r.pods[id] = c
	}
	want := r.deadLetterTo(queue, "hold", n)
	waitForWithin(t, 60*time.Second, "the dead letters cataloged", func() bool {
		return exactlyOnce(r.cataloged("pod-a"), want) == ""
	})
	catalog := r.catalogIDs("pod-a")
	var halves [2][]string
	owner := map[string]int{} // message id -> the job (0 or 1) that replays it
	for i, id := range want {
		halves[i%2] = append(halves[i%2], catalog[id])
		owner[id] = i % 2
	}

	type jobRow struct {
		holder string
		term   int64
		status string
		done   int64 // sent + completed
		failed int64
		reason string
	}
	read := func(id string) jobRow {
		t.Helper()
		var j jobRow
		if err := conn.QueryRow(ctx, `SELECT coalesce(claimed_by, ''), claim_term, status, sent + completed, failed, paused_reason
			FROM jobs WHERE id::text = $1`, id).Scan(&j.holder, &j.term, &j.status, &j.done, &j.failed, &j.reason); err != nil {
			t.Fatal(err)
		}
		return j
	}
	dump := func() string {
		var b strings.Builder
		for id, c := range r.pods {
			fmt.Fprintf(&b, "--- %s:\n%s\n", id, c.stderr.String())
		}
		return b.String()
	}
	submit := func(pod string, ids []string) string {
		t.Helper()
		var job struct{ ID any }
		if code := r.pods[pod].api(t, "POST", "/api/v1/jobs", map[string]any{"action": "replay", "rate_per_second": rate, "ids": ids}, &job); code != 201 {
			t.Fatalf("POST /api/v1/jobs on %s = %d", pod, code)
		}
		return strings.Trim(fmt.Sprint(job.ID), `"`)
	}

	// Job 1 runs on X.
	job1 := submit("pod-a", halves[0])
	var x string
	pollUntil(t, 30*time.Second, "a replica running job "+job1, func() bool {
		j := read(job1)
		x = j.holder
		return j.holder != "" && j.status == "running" && j.done > 0
	}, dump)
	y := pods[0]
	if y == x {
		y = pods[1]
	}
	// Job 2, submitted to Y, waits for job 1 and sends nothing meanwhile.
	job2 := submit(y, halves[1])
	waiting := "waiting for job " + job1 + ", which is reading " + queue + "/$DeadLetterQueue"
	var j2 jobRow
	pollUntil(t, 20*time.Second, "job "+job2+" saying it waits for job "+job1, func() bool {
		j2 = read(job2)
		return j2.status == "running" && strings.Contains(j2.reason, waiting)
	}, dump)
	t.Logf("job %s runs on %s; job %s (claimed by %s) says %q", job1, x, job2, j2.holder, j2.reason)

	// SIGKILL X at a random point of job 1's run.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 20))
	time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
	j1, j2 := read(job1), read(job2)
	if j1.status != "running" || j1.holder != x || j1.done >= n/2 {
		t.Fatalf("job %s is %s under %q with %d of %d done before the kill: make it slower", job1, j1.status, j1.holder, j1.done, n/2)
	}
	if j2.done != 0 {
		t.Fatalf("job %s sent %d while job %s read the same queue", job2, j2.done, job1)
	}
	_ = r.pods[x].cmd.Process.Signal(syscall.SIGKILL)
	_ = r.pods[x].cmd.Wait()
	killAt := time.Now()
	dead := x
	delete(r.pods, x)
	t.Logf("%s killed with job %s at %d of %d (term %d), job %s (claimed by %q) waiting", x, job1, j1.done, n/2, j1.term, job2, j2.holder)

	// A job on the queue moves again within the bound: job 2 once job 1's
	// hold died with its claim, or job 1 adopted by Y (its hold taken over).
	var first string
	pollUntil(t, bound, "a job on the queue moving again after "+x+" was killed", func() bool {
		a, b := read(job1), read(job2)
		switch {
		case b.done > j2.done:
			first = "job " + job2 + " (the waiting one)"
		case a.done > j1.done && a.holder == y && a.term > j1.term:
			first = "job " + job1 + " (adopted by " + y + ")"
		}
		return first != ""
	}, dump)
	took := time.Since(killAt)
	t.Logf("progress again %s after the kill: %s", took.Round(100*time.Millisecond), first)

	// Both complete, under Y, nothing failed.
	for _, id := range []string{job1, job2} {
		pollUntil(t, 90*time.Second, "job "+id+" completing", func() bool {
			j := read(id)
			if j.status == "failed" || j.status == "paused" || j.status == "cancelled" || j.failed > 0 {
				t.Fatalf("job %s %s with %d failed (%q)\n%s", id, j.status, j.failed, j.reason, dump())
			}
			return j.status == "completed"
		}, dump)
		var final struct {
			Status string
			Counts struct{ Completed, Failed, Skipped, Pending int }
		}
		r.pods[y].api(t, "GET", "/api/v1/jobs/"+id, nil, &final)
		if final.Status != "completed" || final.Counts.Completed != n/2 || final.Counts.Failed+final.Counts.Skipped+final.Counts.Pending != 0 {
			t.Errorf("job %s on %s: %s, counts %+v; want completed with %d completed and nothing else", id, y, final.Status, final.Counts, n/2)
		}
	}

	// Every message on the target exactly once (a copy sent again after
	// the kill carries the same id, which duplicate detection drops).
	client := testClient(t, emu.ConnectionString())
	rt, err := client.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]int{}
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ms, _ := rt.ReceiveMessages(rctx, 100, nil)
		cancel()
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
	jobOf := [2]string{job1, job2}
	var wantCopies []string
	for _, id := range want {
		wantCopies = append(wantCopies, id+"/dlqdash-"+jobOf[owner[id]])
	}
	if problem := exactlyOnce(copies, wantCopies); problem != "" {
		t.Errorf("copies on the target (%d for %d messages): %s", total(copies), n, problem)
	}
	dl, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	left, err := dl.PeekMessages(ctx, 10, nil)
	dl.Close(ctx)
	if err != nil || len(left) != 0 {
		t.Errorf("%d messages left in the DLQ (%v)", len(left), err)
	}

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"audit", "verify", "--db", db}, env(envAuditKey, strings.Repeat("k", 32)), &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), "audit chain intact:") {
		t.Errorf("audit verify after %s was killed exited %d: %s%s", dead, code, out.String(), errOut.String())
	}
	if took > bound {
		t.Errorf("progress again %s after the kill; want within %s", took, bound)
	}
}
