package replica_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/store/replica"
)

const role = "ingest:orders-prod"

func TestAcquireRenewReleaseAndTerms(t *testing.T) {
	ctx := t.Context()
	db := pool(t, database(t))

	if _, ok, err := replica.Current(ctx, db, role); err != nil || ok {
		t.Fatalf("Current before any Acquire: ok %v, err %v", ok, err)
	}
	term, ok, err := replica.Acquire(ctx, db, role, "a", time.Minute)
	if err != nil || !ok || term != 1 {
		t.Fatalf("first Acquire: term %d ok %v err %v; want term 1", term, ok, err)
	}
	if _, ok, err := replica.Acquire(ctx, db, role, "b", time.Minute); err != nil || ok {
		t.Fatalf("Acquire of a held lease: ok %v err %v; want refused", ok, err)
	}
	if _, ok, err := replica.Acquire(ctx, db, role, "a", time.Minute); err != nil || ok {
		t.Fatalf("the holder's second Acquire: ok %v err %v; want refused (it renews instead)", ok, err)
	}
	if err := replica.Renew(ctx, db, role, "a", 1, time.Minute); err != nil {
		t.Fatalf("holder's Renew: %v", err)
	}
	if err := replica.Renew(ctx, db, role, "b", 1, time.Minute); !errors.Is(err, replica.ErrLeaseLost) {
		t.Fatalf("Renew by a non-holder: %v, want ErrLeaseLost", err)
	}
	if err := replica.Renew(ctx, db, role, "a", 2, time.Minute); !errors.Is(err, replica.ErrLeaseLost) {
		t.Fatalf("Renew with a wrong term: %v, want ErrLeaseLost", err)
	}
	if err := replica.Release(ctx, db, role, "b", 1); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := replica.Current(ctx, db, role); h.Holder != "a" || !h.Held {
		t.Fatalf("Release by a non-holder let it go: %+v", h)
	}
	if err := replica.Release(ctx, db, role, "a", 1); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := replica.Current(ctx, db, role); h.Held || h.Holder != "" || h.Term != 1 {
		t.Fatalf("after Release: %+v; want not held, term kept", h)
	}
	term, ok, err = replica.Acquire(ctx, db, role, "b", time.Minute)
	if err != nil || !ok || term != 2 {
		t.Fatalf("Acquire after Release: term %d ok %v err %v; want term 2 at once", term, ok, err)
	}
	if err := replica.Renew(ctx, db, role, "a", 1, time.Minute); !errors.Is(err, replica.ErrLeaseLost) {
		t.Fatalf("old holder's Renew after takeover: %v, want ErrLeaseLost", err)
	}
	h, ok, err := replica.Current(ctx, db, role)
	if err != nil || !ok || h.Holder != "b" || h.Term != 2 || !h.Held {
		t.Fatalf("Current: %+v ok %v err %v", h, ok, err)
	}
	// Another name is another lease.
	if term, ok, _ := replica.Acquire(ctx, db, "ingest:billing", "a", time.Minute); !ok || term != 1 {
		t.Fatalf("another name: term %d ok %v", term, ok)
	}
}

// Expiry is judged by the database's clock: the test moves expires_at in
// the database rather than sleeping.
func TestAcquireAfterExpiry(t *testing.T) {
	ctx := t.Context()
	db := pool(t, database(t))
	if _, ok, _ := replica.Acquire(ctx, db, role, "a", time.Minute); !ok {
		t.Fatal("Acquire failed")
	}
	run(t, db, `UPDATE leases SET expires_at = now() + interval '2 seconds'`)
	if _, ok, _ := replica.Acquire(ctx, db, role, "b", time.Minute); ok {
		t.Fatal("took a lease 2 s before it expires")
	}
	run(t, db, `UPDATE leases SET expires_at = now() - interval '1 millisecond'`)
	if err := replica.Renew(ctx, db, role, "a", 1, time.Minute); !errors.Is(err, replica.ErrLeaseLost) {
		t.Fatalf("Renew of an expired lease: %v, want ErrLeaseLost (the holder must re-acquire, with a new term)", err)
	}
	term, ok, err := replica.Acquire(ctx, db, role, "b", time.Minute)
	if err != nil || !ok || term != 2 {
		t.Fatalf("Acquire of an expired lease: term %d ok %v err %v", term, ok, err)
	}
}

