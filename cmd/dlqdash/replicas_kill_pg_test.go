package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/store/pgtest"
)

// Issue 20's end-to-end tests with three `dlqdash serve` replicas, each a
// real process (the test binary as dlqdash: TestMain), on one PostgreSQL
// database (store/pgtest) and one emulator: the ingesting replica killed
// (SIGKILL) or frozen past its lease (SIGSTOP, then SIGCONT).

// threeReplicas is the shared setup: an emulator with the queue "orders",
// a database, and three serve processes pod-a, pod-b and pod-c on them.
type threeReplicas struct {
	t    *testing.T
	ns   *broker.Namespace
	db   string
	conn *pgx.Conn
	pods map[string]*child
}

func startThreeReplicas(t *testing.T) *threeReplicas {
	t.Helper()
	if testing.Short() {
		t.Skip("runs three serve processes on PostgreSQL")
	}
	db := pgtest.Start(t).Database(t)
	emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	r := &threeReplicas{t: t, ns: emu.Namespace(), db: db, conn: conn, pods: map[string]*child{}}
	for _, id := range []string{"pod-a", "pod-b", "pod-c"} {
		c := startChild(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms",
			"--admin-endpoint", emu.AdminURL(), "--replica-id", id},
			envConnectionString+"="+emu.ConnectionString(), envAuditKey+"="+strings.Repeat("k", 32))
		t.Cleanup(func() {
			_ = c.cmd.Process.Signal(syscall.SIGCONT) // if the test froze it
			c.kill()
		})
		r.pods[id] = c
	}
	return r
}

// deadLetter sends n messages with the ids prefix-0 ... prefix-(n-1) to
// orders and dead-letters them (the broker's own API, as FillDLQ does,
// but with ids of the caller's choosing).
func (r *threeReplicas) deadLetter(prefix string, n int) []string {
	r.t.Helper()
	return r.deadLetterTo("orders", prefix, n)
}

