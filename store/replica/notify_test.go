package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/store/replica"
)

func startListener(t *testing.T, dsn string, channels ...string) *replica.Listener {
	t.Helper()
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	config.RuntimeParams["application_name"] = "listener"
	l := replica.NewListener(config, nil, channels...)
	l.RetryEvery = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener Run: %v", err)
		}
	})
	return l
}

func woken(l *replica.Listener, within time.Duration) bool {
	select {
	case <-l.Wake():
		return true
	case <-time.After(within):
		return false
	}
}

// A notification on replica A's pool wakes a listener on replica B's
// connection, only once the notifying transaction commits, and not for a
// rolled-back one or another channel.
func TestNotifyWakesListenersOnCommit(t *testing.T) {
	ctx := t.Context()
	dsn := pg.Database(t)
	a := pool(t, dsn)
	l := startListener(t, dsn, "catalog", "jobs")
	if !woken(l, 10*time.Second) {
		t.Fatal("no wake-up after connecting")
	}
	if woken(l, 200*time.Millisecond) {
		t.Fatal("woken without a notification")
	}

	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Notify(ctx, tx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if woken(l, 300*time.Millisecond) {
		t.Fatal("woken before the notifying transaction committed")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !woken(l, 5*time.Second) {
		t.Fatal("not woken after commit")
	}

	tx, _ = a.Begin(ctx)
	replica.Notify(ctx, tx, "catalog")
	tx.Rollback(ctx)
	if err := replica.Notify(ctx, a, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if woken(l, 300*time.Millisecond) {
		t.Fatal("woken by a rolled-back notification or another channel")
	}

	// Notifications that arrive while the reader is busy coalesce into one
	// pending wake-up, never a backlog the reader must drain.
	for range 50 {
		if err := replica.Notify(ctx, a, "catalog"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // not waiting for something: letting them all arrive unread
	if !woken(l, 5*time.Second) {
		t.Fatal("not woken by 50 notifications")
	}
	if woken(l, 300*time.Millisecond) {
		t.Fatal("more than one wake-up pending for 50 notifications read at once; want them coalesced")
	}
}

// The listener's connection is killed by the server: it reconnects, wakes
// its reader once (notifications sent meanwhile are lost, so the reader
// rereads the tables), and hears notifications again.
func TestListenerReconnectsAndWakesOnce(t *testing.T) {
	ctx := t.Context()
	dsn := pg.Database(t)
	a := pool(t, dsn)
	l := startListener(t, dsn, "jobs")
	if !woken(l, 10*time.Second) {
		t.Fatal("no wake-up after connecting")
	}
	for round := range 3 {
		var killed int
		if err := a.QueryRow(ctx, `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = 'listener' AND datname = current_database()`).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed != 1 {
			t.Fatalf("round %d: terminated %d listener connections, want 1", round, killed)
		}
		if !woken(l, 10*time.Second) {
			t.Fatalf("round %d: no wake-up after the connection was killed", round)
		}
		if woken(l, 200*time.Millisecond) {
			t.Fatalf("round %d: more than one wake-up for one reconnection", round)
		}
		waitFor(t, 10*time.Second, "the listener to be back", func() bool {
			var n int
			a.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'listener' AND datname = current_database()`).Scan(&n)
			return n == 1
		})
		if err := replica.Notify(ctx, a, "jobs"); err != nil {
			t.Fatal(err)
		}
		if !woken(l, 5*time.Second) {
			t.Fatalf("round %d: not woken by a notification after reconnecting", round)
		}
	}
}

// A connection that goes silent is pinged after Idle; when the ping fails
// (here: the server is gone for good) the listener keeps retrying without
// waking its reader, and Run returns when its context ends.
func TestListenerIdlePingAndShutdown(t *testing.T) {
	c := pgtestCluster(t)
	dsn := c.Database(t)
	config, _ := pgx.ParseConfig(dsn)
	l := replica.NewListener(config, nil, "jobs")
	l.Idle, l.RetryEvery = 200*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	if !woken(l, 10*time.Second) {
		t.Fatal("no wake-up after connecting")
	}
	if woken(l, time.Second) {
		t.Fatal("woken by idle pings")
	}
	c.Stop()
	if woken(l, time.Second) {
		t.Fatal("woken while the server is gone")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// A listener whose Self is its replica's id is not woken by that replica's
// own notifications (its hub already has the change), and is by another's.
func TestListenerIgnoresItsOwnReplica(t *testing.T) {
	ctx := t.Context()
	dsn := pg.Database(t)
	a := pool(t, dsn)
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	l := replica.NewListener(config, nil, "catalog")
	l.Self = "replica-a"
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(lctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener Run: %v", err)
		}
	}()
	if !woken(l, 10*time.Second) {
		t.Fatal("no wake-up after connecting")
	}
	if err := replica.NotifyFrom(ctx, a, "catalog", "replica-a"); err != nil {
		t.Fatal(err)
	}
	if woken(l, 300*time.Millisecond) {
		t.Fatal("woken by its own replica's notification")
	}
	if err := replica.NotifyFrom(ctx, a, "catalog", "replica-b"); err != nil {
		t.Fatal(err)
	}
	if !woken(l, 5*time.Second) {
		t.Fatal("not woken by another replica's notification")
	}
	if err := replica.Notify(ctx, a, "catalog"); err != nil {
		t.Fatal(err)
	}
	if !woken(l, 5*time.Second) {
		t.Fatal("not woken by an anonymous notification")
	}
}