// fencedWrite writes row note under lease term in one transaction, as the
// ingester's batches will.
func fencedWrite(ctx context.Context, db *pgxpool.Pool, term int64, note string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := replica.Fence(ctx, tx, role, term); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO writes (term, note) VALUES ($1, $2)`, term, note)
		return err
	})
}

func TestFenceRefusesStaleTerm(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	a, b := pool(t, dsn), pool(t, dsn)
	run(t, a, `CREATE TABLE writes (term bigint, note text)`)

	if err := fencedWrite(ctx, a, 1, "no lease yet"); !errors.Is(err, replica.ErrStaleTerm) {
		t.Fatalf("write fenced on a lease never acquired: %v, want ErrStaleTerm", err)
	}
	termA, _, _ := replica.Acquire(ctx, a, role, "a", time.Minute)
	if err := fencedWrite(ctx, a, termA, "a while holding"); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	// a is cut off; its lease expires and b takes over.
	run(t, b, `UPDATE leases SET expires_at = now() - interval '1 millisecond'`)
	if err := fencedWrite(ctx, a, termA, "a after expiry"); !errors.Is(err, replica.ErrStaleTerm) {
		t.Fatalf("write fenced with an expired term: %v, want ErrStaleTerm", err)
	}
	termB, ok, _ := replica.Acquire(ctx, b, role, "b", time.Minute)
	if !ok {
		t.Fatal("b could not take over")
	}
	if err := fencedWrite(ctx, b, termB, "b while holding"); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
	// a comes back, still believing it holds term 1.
	if err := fencedWrite(ctx, a, termA, "a after takeover"); !errors.Is(err, replica.ErrStaleTerm) {
		t.Fatalf("write fenced with the old term after takeover: %v, want ErrStaleTerm", err)
	}
	var notes []string
	rows, _ := a.Query(ctx, `SELECT note FROM writes ORDER BY note`)
	notes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 2 || notes[0] != "a while holding" || notes[1] != "b while holding" {
		t.Fatalf("committed writes %q; want only the two fenced with the current term", notes)
	}
}

// A write fenced while its term was current commits under that term even if
// the lease expires meanwhile: the new holder's Acquire waits for it, so
// the writes of two terms never interleave.
func TestFenceHoldsOffTakeoverUntilCommit(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	a, b := pool(t, dsn), pool(t, dsn)
	run(t, a, `CREATE TABLE writes (term bigint, note text)`)
	termA, _, _ := replica.Acquire(ctx, a, role, "a", 3*time.Second)

	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := replica.Fence(ctx, tx, role, termA); err != nil {
		t.Fatal(err)
	}
	// The lease runs out while the write is in flight.
	waitFor(t, 10*time.Second, "the lease to expire by the database's clock", func() bool {
		var expired bool
		b.QueryRow(ctx, `SELECT expires_at <= clock_timestamp() FROM leases`).Scan(&expired)
		return expired
	})
	type result struct {
		term int64
		ok   bool
		err  error
	}
	acquired := make(chan result, 1)
	go func() {
		term, ok, err := replica.Acquire(ctx, b, role, "b", time.Minute)
		acquired <- result{term, ok, err}
	}()
	if !blocked(acquired) {
		t.Fatal("b acquired the lease while a's fenced write was in flight")
	}
	if _, err := tx.Exec(ctx, `INSERT INTO writes VALUES ($1, 'a in flight')`, termA); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the fenced write did not commit: %v", err)
	}
	select {
	case r := <-acquired:
		if r.err != nil || !r.ok || r.term != termA+1 {
			t.Fatalf("b's Acquire after a's commit: term %d ok %v err %v; want term %d", r.term, r.ok, r.err, termA+1)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b did not acquire the lease after a's write committed")
	}
	if err := fencedWrite(ctx, a, termA, "a after"); !errors.Is(err, replica.ErrStaleTerm) {
		t.Fatalf("a's next write: %v, want ErrStaleTerm", err)
	}
}

// A replica frozen in the middle of a fenced write (SIGSTOP: its
// connection stays open, its transaction idle) holds off a takeover only
// until the server aborts the idle transaction, and when it continues it
// cannot commit with its old term.
func TestFrozenFencedWriteIsAbortedAndRefused(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	config, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	replica.ConfigureWriter(config.ConnConfig)
	a, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := pool(t, dsn)
	run(t, b, `CREATE TABLE writes (term bigint, note text)`)
	termA, _, _ := replica.Acquire(ctx, a, role, "a", 2*time.Second)

	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := replica.Fence(ctx, tx, role, termA); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO writes VALUES ($1, 'a before freezing')`, termA); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	// a is frozen from here on. b campaigns as a Lease does.
	var termB int64
	waitFor(t, 15*time.Second, "b to take over", func() bool {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		term, ok, err := replica.Acquire(actx, b, role, "b", time.Minute)
		termB = term
		return err == nil && ok
	})
	took := time.Since(frozen)
	t.Logf("takeover %s after the holder froze in a fenced write (lease 2 s, idle-in-transaction timeout %s)", took.Round(time.Millisecond), replica.IdleInTransactionTimeout)
	if took > replica.IdleInTransactionTimeout+3*time.Second {
		t.Fatalf("the frozen transaction held off the takeover for %s", took)
	}
	if termB != termA+1 {
		t.Fatalf("b's term %d", termB)
	}
	// a continues, as if nothing happened.
	_, err = tx.Exec(ctx, `INSERT INTO writes VALUES ($1, 'a after thawing')`, termA)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err == nil {
		t.Fatal("the thawed replica committed its old term's write")
	}
	if err := fencedWrite(ctx, a, termA, "a retrying"); !errors.Is(err, replica.ErrStaleTerm) {
		t.Fatalf("the thawed replica's next write: %v, want ErrStaleTerm", err)
	}
	var n int
	b.QueryRow(ctx, `SELECT count(*) FROM writes`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d writes of the frozen replica committed", n)
	}
}