// deadLetterTo is deadLetter to queue.
func (r *threeReplicas) deadLetterTo(queue, prefix string, n int) []string {
	t := r.t
	t.Helper()
	c, err := r.ns.NewConsumer(context.Background(), queue, broker.ConsumerOptions{Mode: broker.PeekLock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		m := &goamqp.Message{Data: [][]byte{[]byte(`{"order":"` + id + `"}`)}, Properties: &goamqp.MessageProperties{MessageID: id}}
		if err := r.ns.Send(queue, m); err != nil {
			t.Fatal(err)
		}
		d, ok := c.Next()
		if !ok {
			t.Fatal("the consumer has no message right after a send")
		}
		if err := r.ns.DeadLetter(d.LockToken, "SqlTimeout", "Timeout after 30000 ms", nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// ingester is the ingester_replica that pod's GET /api/v1/status names
// ("" when none, or when the pod does not answer).
func (r *threeReplicas) ingester(pod string) string {
	var st struct {
		Namespaces []struct {
			IngesterReplica *string `json:"ingester_replica"`
		} `json:"namespaces"`
	}
	if callAPI(r.t, r.pods[pod].addr, "GET", "/api/v1/status", nil, &st) != 200 ||
		len(st.Namespaces) != 1 || st.Namespaces[0].IngesterReplica == nil {
		return ""
	}
	return *st.Namespaces[0].IngesterReplica
}

// cataloged counts the messages that pod lists (GET /api/v1/messages,
// every page) by message id.
func (r *threeReplicas) cataloged(pod string) map[string]int {
	t := r.t
	t.Helper()
	counts := map[string]int{}
	cursor := ""
	for {
		var page struct {
			Messages []struct {
				MessageID *string `json:"message_id"`
			} `json:"messages"`
			NextCursor *string `json:"next_cursor"`
		}
		path := "/api/v1/messages?limit=500"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if code := callAPI(t, r.pods[pod].addr, "GET", path, nil, &page); code != 200 {
			t.Fatalf("GET %s on %s = %d", path, pod, code)
		}
		for _, m := range page.Messages {
			id := "<none>"
			if m.MessageID != nil {
				id = *m.MessageID
			}
			counts[id]++
		}
		if page.NextCursor == nil {
			return counts
		}
		cursor = *page.NextCursor
	}
}

// exactlyOnce says what is wrong with counts for want (every id once,
// nothing else), "" when nothing.
func exactlyOnce(counts map[string]int, want []string) string {
	var problems []string
	for _, id := range want {
		if n := counts[id]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s listed %d times", id, n))
		}
	}
	for id := range counts {
		if !slices.Contains(want, id) {
			problems = append(problems, fmt.Sprintf("unexpected %s", id))
		}
	}
	slices.Sort(problems)
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
	}
	return strings.Join(problems, "; ")
}

// lease is the ingest lease's holder and term, and the catalog's message
// rows and distinct (entity, subqueue, sequence number) among them, read
// from the database directly.
func (r *threeReplicas) lease() (holder string, term int64, rows, distinct int) {
	t := r.t
	t.Helper()
	if err := r.conn.QueryRow(t.Context(), `SELECT coalesce(holder, ''), term FROM leases WHERE name LIKE 'ingest/%'`).
		Scan(&holder, &term); err != nil {
		t.Fatal(err)
	}
	if err := r.conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT (entity_id, subqueue, sequence_number)) FROM messages`).
		Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	return
}

// agreedIngester waits until every pod in pods names the same ingester,
// one of pods, and returns it.
func (r *threeReplicas) agreedIngester(within time.Duration, pods ...string) string {
	r.t.Helper()
	var who string
	waitForWithin(r.t, within, fmt.Sprintf("%v agreeing on an ingester among them", pods), func() bool {
		who = r.ingester(pods[0])
		if !slices.Contains(pods, who) {
			return false
		}
		for _, p := range pods[1:] {
			if r.ingester(p) != who {
				return false
			}
		}
		return true
	})
	return who
}

func others(all []string, but string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == but })
}

var podIDs = []string{"pod-a", "pod-b", "pod-c"}

// TestThreeReplicasIngesterKilled: the ingesting replica is killed
// (SIGKILL) while dead letters keep arriving; another replica takes the
// namespace over within 10 s, and every dead letter sent before, during
// and after is cataloged exactly once.
func TestThreeReplicasIngesterKilled(t *testing.T) {
	r := startThreeReplicas(t)
	first := r.agreedIngester(30*time.Second, podIDs...)
	t.Logf("%s ingests", first)
	survivors := others(podIDs, first)

	want := r.deadLetter("before", 40)
	waitForWithin(t, 30*time.Second, "the first dead letters cataloged", func() bool {
		return exactlyOnce(r.cataloged(survivors[0]), want) == ""
	})
	_, term1, _, _ := r.lease()

	killed := time.Now()
	r.pods[first].kill()
	want = append(want, r.deadLetter("during", 25)...)
	var next string
	waitForWithin(t, 30*time.Second, "a survivor taking the namespace over", func() bool {
		next = r.ingester(survivors[0])
		return slices.Contains(survivors, next)
	})
	takeover := time.Since(killed)
	t.Logf("%s took over from %s %v after the kill", next, first, takeover.Round(time.Millisecond))
	if takeover > 10*time.Second {
		t.Errorf("takeover took %v, want at most 10 s", takeover)
	}
	want = append(want, r.deadLetter("after", 25)...)

	for _, p := range survivors {
		waitForWithin(t, 30*time.Second, "every dead letter on "+p, func() bool { return exactlyOnce(r.cataloged(p), want) == "" })
		// Each replica reads the lease when it tries to take it (every
		// renewal interval): its status names the new holder by then.
		var got string
		waitForWithin(t, 10*time.Second, p+" naming "+next+" as the ingester", func() bool {
			got = r.ingester(p)
			return got == next
		})
	}
	cataloged := time.Since(killed)
	t.Logf("all %d dead letters cataloged on both survivors %v after the kill", len(want), cataloged.Round(time.Millisecond))
	// A last look after a few renewals: nothing cataloged twice since.
	time.Sleep(3 * time.Second)
	for _, p := range survivors {
		if problem := exactlyOnce(r.cataloged(p), want); problem != "" {
			t.Errorf("on %s: %s", p, problem)
		}
	}
	holder, term, rows, distinct := r.lease()
	if holder != next || term <= term1 || rows != len(want) || distinct != len(want) {
		t.Errorf("lease held by %q at term %d (was %d), %d message rows (%d distinct); want %s, a later term, %d rows",
			holder, term, term1, rows, distinct, next, len(want))
	}
}

// TestThreeReplicasCutOffHolder: the ingesting replica is frozen
// (SIGSTOP) past its lease (store/replica's DefaultTTL, 6 s), another
// takes over; thawed (SIGCONT), the old holder writes nothing with its
// old term: no duplicate rows, the lease stays with the new holder at a
// later term, and the old holder's status names the new one.
func TestThreeReplicasCutOffHolder(t *testing.T) {
	r := startThreeReplicas(t)
	first := r.agreedIngester(30*time.Second, podIDs...)
	survivors := others(podIDs, first)
	want := r.deadLetter("before", 30)
	waitForWithin(t, 30*time.Second, "the first dead letters cataloged", func() bool {
		return exactlyOnce(r.cataloged(survivors[0]), want) == ""
	})
	_, term1, _, _ := r.lease()

	frozen := r.pods[first].cmd.Process
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Dead letters that the frozen holder may have had in flight, or that
	// its stale ingester would read again when it thaws.
	want = append(want, r.deadLetter("frozen", 20)...)
	var next string
	waitForWithin(t, 30*time.Second, "a survivor taking the namespace over", func() bool {
		next = r.ingester(survivors[0])
		return slices.Contains(survivors, next)
	})
	t.Logf("%s took over from the frozen %s %v after SIGSTOP", next, first, time.Since(stopped).Round(time.Millisecond))
	waitForWithin(t, 30*time.Second, "the dead letters sent while frozen cataloged", func() bool {
		return exactlyOnce(r.cataloged(next), want) == ""
	})
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s continued %v after SIGSTOP", first, time.Since(stopped).Round(time.Millisecond))
	want = append(want, r.deadLetter("thawed", 20)...)

	waitForWithin(t, 30*time.Second, "the thawed replica naming the new ingester", func() bool { return r.ingester(first) == next })
	for _, p := range podIDs {
		waitForWithin(t, 30*time.Second, "every dead letter on "+p, func() bool { return exactlyOnce(r.cataloged(p), want) == "" })
	}
	// The thawed replica's renewals (every 2 s) and polls (every 1 s) have
	// run several times by now: it must not have taken anything back.
	time.Sleep(4 * time.Second)
	for _, p := range podIDs {
		if problem := exactlyOnce(r.cataloged(p), want); problem != "" {
			t.Errorf("on %s: %s", p, problem)
		}
		// Each replica reads the lease when it tries to take it (every
		// renewal interval): its status names the new holder by then.
		var got string
		waitForWithin(t, 10*time.Second, p+" naming "+next+" as the ingester", func() bool {
			got = r.ingester(p)
			return got == next
		})
	}
	holder, term, rows, distinct := r.lease()
	if holder != next || term <= term1 || rows != len(want) || distinct != len(want) {
		t.Errorf("lease held by %q at term %d (was %d), %d message rows (%d distinct); want %s, a later term, %d rows",
			holder, term, term1, rows, distinct, next, len(want))
	}
	// The thawed replica knows it lost the lease of its old term (its own
	// clock gives up before the database would refuse it), and said so.
	lost := false
	for line := range strings.Lines(r.pods[first].stderr.String()) {
		var rec struct {
			Msg  string `json:"msg"`
			Term int64  `json:"term"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec.Msg, "lease") {
			t.Logf("%s: %s", first, strings.TrimSpace(line))
			lost = lost || rec.Msg == "lease lost" && rec.Term == term1
		}
	}
	if !lost {
		t.Errorf("%s never logged losing its lease at term %d", first, term1)
	}
}

