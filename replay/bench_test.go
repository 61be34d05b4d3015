package replay_test

// Benchmarks of the engine end to end, on the harness of emulator_test.go:
// the emulator (its DLQs filled through package broker, see emulatortest), the
// real adapter and SDK over loopback AMQP, SQLite, the real ingester (at
// the product's cadence, as `dlqdash serve` runs it) and the audit log.
// Figures and how to run them: BENCHMARKS.md, "Replay".

import (
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
)

const benchQueue = "orders"

// benchEnv starts an environment whose queue benchQueue has lock duration
// lock and a DLQ of n messages of 1 KiB (emulatortest.FillDLQ: ids msg-<i>, in
// that sequence order), with application property tenant = t<i mod 10>,
// and waits until the ingester has cataloged all of them.
func benchEnv(b *testing.B, n int, lock time.Duration, counter ...*storeCounter) *env {
	b.Helper()
	var c *storeCounter
	if len(counter) > 0 {
		c = counter[0]
	}
	e := newEnv(b, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue(benchQueue, broker.QueueProperties{LockDuration: lock}); err != nil {
			b.Fatal(err)
		}
		emulatortest.FillDLQ(b, ns, benchQueue, n, 1024, func(i int) map[string]any {
			return map[string]any{"tenant": fmt.Sprintf("t%d", i%10)}
		})
	}, envOptions{ingest: &dlq.Config{Namespace: "emulator", Poll: time.Second}, counter: c})
	waitFor(b, fmt.Sprintf("%d cataloged dead letters", n), 5*time.Minute, func() bool {
		c, err := e.st.PresentCount(b.Context(), benchQueue, dlq.SubQueueDeadLetter)
		if err != nil {
			b.Fatal(err)
		}
		return c == int64(n)
	})
	return e
}

