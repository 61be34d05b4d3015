package replay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
)

// claimEnv is stopEnv without the env's own engine (which works every
// job): the tests' engines are the replicas, each with its claims.
func claimEnv(t *testing.T, n int) *env {
	t.Helper()
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		emulatortest.FillDLQ(t, ns, "orders", n, 256, nil)
	}, envOptions{noRun: true})
	waitFor(t, fmt.Sprintf("%d cataloged dead letters", n), time.Minute, func() bool {
		c, err := e.st.PresentCount(t.Context(), "orders", dlq.SubQueueDeadLetter)
		if err != nil {
			t.Fatal(err)
		}
		return c == int64(n)
	})
	return e
}

// claimTable is the jobs' claim columns as several replicas share them
// (the PostgreSQL store keeps them in the jobs table: cluster.JobClaims);
// here in memory, for two engines on one SQLite store in one process.
type claimTable struct {
	st interface {
		UnfinishedJobs(context.Context) ([]replay.Job, error)
	}
	stale time.Duration

	mu   sync.Mutex
	rows map[int64]*claimRow
}

type claimRow struct {
	holder string
	term   int64
	beat   time.Time
}

// replicaClaims is one replica's view: replay.Claims.
type replicaClaims struct {
	t  *claimTable
	id string

	mu     sync.Mutex
	silent bool // dead: no heartbeats, no releases
	taken  []replay.Claim
}

func (t *claimTable) replica(id string) *replicaClaims { return &replicaClaims{t: t, id: id} }

func (c *replicaClaims) Claim(ctx context.Context) (replay.Claim, bool, error) {
	jobs, err := c.t.st.UnfinishedJobs(ctx) // the claimable ones: queued, running, retrying, cancelling
	if err != nil {
		return replay.Claim{}, false, err
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	for _, j := range jobs {
		r := c.t.rows[j.ID]
		if r == nil {
			r = &claimRow{}
			c.t.rows[j.ID] = r
		}
		if r.holder != "" && time.Since(r.beat) < c.t.stale {
			continue
		}
		cl := replay.Claim{JobID: j.ID, Term: r.term + 1, AdoptedFrom: r.holder}
		r.holder, r.term, r.beat = c.id, cl.Term, time.Now()
		c.mu.Lock()
		c.taken = append(c.taken, cl)
		c.mu.Unlock()
		return cl, true, nil
	}
	return replay.Claim{}, false, nil
}

func (c *replicaClaims) Heartbeat(context.Context) ([]int64, error) {
	c.mu.Lock()
	silent := c.silent
	c.mu.Unlock()
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	var held []int64
	for id, r := range c.t.rows {
		if r.holder == c.id {
			if !silent {
				r.beat = time.Now()
			}
			held = append(held, id)
		}
	}
	return held, nil
}

func (c *replicaClaims) Release(_ context.Context, cl replay.Claim) error {
	c.mu.Lock()
	silent := c.silent
	c.mu.Unlock()
	if silent {
		return nil
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if r := c.t.rows[cl.JobID]; r != nil && r.holder == c.id && r.term == cl.Term {
		r.holder = ""
	}
	return nil
}

func (c *replicaClaims) die() {
	c.mu.Lock()
	c.silent = true
	c.mu.Unlock()
}

func (c *replicaClaims) claims() []replay.Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]replay.Claim(nil), c.taken...)
}