// catalogIDs is the catalog ids (GET /api/v1/messages' "id") of the
// messages pod lists, by message id.
func (r *threeReplicas) catalogIDs(pod string) map[string]string {
	t := r.t
	t.Helper()
	var page struct {
		Messages []struct {
			ID        json.RawMessage `json:"id"`
			MessageID string          `json:"message_id"`
		} `json:"messages"`
	}
	if code := callAPI(t, r.pods[pod].addr, "GET", "/api/v1/messages?limit=500", nil, &page); code != 200 {
		t.Fatalf("GET /api/v1/messages on %s = %d", pod, code)
	}
	ids := map[string]string{}
	for _, m := range page.Messages {
		var id string
		if json.Unmarshal(m.ID, &id) != nil {
			id = string(m.ID) // a number
		}
		ids[m.MessageID] = id
	}
	return ids
}

// TestThreeReplicasAuditVerify: three jobs (two replays, a discard) of
// the messages of ONE dead-letter queue, submitted at once, one to each
// replica. A job scanning a queue leaves the messages it did not select
// locked while it reads there, so jobs on one queue run one at a time
// across the replicas (replay's source holds): before they did, a job
// gave up waiting for messages another replica's job held locked and
// reported them failed. Each job completes with its 20 messages and none
// failed; when all three have completed, their job_completed entries are
// already in the chain (a job's end and its entry are one transaction),
// and `dlqdash audit verify` on the database with the replicas' audit key
// finds the chain intact, with as many entries as GET /api/v1/audit
// lists, and every job's end audited.
func TestThreeReplicasAuditVerify(t *testing.T) {
	r := startThreeReplicas(t)
	const queue = "orders-shared"
	if _, err := r.ns.CreateQueue(queue, broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	r.agreedIngester(30*time.Second, podIDs...)
	var want []string
	for _, p := range podIDs {
		want = append(want, r.deadLetterTo(queue, "job-"+p, 20)...)
	}
	waitForWithin(t, 30*time.Second, "the dead letters cataloged", func() bool {
		return exactlyOnce(r.cataloged("pod-a"), want) == ""
	})
	catalog := r.catalogIDs("pod-a")

	type submitted struct {
		pod  string
		code int
		job  struct {
			ID     json.RawMessage `json:"id"`
			Status string          `json:"status"`
		}
		err error
	}
	results := make(chan submitted, len(podIDs))
	for i, p := range podIDs {
		var ids []string
		for j := range 20 {
			ids = append(ids, catalog[fmt.Sprintf("job-%s-%d", p, j)])
		}
		body := map[string]any{"ids": ids, "action": "replay", "rate_per_second": 10}
		if i == 1 {
			body = map[string]any{"ids": ids, "action": "discard", "reason": "three replicas audit test"}
		}
		b, _ := json.Marshal(body)
		go func() {
			s := submitted{pod: p}
			res, err := http.Post("http://"+r.pods[p].addr+"/api/v1/jobs", "application/json", bytes.NewReader(b))
			if err != nil {
				s.err = err
			} else {
				defer res.Body.Close()
				s.code = res.StatusCode
				out, _ := io.ReadAll(res.Body)
				if err := json.Unmarshal(out, &s.job); err != nil {
					s.err = fmt.Errorf("%s: %w", out, err)
				}
			}
			results <- s
		}()
	}
	jobs := map[string]string{} // job id -> the pod it was submitted to
	for range podIDs {
		s := <-results
		if s.err != nil || s.code != 201 {
			t.Fatalf("POST /api/v1/jobs on %s = %d: %v", s.pod, s.code, s.err)
		}
		jobs[strings.Trim(string(s.job.ID), `"`)] = s.pod
	}
	for id, p := range jobs {
		other := podIDs[(slices.Index(podIDs, p)+1)%len(podIDs)]
		var raw json.RawMessage
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("job %s (submitted to %s) last seen on %s: %s", id, p, other, raw)
				var claim string
				_ = r.conn.QueryRow(context.Background(), `SELECT coalesce(claimed_by, '') || ' term ' || claim_term FROM jobs WHERE id = $1`, id).Scan(&claim)
				t.Logf("job %s claimed by %s", id, claim)
				for _, q := range podIDs {
					for line := range strings.Lines(r.pods[q].stderr.String()) {
						if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "job") {
							t.Logf("%s: %s", q, strings.TrimSpace(line))
						}
					}
				}
			}
		})
		waitForWithin(t, 60*time.Second, "job "+id+" completed", func() bool {
			var job struct {
				Status string `json:"status"`
				Counts struct {
					Completed int `json:"completed"`
					Failed    int `json:"failed"`
				} `json:"counts"`
			}
			callAPI(t, r.pods[other].addr, "GET", "/api/v1/jobs/"+id, nil, &raw)
			_ = json.Unmarshal(raw, &job)
			if job.Status == "failed" || job.Status == "cancelled" || job.Counts.Failed > 0 {
				t.Fatalf("job %s (submitted to %s) %s: %s", id, p, job.Status, raw)
			}
			if job.Status == "completed" && job.Counts.Completed != 20 {
				t.Fatalf("job %s (submitted to %s) completed with %d of 20: %s", id, p, job.Counts.Completed, raw)
			}
			return job.Status == "completed"
		})
	}

	waits := 0
	for _, q := range podIDs {
		waits += strings.Count(r.pods[q].stderr.String(), "waiting for another job reading the same source")
	}
	t.Logf("times a job waited for another one reading %s: %d", queue, waits)

	// A job's status and its job_completed entry are written in one
	// transaction: once all three read completed, the entries are there
	// (the API on pod-c).
	var entries int
	var actions map[string]int
	func() {
		entries, actions = 0, map[string]int{}
		cursor := ""
		for {
			var page struct {
				Entries []struct {
					Action string `json:"action"`
				} `json:"entries"`
				NextCursor *string `json:"next_cursor"`
			}
			path := "/api/v1/audit?limit=500"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			if code := callAPI(t, r.pods["pod-c"].addr, "GET", path, nil, &page); code != 200 {
				t.Fatalf("GET %s = %d", path, code)
			}
			entries += len(page.Entries)
			for _, e := range page.Entries {
				actions[e.Action]++
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
	}()
	t.Logf("audit entries by action: %v", actions)
	if actions["replay_job_created"] != 2 || actions["discard_job_created"] != 1 || actions["job_completed"] != 3 {
		t.Errorf("audit entries by action %v; want 2 replay_job_created, 1 discard_job_created, 3 job_completed", actions)
	}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"audit", "verify", "--db", r.db}, env(envAuditKey, strings.Repeat("k", 32)), &out, &errOut)
	t.Logf("audit verify: %d: %s%s", code, out.String(), errOut.String())
	var n int
	if _, err := fmt.Sscanf(out.String(), "audit chain intact: %d entries", &n); code != 0 || err != nil {
		t.Fatalf("audit verify exited %d: %s%s", code, out.String(), errOut.String())
	}
	if n != entries || n < len(jobs) {
		t.Errorf("audit verify checked %d entries; GET /api/v1/audit lists %d, and there are %d jobs", n, entries, len(jobs))
	}
	if !strings.Contains(out.String(), "audit key from") {
		t.Errorf("audit verify did not use the audit key: %s", out.String())
	}
}