// jobProfile writes a CPU profile of the job alone (not of filling and
// cataloging the DLQ) to $DLQDASH_JOB_CPUPROFILE when it is set; the
// function it returns stops it.
func jobProfile(b *testing.B) func() {
	path := os.Getenv("DLQDASH_JOB_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the CPU time the process has used (user and system, every
// thread).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// progress is one sample of a running job.
type progress struct {
	at       time.Duration // since submit
	counts   replay.Counts
	received int64 // messages the emulator delivered from the DLQ since submit
}

// runJob submits req and samples the job every 50 ms until it is finished
// or paused. It returns the job, the time from submit to its finish
// (finished_at), and the samples.
func (e *env) runJob(req replay.Request, within time.Duration) (replay.Job, time.Duration, []progress) {
	e.t.Helper()
	e.srv.ResetStats()
	start := time.Now()
	_, job := e.submit(req)
	e.t.Logf("submit (plan and freeze %d messages): %s", job.Total, time.Since(start).Round(time.Millisecond))
	var samples []progress
	deadline := start.Add(within)
	for {
		j, err := e.st.Job(e.t.Context(), job.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		now := time.Since(start)
		samples = append(samples, progress{at: now, counts: j.Counts,
			received: e.srv.Stats().Entity(benchQueue + "/$DeadLetterQueue").Receive})
		if j.Status.Finished() || j.Status == replay.StatusPaused {
			took := now
			if j.FinishedAt != nil {
				took = j.FinishedAt.Sub(start)
			}
			return j, took, samples
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d not finished after %s: %+v", job.ID, within, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logProgress logs one sample every `every` (and the last), which shows
// the job's passes: received grows by about the DLQ's depth per pass.
func logProgress(tb testing.TB, samples []progress, every time.Duration) {
	tb.Helper()
	next := time.Duration(0)
	for i, s := range samples {
		if s.at >= next || i == len(samples)-1 {
			tb.Logf("  %6.1f s: completed %6d, sent %5d, pending %6d, failed %d; DLQ deliveries %7d",
				s.at.Seconds(), s.counts.Completed, s.counts.Sent, s.counts.Pending, s.counts.Failed, s.received)
			next = s.at + every
		}
	}
}

// sentAt is when every copy had been sent (the first sample with n copies
// sent or completed).
func sentAt(samples []progress, n int) time.Duration {
	for _, s := range samples {
		if s.counts.Sent+s.counts.Completed >= n {
			return s.at
		}
	}
	return 0
}

// brokerOriginals reads every message of a queue's subqueue from the
// broker (no AMQP, no locks) and returns, per message, what names the
// original: the copy's dlqdash.original_message_id in the main queue, the
// MessageId in the DLQ.
func brokerOriginals(tb testing.TB, ns *broker.Namespace, path string, copies bool) []string {
	tb.Helper()
	var out []string
	from := int64(0)
	for {
		ds, err := ns.Peek(path, from, 5000)
		if err != nil {
			tb.Fatal(err)
		}
		if len(ds) == 0 {
			return out
		}
		for _, d := range ds {
			var id string
			if copies {
				id, _ = d.Message.ApplicationProperties[replay.PropOriginalMessageID].(string)
			} else if d.Message.Properties != nil {
				id, _ = d.Message.Properties.MessageID.(string)
			}
			out = append(out, id)
		}
		from = ds[len(ds)-1].SequenceNumber + 1
	}
}

// checkSet fails unless got holds each of want exactly once and nothing
// else.
func checkSet(tb testing.TB, what string, got []string, want map[string]bool) {
	tb.Helper()
	seen := make(map[string]bool, len(got))
	dups, strangers := 0, 0
	for _, id := range got {
		if seen[id] {
			dups++
		}
		seen[id] = true
		if !want[id] {
			strangers++
		}
	}
	missing := 0
	for id := range want {
		if !seen[id] {
			missing++
		}
	}
	if len(got) != len(want) || dups+strangers+missing > 0 {
		tb.Fatalf("%s: %d messages, want %d: %d duplicated, %d not expected, %d missing", what, len(got), len(want), dups, strangers, missing)
	}
}

func msgIDs(n int, keep func(i int) bool) map[string]bool {
	out := map[string]bool{}
	for i := range n {
		if keep(i) {
			out[fmt.Sprintf("msg-%d", i)] = true
		}
	}
	return out
}

// BenchmarkReplayUnthrottled replays a whole DLQ of 20,000 1 KiB messages
// (a frozen filter on the entity) to its own queue, without a rate limit:
// the time from submit to the job's completion (target ≥ 1,000 msg/s).
// Afterwards the queue holds exactly one copy of each and the DLQ is
// empty.
//
//	go test -run '^$' -bench ReplayUnthrottled -benchtime 1x ./replay/
func BenchmarkReplayUnthrottled(b *testing.B) {
	const n = 20_000
	for range b.N {
		b.StopTimer()
		c := &storeCounter{}
		e := benchEnv(b, n, time.Minute, c)
		c.reset() // the engine's calls from submit on
		stopProfile := jobProfile(b)
		cpu0 := cpuTime()
		b.StartTimer()
		j, took, samples := e.runJob(replay.Request{Action: replay.ActionReplay,
			Selection: replay.Selection{Filter: &dlq.Filter{Entity: benchQueue, SubQueue: dlq.SubQueueDeadLetter}}}, 10*time.Minute)
		b.StopTimer()
		cpu := cpuTime() - cpu0
		stopProfile()
		calls, rows, which := c.total()
		b.Logf("engine store and audit calls: %d (%s); %d item updates", calls, which, rows)
		batches := float64(n) / float64(replay.DefaultBatch)
		b.ReportMetric(float64(calls)/batches, "store-calls/batch")
		// The process's CPU time (emulator, SDK, ingester and engine
		// together) varies less with the machine's load than the rate.
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
		logProgress(b, samples, time.Second)
		if j.Status != replay.StatusCompleted || j.Counts.Completed != n || j.Flagged != 0 {
			b.Fatalf("job = %+v", j)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "completed-msg/s")
		if s := sentAt(samples, n); s > 0 {
			b.ReportMetric(float64(n)/s.Seconds(), "sent-msg/s")
		}
		b.ReportMetric(took.Seconds(), "s/job")
		b.ReportMetric(float64(samples[len(samples)-1].received)/n, "dlq-reads/msg")

		all := msgIDs(n, func(int) bool { return true })
		checkSet(b, "copies in "+benchQueue, brokerOriginals(b, e.ns, benchQueue, true), all)
		if left := brokerOriginals(b, e.ns, benchQueue+"/$DeadLetterQueue", false); len(left) != 0 {
			b.Fatalf("%d messages left in the DLQ", len(left))
		}
		b.StartTimer()
	}
}

// BenchmarkReplaySelective100k replays every 10th message of a
// 100,000-message DLQ, selected by a frozen filter on an application
// property (tenant = t0): the engine must read the DLQ from its head,
// leaving the unselected messages locked. With a lock duration of 30 s,
// without and with 20 ms of latency on every frame the emulator sends
// (set after seeding and cataloging); and with a 10 s lock and 20 ms, where
// one pass cannot reach the whole DLQ (dlq-reads/msg shows the passes).
// Afterwards exactly the selected 10,000 have one copy each in the queue
// and the other 90,000 are still in the DLQ, each once.
//
//	go test -run '^$' -bench ReplaySelective100k -benchtime 1x ./replay/
func BenchmarkReplaySelective100k(b *testing.B) {
	for _, c := range []struct{ lock, latency time.Duration }{
		{30 * time.Second, 0}, {30 * time.Second, 20 * time.Millisecond}, {10 * time.Second, 20 * time.Millisecond},
	} {
		b.Run(fmt.Sprintf("lock=%s/latency=%s", c.lock, c.latency), func(b *testing.B) { benchSelective(b, c.lock, c.latency) })
	}
}

func benchSelective(b *testing.B, lock, latency time.Duration) {
	const n, every = 100_000, 10
	for range b.N {
		b.StopTimer()
		e := benchEnv(b, n, lock)
		f := &dlq.Filter{Entity: benchQueue, SubQueue: dlq.SubQueueDeadLetter, Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t0"}}}
		selected := map[string]bool{}
		if err := e.st.ExportMessages(b.Context(), *f, func(r dlq.Record) error {
			selected[r.MessageID] = true
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		want := msgIDs(n, func(i int) bool { return i%every == 0 })
		checkSet(b, "the catalog's selection", slices.Collect(maps.Keys(selected)), want)
		e.srv.SetLatency(latency)
		b.StartTimer()
		j, took, samples := e.runJob(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Filter: f}}, 20*time.Minute)
		b.StopTimer()
		e.srv.SetLatency(0)
		logProgress(b, samples, 2*time.Second)
		if j.Status != replay.StatusCompleted || j.Counts.Completed != n/every || j.Flagged != 0 {
			b.Fatalf("job = %+v", j)
		}
		b.ReportMetric(took.Seconds(), "s/job")
		b.ReportMetric(float64(n/every)/took.Seconds(), "completed-msg/s")
		b.ReportMetric(float64(samples[len(samples)-1].received)/n, "dlq-reads/msg")

		checkSet(b, "copies in "+benchQueue, brokerOriginals(b, e.ns, benchQueue, true), want)
		checkSet(b, "messages left in the DLQ", brokerOriginals(b, e.ns, benchQueue+"/$DeadLetterQueue", false),
			msgIDs(n, func(i int) bool { return i%every != 0 }))
		b.StartTimer()
	}
}

// BenchmarkReplayRateLimit runs a job at 50 messages a second over 90 s
// worth of messages (4,500) and measures the rate it achieved over the
// middle minute (15–75 s after submit: away from the token bucket's
// initial burst and the tail), as the slope of the completions' times
// (job_messages.updated_at) fitted by least squares, and its deviation from
// 50/s in per cent (target within 5 %). With -short: 1,000 messages, the
// middle 10 s.
//
//	go test -run '^$' -bench ReplayRateLimit -benchtime 1x ./replay/
func BenchmarkReplayRateLimit(b *testing.B) {
	const rate = 50.0
	n, from, to := 4500, 15*time.Second, 75*time.Second
	if testing.Short() {
		n, from, to = 1000, 5*time.Second, 15*time.Second
	}
	for range b.N {
		b.StopTimer()
		e := benchEnv(b, n, time.Minute)
		b.StartTimer()
		start := time.Now()
		j, took, samples := e.runJob(replay.Request{Action: replay.ActionReplay, RatePerSecond: rate,
			Selection: replay.Selection{Filter: &dlq.Filter{Entity: benchQueue, SubQueue: dlq.SubQueueDeadLetter}}}, 10*time.Minute)
		b.StopTimer()
		logProgress(b, samples, 5*time.Second)
		if j.Status != replay.StatusCompleted || j.Counts.Completed != n {
			b.Fatalf("job = %+v", j)
		}
		// The completions' times, relative to submit.
		var at []float64
		cursor := ""
		for {
			items, next, err := e.st.ListItems(b.Context(), j.ID, replay.ItemCompleted, 1000, cursor)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range items {
				at = append(at, it.UpdatedAt.Sub(start).Seconds())
			}
			if next == "" {
				break
			}
			cursor = next
		}
		slices.Sort(at)
		// Least-squares slope of the completion count over time, within
		// the window.
		var sx, sy, sxx, sxy, k float64
		for i, t := range at {
			if t < from.Seconds() || t >= to.Seconds() {
				continue
			}
			x, y := t, float64(i+1)
			sx, sy, sxx, sxy, k = sx+x, sy+y, sxx+x*x, sxy+x*y, k+1
		}
		if k < 2 {
			b.Fatalf("%d completions within %s–%s", int(k), from, to)
		}
		slope := (k*sxy - sx*sy) / (k*sxx - sx*sx)
		b.ReportMetric(slope, "mid-msg/s")
		b.ReportMetric(100*(slope-rate)/rate, "deviation-%")
		b.ReportMetric(k/(to-from).Seconds(), "mid-count/s")
		b.ReportMetric(float64(n)/took.Seconds(), "overall-msg/s")
		// The largest burst within the window (completions less than
		// 100 ms apart): a paced job goes a bucketful at a time.
		burst, n0 := 0, 0
		for i := range at {
			if i > 0 && at[i]-at[i-1] >= 0.1 {
				n0 = i
			}
			if at[i] >= from.Seconds() && at[i] < to.Seconds() {
				burst = max(burst, i-n0+1)
			}
		}
		b.ReportMetric(float64(burst), "mid-burst")
		b.StartTimer()
	}
}