// claimEngine is one more engine ("replica") on the env's store and
// broker, with its own claims.
func (e *env) claimEngine(c replay.Claims) (*replay.Engine, context.CancelFunc) {
	e.t.Helper()
	eng, err := replay.New(replay.Config{Store: e.st, Broker: e.client, Audit: e.log, OnRemoved: e.ingester.Removed,
		Claims: c, HeartbeatEvery: 100 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return eng, func() { cancel(); <-done }
}

// A job claimed by replica A, whose replica then dies in the middle of
// the job (no more heartbeats, no release: its claim just goes stale), is
// adopted by replica B once the claim is stale, and finishes there with
// every message replayed exactly once.
func TestClaimedJobAdoptedWhenItsReplicaDies(t *testing.T) {
	const n = 300
	e := claimEnv(t, n)
	table := &claimTable{st: e.st, stale: 1500 * time.Millisecond, rows: map[int64]*claimRow{}}
	a := table.replica("replica-a")
	_, stopA := e.claimEngine(a)
	ctx := audit.WithActor(t.Context(), "tester")
	// Submitted through the env's engine, which is not running.
	_, job, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, RatePerSecond: 100,
		Selection: replay.Selection{Filter: &dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica A to make progress", time.Minute, func() bool {
		j, _ := e.st.Job(t.Context(), job.ID)
		return j.Counts.Completed >= 60
	})
	a.die()
	stopA() // what it had in flight finishes; it releases nothing
	died := time.Now()
	at, _ := e.st.Job(t.Context(), job.ID)
	if at.Status.Finished() {
		t.Fatalf("job finished before its replica died: %+v", at)
	}

	b := table.replica("replica-b")
	e.claimEngine(b)
	j := e.finished(job.ID, 2*time.Minute)
	if j.Status != replay.StatusCompleted {
		t.Fatalf("job %+v, want completed on replica B", j)
	}
	got := b.claims()
	if len(got) == 0 || got[0].JobID != job.ID || got[0].AdoptedFrom != "replica-a" || got[0].Term != 2 {
		t.Fatalf("replica B's claims %+v, want job %d adopted from replica-a at term 2", got, job.ID)
	}
	t.Logf("replica A had completed %d of %d when it died; B adopted the job and finished it %s later", at.Counts.Completed, n, time.Since(died).Round(time.Millisecond))
	checkSet(t, "copies in orders", brokerOriginals(t, e.ns, "orders", true), msgIDs(n, func(int) bool { return true }))
	if left := brokerOriginals(t, e.ns, "orders/$DeadLetterQueue", false); len(left) != 0 {
		t.Errorf("%d messages left in the DLQ", len(left))
	}
	if j.Counts.Completed != n || j.Flagged != 0 {
		t.Errorf("job counts %+v flagged %d, want %d completed and none flagged", j.Counts, j.Flagged, n)
	}
}

// A job paused through replica B while replica A runs it stops on A
// (which follows the status from the store), is released, and resumed
// through B it finishes (on whichever replica claims it), each message
// once.
func TestClaimedJobPausedAndResumedFromAnotherReplica(t *testing.T) {
	const n = 200
	e := claimEnv(t, n)
	table := &claimTable{st: e.st, stale: 30 * time.Second, rows: map[int64]*claimRow{}}
	a := table.replica("replica-a")
	engA, _ := e.claimEngine(a)
	ctx := audit.WithActor(t.Context(), "tester")
	_, job, err := engA.Submit(ctx, replay.Request{Action: replay.ActionReplay, RatePerSecond: 50,
		Selection: replay.Selection{Filter: &dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica A to make progress", time.Minute, func() bool {
		j, _ := e.st.Job(t.Context(), job.ID)
		return j.Counts.Completed >= 30
	})
	b := table.replica("replica-b")
	engB, _ := e.claimEngine(b)
	if _, err := engB.Pause(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	// A notices within its status tick (2 s) and stops: the counts stop
	// moving.
	time.Sleep(3 * time.Second)
	one, _ := e.st.Job(t.Context(), job.ID)
	time.Sleep(2 * time.Second)
	two, _ := e.st.Job(t.Context(), job.ID)
	if one.Counts != two.Counts || two.Status != replay.StatusPaused {
		t.Fatalf("after a pause through B: %+v then %+v, want paused and still", one, two)
	}
	waitFor(t, "replica A to release the paused job", 10*time.Second, func() bool {
		table.mu.Lock()
		defer table.mu.Unlock()
		return table.rows[job.ID].holder == ""
	})
	if _, err := engB.Resume(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	j := e.finished(job.ID, 2*time.Minute)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != n {
		t.Fatalf("job %+v, want %d completed", j, n)
	}
	checkSet(t, "copies in orders", brokerOriginals(t, e.ns, "orders", true), msgIDs(n, func(int) bool { return true }))
	if len(b.claims())+len(a.claims()) < 2 {
		t.Errorf("claims A %+v B %+v: want the job claimed again after the resume", a.claims(), b.claims())
	}
}

// A replica that is alive but whose claim was adopted by another (its
// heartbeats were late) stops the job's run as soon as its heartbeat no
// longer lists the job, writing nothing more; when the job is claimable
// again it claims it back, adopting it, and the job finishes with every
// message replayed once.
func TestClaimLostStopsTheRun(t *testing.T) {
	const n = 200
	e := claimEnv(t, n)
	// The ghost's claim goes stale when the test says so (its beat is set
	// by hand); A's own must not while it runs the job: under a loaded
	// race-detector run, a staleness of 1 s let A's next claim round find
	// its own claim stale and take the job once more (a third claim).
	table := &claimTable{st: e.st, stale: 5 * time.Second, rows: map[int64]*claimRow{}}
	a := table.replica("replica-a")
	e.claimEngine(a)
	ctx := audit.WithActor(t.Context(), "tester")
	_, job, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, RatePerSecond: 40,
		Selection: replay.Selection{Filter: &dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica A to make progress", time.Minute, func() bool {
		j, _ := e.st.Job(t.Context(), job.ID)
		return j.Counts.Completed >= 20
	})
	// Another replica ("ghost") adopted it and heart-beats it.
	table.mu.Lock()
	r := table.rows[job.ID]
	r.holder, r.term, r.beat = "ghost", r.term+1, time.Now().Add(time.Hour)
	table.mu.Unlock()
	time.Sleep(2 * time.Second) // a heartbeat (100 ms) and the batch in flight
	one, _ := e.st.Job(t.Context(), job.ID)
	time.Sleep(2 * time.Second)
	two, _ := e.st.Job(t.Context(), job.ID)
	if one.Counts != two.Counts || two.Status.Finished() {
		t.Fatalf("replica A kept working a job it lost: %+v then %+v", one.Counts, two.Counts)
	}
	// The ghost falls silent: A adopts the job back and finishes it.
	table.mu.Lock()
	r.beat = time.Now().Add(-time.Hour)
	table.mu.Unlock()
	j := e.finished(job.ID, 2*time.Minute)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != n || j.Flagged != 0 {
		t.Fatalf("job %+v flagged %d, want %d completed, none flagged", j, j.Flagged, n)
	}
	claims := a.claims()
	if last := claims[len(claims)-1]; len(claims) != 2 || last.AdoptedFrom != "ghost" || last.Term != 3 {
		t.Errorf("replica A's claims %+v, want the job claimed, then adopted back from ghost at term 3", claims)
	}
	checkSet(t, "copies in orders", brokerOriginals(t, e.ns, "orders", true), msgIDs(n, func(int) bool { return true }))
	t.Logf("replica A stopped at %d of %d when its claim was taken, and finished after adopting it back", two.Counts.Completed, n)
}

// loopingClaims always offers the same job: one the store cannot read.
type loopingClaims struct {
	mu            sync.Mutex
	claimed, left int
}

func (c *loopingClaims) Claim(context.Context) (replay.Claim, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimed++
	return replay.Claim{JobID: 987654, Term: int64(c.claimed)}, true, nil
}

func (c *loopingClaims) Heartbeat(context.Context) ([]int64, error) { return nil, nil }

func (c *loopingClaims) Release(context.Context, replay.Claim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left++
	return nil
}

// A claimed job the store cannot read is released, and the engine waits
// for its next look for work before claiming again: it does not spin
// claiming and releasing the same job (which the claims offer again at
// once, as the oldest nobody holds) as fast as the database answers.
func TestClaimedJobUnreadableDoesNotSpin(t *testing.T) {
	e := claimEnv(t, 1)
	c := &loopingClaims{}
	_, stop := e.claimEngine(c)
	time.Sleep(500 * time.Millisecond)
	stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	// A round every heartbeat (100 ms here), at most two claims a round.
	if c.claimed > 20 {
		t.Errorf("the engine claimed the unreadable job %d times in 0.5 s (released %d): it spins", c.claimed, c.left)
	}
	if c.left == 0 {
		t.Errorf("the unreadable job's claim was never released")
	}
}