// leader records what a Lease's lead function saw.
type leader struct {
	terms chan int64
	ended chan error // the cause of lead's context, when it ended
}

func newLeader() *leader { return &leader{terms: make(chan int64, 10), ended: make(chan error, 10)} }

func (l *leader) lead(ctx context.Context, term int64) error {
	l.terms <- term
	<-ctx.Done()
	l.ended <- context.Cause(ctx)
	return nil
}

func runLease(t *testing.T, lease *replica.Lease, l *leader) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- lease.Run(ctx, l.lead) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestLeaseRunStopsWhenRenewalRefused(t *testing.T) {
	dsn := database(t)
	a := pool(t, dsn)
	l := newLeader()
	runLease(t, &replica.Lease{DB: a, Name: role, Holder: "a", TTL: 3 * time.Second, RenewEvery: 200 * time.Millisecond, PollEvery: 100 * time.Millisecond}, l)
	if term := <-l.terms; term != 1 {
		t.Fatalf("term %d", term)
	}
	// Someone else holds it now (as after a partition that outlasted the
	// TTL): the next renewal is refused and lead is stopped.
	run(t, a, `UPDATE leases SET term = term + 1, holder = 'b', expires_at = now() + interval '1 hour'`)
	start := time.Now()
	select {
	case cause := <-l.ended:
		if !errors.Is(cause, replica.ErrLeaseLost) {
			t.Fatalf("lead's context ended with %v, want ErrLeaseLost", cause)
		}
		t.Logf("lead stopped %s after the lease was taken", time.Since(start).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("lead still running after its renewal was refused")
	}
	select {
	case term := <-l.terms:
		t.Fatalf("led again (term %d) while b holds the lease", term)
	case <-time.After(500 * time.Millisecond):
	}
}

// A holder cut off from the database (its renewals hang) stops before the
// database lets anyone else take the lease.
func TestLeaseRunStopsBeforeExpiryWhenCutOff(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	a, other := pool(t, dsn), pool(t, dsn)
	l := newLeader()
	runLease(t, &replica.Lease{DB: a, Name: role, Holder: "a", TTL: 2 * time.Second, RenewEvery: 300 * time.Millisecond, PollEvery: 100 * time.Millisecond}, l)
	<-l.terms

	// Renewals wait on a row lock held by another transaction: to a, the
	// database stopped answering.
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM leases WHERE name = $1 FOR UPDATE`, role); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-l.ended:
		if !errors.Is(cause, replica.ErrLeaseLost) {
			t.Fatalf("lead ended with %v, want ErrLeaseLost", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("lead still running 5 s into a 2 s lease it cannot renew")
	}
	var unexpired bool
	var left time.Duration
	if err := other.QueryRow(ctx, `SELECT expires_at > clock_timestamp(), extract(epoch FROM expires_at - clock_timestamp()) * 1e9 FROM leases`).Scan(&unexpired, &left); err != nil {
		t.Fatal(err)
	}
	if !unexpired {
		t.Fatal("the lease had expired in the database before its holder stopped")
	}
	t.Logf("holder stopped with %s of its lease left by the database's clock", left.Round(time.Millisecond))
}

func TestLeaseRunReleasesOnShutdown(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	a, b := pool(t, dsn), pool(t, dsn)
	l := newLeader()
	stop := runLease(t, &replica.Lease{DB: a, Name: role, Holder: "a", TTL: time.Minute}, l)
	<-l.terms
	stop()
	if cause := <-l.ended; !errors.Is(cause, context.Canceled) {
		t.Fatalf("lead ended with %v, want the shutdown's context.Canceled", cause)
	}
	// Released, not left to expire: b takes over at once.
	if term, ok, err := replica.Acquire(ctx, b, role, "b", time.Minute); err != nil || !ok || term != 2 {
		t.Fatalf("Acquire right after shutdown: term %d ok %v err %v", term, ok, err)
	}
}

// Standby replicas: one leads, the others wait; when the leader stops, one
// of them takes over, and never two at once.
func TestLeaseRunOneLeaderAmongReplicas(t *testing.T) {
	dsn := database(t)
	var leading, most atomic.Int32
	terms := make(chan int64, 10)
	lead := func(ctx context.Context, term int64) error {
		n := leading.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		terms <- term
		<-ctx.Done()
		leading.Add(-1)
		return nil
	}
	var stops []func()
	for _, id := range []string{"r1", "r2", "r3"} {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		lease := &replica.Lease{DB: pool(t, dsn), Name: role, Holder: id, TTL: 2 * time.Second, RenewEvery: 200 * time.Millisecond, PollEvery: 50 * time.Millisecond}
		go func() { defer close(done); lease.Run(ctx, lead) }()
		stop := func() { cancel(); <-done }
		stops = append(stops, stop)
		t.Cleanup(stop)
	}
	seen := map[int64]bool{}
	for range 3 {
		select {
		case term := <-terms:
			if seen[term] {
				t.Fatalf("term %d led twice", term)
			}
			seen[term] = true
		case <-time.After(10 * time.Second):
			t.Fatal("no replica took over")
		}
		// Stop the leader; a standby takes over.
		if n := leading.Load(); n != 1 {
			t.Fatalf("%d replicas leading", n)
		}
		ds, _ := pgxpool.New(t.Context(), dsn)
		h, _, _ := replica.Current(t.Context(), ds, role)
		ds.Close()
		for i, id := range []string{"r1", "r2", "r3"} {
			if id == h.Holder {
				stops[i]()
			}
		}
	}
	if most.Load() != 1 {
		t.Fatalf("at one point %d replicas led at once", most.Load())
	}
}

const holderEnv = "DLQDASH_REPLICA_TEST_HOLDER_DSN"

// runDoomedHolder is the child process of the takeover test: it holds the
// lease with the defaults until it is killed.
func runDoomedHolder(dsn string) int {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 2
	}
	lease := &replica.Lease{DB: db, Name: role, Holder: "doomed"}
	lease.Run(ctx, func(ctx context.Context, term int64) error { <-ctx.Done(); return nil })
	return 3
}

// The holder's process is killed (SIGKILL: no release, its connections
// dropped by the kernel): a standby replica with the default timings takes
// over within 10 s.
func TestLeaseTakeoverAfterHolderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("takes up to 7 s")
	}
	ctx := t.Context()
	dsn := database(t)
	db := pool(t, dsn)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holderEnv+"="+dsn)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	waitFor(t, 30*time.Second, "the child to hold the lease", func() bool {
		h, _, _ := replica.Current(ctx, db, role)
		return h.Held && h.Holder == "doomed"
	})

	l := newLeader()
	runLease(t, &replica.Lease{DB: pool(t, dsn), Name: role, Holder: "standby"}, l)
	// Let the standby poll a while in vain, and the holder renew; the kill
	// lands anywhere in the holder's renewal interval, so that runs sample
	// takeover times between TTL - renew interval and TTL + poll interval.
	select {
	case term := <-l.terms:
		t.Fatalf("the standby led (term %d) while the holder lived", term)
	case <-time.After(2500*time.Millisecond + rand.N(replica.DefaultRenewEvery)):
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	child.Wait()
	select {
	case term := <-l.terms:
		took := time.Since(killed)
		t.Logf("takeover %s after SIGKILL of the holder (TTL %s, renew every %s, poll every %s)",
			took.Round(time.Millisecond), replica.DefaultTTL, replica.DefaultRenewEvery, replica.DefaultPollEvery)
		if took > 10*time.Second {
			t.Fatalf("takeover took %s, want within 10 s", took)
		}
		if term != 2 {
			t.Fatalf("standby's term %d, want 2", term)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no takeover 15 s after the holder was killed")
	}
}
