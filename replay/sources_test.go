package replay_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
)

// sharedQueueEnv is a queue of n dead letters with a short lock duration,
// cataloged, and the ids of its messages split into two interleaved
// selections (every other message), so that two jobs on it each read the
// other's messages.
func sharedQueueEnv(t *testing.T, n int, o envOptions) (e *env, first, second []int64) {
	t.Helper()
	e = newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
		emulatortest.FillDLQ(t, ns, "orders", n, 64, nil)
	}, o)
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, n)
	for i, id := range ids {
		if i%2 == 0 {
			first = append(first, id)
		} else {
			second = append(second, id)
		}
	}
	return e, first, second
}

// notes records every paused_reason the jobs said while running.
type notes struct {
	mu  sync.Mutex
	say map[int64][]string
}

func (n *notes) add(j replay.Job) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if j.PausedReason != "" && !slices.Contains(n.say[j.ID], j.PausedReason) {
		n.say[j.ID] = append(n.say[j.ID], j.PausedReason)
	}
}

func (n *notes) of(id int64) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.say[id])
}

// checkBothJobs checks that two paced replays of the interleaved halves of
// one queue both completed with nothing failed, every message copied once
// and the DLQ empty.
func checkBothJobs(t *testing.T, e *env, n int, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		j := e.finished(id, 2*time.Minute)
		if j.Status != replay.StatusCompleted || j.Counts.Failed != 0 || j.Counts.Completed != n/2 {
			items, _, _ := e.st.ListItems(t.Context(), id, replay.ItemFailed, 5, "")
			var why []string
			for _, it := range items {
				why = append(why, it.Error)
			}
			t.Errorf("job %d: %s, counts %+v, want completed with %d completed and none failed; failed items say %q",
				id, j.Status, j.Counts, n/2, why)
		}
	}
	checkSet(t, "copies in orders", brokerOriginals(t, e.ns, "orders", true), msgIDs(n, func(int) bool { return true }))
	if left := brokerOriginals(t, e.ns, "orders/$DeadLetterQueue", false); len(left) != 0 {
		t.Errorf("%d messages left in the DLQ", len(left))
	}
}

// Two paced jobs on one dead-letter queue in one engine: the second waits
// for the first (which holds the messages it did not select locked while
// it reads the queue), saying so in words, and both complete with every
// message replayed once and nothing reported failed.
func TestTwoJobsOnOneQueueOneEngine(t *testing.T) {
	const n = 60
	said := &notes{say: map[int64][]string{}}
	e, first, second := sharedQueueEnv(t, n, envOptions{onChange: said.add})
	_, a := e.submit(replay.Request{Action: replay.ActionReplay, RatePerSecond: 10, Selection: replay.Selection{IDs: first}})
	_, b := e.submit(replay.Request{Action: replay.ActionReplay, RatePerSecond: 10, Selection: replay.Selection{IDs: second}})
	checkBothJobs(t, e, n, a.ID, b.ID)
	checkWaited(t, said, a.ID, b.ID)
}

// checkWaited checks that one of two jobs said, while it ran, that it
// waited for the other.
func checkWaited(t *testing.T, said *notes, a, b int64) {
	t.Helper()
	for _, id := range []int64{a, b} {
		want := fmt.Sprintf("waiting for job %d, which is reading orders/$DeadLetterQueue", a+b-id)
		for _, s := range said.of(id) {
			if strings.Contains(s, want) {
				return
			}
		}
	}
	t.Errorf("neither job said it waited for the other: %q, %q", said.of(a), said.of(b))
}

// Two paced jobs on one dead-letter queue, each run by another replica
// (two engines on one store, with claims): before the engines serialised
// the jobs of one queue through the store, each replica's scan held the
// messages the other selected locked, and the job that gave up waiting
// for them reported them failed ("locked by another receiver, or gone"),
// though they were still in the DLQ.
func TestTwoJobsOnOneQueueTwoReplicas(t *testing.T) {
	const n = 60
	e, first, second := sharedQueueEnv(t, n, envOptions{noRun: true})
	table := &claimTable{st: e.st, stale: 30 * time.Second, rows: map[int64]*claimRow{}}
	said := &notes{say: map[int64][]string{}}
	replicas := []*replicaClaims{table.replica("replica-a"), table.replica("replica-b")}
	for _, c := range replicas {
		eng, err := replay.New(replay.Config{Store: e.st, Broker: e.client, Audit: e.log, OnRemoved: e.ingester.Removed,
			Claims: c, HeartbeatEvery: 100 * time.Millisecond, MaxJobs: 1, OnChange: said.add})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { eng.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	ctx := audit.WithActor(t.Context(), "tester")
	_, a, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, RatePerSecond: 10, Selection: replay.Selection{IDs: first}})
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, RatePerSecond: 10, Selection: replay.Selection{IDs: second}})
	if err != nil {
		t.Fatal(err)
	}
	checkBothJobs(t, e, n, a.ID, b.ID)
	for _, c := range replicas {
		if got := c.claims(); len(got) == 0 {
			t.Errorf("%s claimed no job: the jobs did not run on two replicas", c.id)
		}
	}
	checkWaited(t, said, a.ID, b.ID)
}
