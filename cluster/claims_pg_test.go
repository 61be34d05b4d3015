package cluster_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/cluster"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store/replica"
)

// Jobs on one PostgreSQL database shared by two replicas' JobClaims: each
// job goes to one of them; a paused job to neither; a job whose replica
// stopped heart-beating is adopted by the other once its claim is stale,
// at the next term, naming the silent one; the silent one's heartbeat no
// longer lists it and its fenced writes are refused; a released job is
// claimable at once.
func TestJobClaimsAdoption(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	pa, pb := pool(t, dsn), pool(t, dsn)
	if _, err := pa.Exec(ctx, `INSERT INTO jobs (status) VALUES ('running'), ('queued'), ('paused')`); err != nil {
		t.Fatal(err)
	}
	const stale = 1500 * time.Millisecond
	a := cluster.NewJobClaims(pa, "replica-a", stale)
	b := cluster.NewJobClaims(pb, "replica-b", stale)

	c1, ok, err := a.Claim(ctx)
	if err != nil || !ok || c1.JobID != 1 || c1.Term != 1 || c1.AdoptedFrom != "" {
		t.Fatalf("a's first claim %+v %v %v", c1, ok, err)
	}
	c2, ok, err := b.Claim(ctx)
	if err != nil || !ok || c2.JobID != 2 {
		t.Fatalf("b's first claim %+v %v %v, want job 2", c2, ok, err)
	}
	if c, ok, err := b.Claim(ctx); err != nil || ok {
		t.Fatalf("b claimed %+v (%v): the paused job 3 is nobody's, 1 and 2 are held", c, err)
	}

	// b heartbeats, a falls silent: after stale, b adopts job 1.
	deadline := time.Now().Add(10 * time.Second)
	var adopted bool
	var c1b = c2
	for time.Now().Before(deadline) {
		if held, err := b.Heartbeat(ctx); err != nil || !slices.Equal(held, []int64{2}) {
			t.Fatalf("b's heartbeat %v %v", held, err)
		}
		if c, ok, err := b.Claim(ctx); err != nil {
			t.Fatal(err)
		} else if ok {
			c1b, adopted = c, true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !adopted || c1b.JobID != 1 || c1b.Term != 2 || c1b.AdoptedFrom != "replica-a" {
		t.Fatalf("b's adoption %+v (adopted %v), want job 1 at term 2 from replica-a", c1b, adopted)
	}
	held, err := a.Heartbeat(ctx)
	if err != nil || len(held) != 0 {
		t.Errorf("the silent replica's heartbeat after the adoption: %v %v, want none held", held, err)
	}
	write := func(c *cluster.JobClaims, cl replay.Claim) error {
		tx, err := pa.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.Background())
		if err := c.Fencer(cl).Fence(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET sent = sent + 1 WHERE id = $1`, cl.JobID); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := write(a, c1); !errors.Is(err, replica.ErrClaimLost) {
		t.Errorf("the silent replica's write with its old claim: %v, want ErrClaimLost", err)
	}
	if err := write(b, c1b); err != nil {
		t.Errorf("the adopter's write: %v", err)
	}

	// Released, job 2 is claimable at once (a is heart-beating again).
	if err := b.Release(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := a.Claim(ctx); err != nil || !ok || c.JobID != 2 || c.AdoptedFrom != "" {
		t.Errorf("a's claim after b released job 2: %+v %v %v", c, ok, err)
	}
	// Resumed (queued again), the paused job is claimable.
	if _, err := pa.Exec(ctx, `UPDATE jobs SET status = 'queued' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := b.Claim(ctx); err != nil || !ok || c.JobID != 3 {
		t.Errorf("b's claim of the resumed job: %+v %v %v", c, ok, err)
	}
}

// Notifications cross replicas: a change noted on replica A's Notifier
// wakes replica B's Listener, not A's own; a burst of changes costs one
// notification per interval.
func TestNotifierWakesOtherReplicas(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	pa := pool(t, dsn)
	listen := func(self string) *replica.Listener {
		l := replica.NewListener(pa.Config().ConnConfig, nil, cluster.ChannelCatalog, cluster.ChannelJobs)
		l.Self = self
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- l.Run(lctx) }()
		t.Cleanup(func() { cancel(); <-done })
		if !wakes(l, 10*time.Second) {
			t.Fatal("no wake-up after connecting")
		}
		return l
	}
	la, lb := listen("replica-a"), listen("replica-b")
	n := cluster.NewNotifier(pa, "replica-a", nil)
	n.Every = 300 * time.Millisecond
	nctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(nctx) }()
	defer func() { cancel(); <-done }()

	for range 50 {
		n.Changed()
	}
	if !wakes(lb, 5*time.Second) {
		t.Fatal("replica B not woken by A's change")
	}
	if wakes(la, 500*time.Millisecond) {
		t.Error("replica A woken by its own change")
	}
	n.JobChanged()
	if !wakes(lb, 5*time.Second) {
		t.Fatal("replica B not woken by A's job change")
	}
}

func wakes(l *replica.Listener, within time.Duration) bool {
	select {
	case <-l.Wake():
		return true
	case <-time.After(within):
		return false
	}
}
