package replica_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/store/replica"
)

// jobsTable is the least a jobs table needs for Claims, plus what the tests
// record: which replicas worked each job.
const jobsTable = `
CREATE TABLE jobs (
	id           bigserial PRIMARY KEY,
	state        text NOT NULL DEFAULT 'queued',
	claimed_by   text,
	claim_term   bigint NOT NULL DEFAULT 0,
	heartbeat_at timestamptz
);
CREATE TABLE work (job_id bigint NOT NULL, replica text NOT NULL, term bigint NOT NULL);
`

func jobsDatabase(t *testing.T, jobs int) string {
	t.Helper()
	dsn := database(t)
	db := pool(t, dsn)
	run(t, db, jobsTable)
	run(t, db, `INSERT INTO jobs (state) SELECT 'queued' FROM generate_series(1, $1)`, jobs)
	return dsn
}

func claims() *replica.Claims {
	return &replica.Claims{Table: "jobs", Claimable: "state IN ('queued', 'running')"}
}

// work does one step of job cl as replica, fenced by its claim, and
// finishes the job when finish is set.
func work(ctx context.Context, db *pgxpool.Pool, c *replica.Claims, r string, cl replica.Claim, finish bool) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := c.Fence(ctx, tx, r, cl); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO work VALUES ($1, $2, $3)`, cl.ID, r, cl.Term); err != nil {
			return err
		}
		state := "running"
		if finish {
			state = "done"
		}
		_, err := tx.Exec(ctx, `UPDATE jobs SET state = $2 WHERE id = $1`, cl.ID, state)
		return err
	})
}

// Replicas on their own pools claim concurrently until nothing is left:
// every job is claimed and worked exactly once.
func TestClaimsConcurrentReplicasClaimEachJobOnce(t *testing.T) {
	const jobs = 300
	dsn := jobsDatabase(t, jobs)
	c := claims()
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for r := range 3 {
		db := pool(t, dsn)
		for w := range 4 {
			id := fmt.Sprintf("replica-%d/%d", r, w)
			wg.Go(func() {
				for {
					cl, ok, err := c.Claim(t.Context(), db, id)
					if err != nil {
						errs <- err
						return
					}
					if !ok {
						return
					}
					if cl.Term != 1 || cl.AdoptedFrom != "" {
						errs <- fmt.Errorf("fresh job %d claimed with term %d from %q", cl.ID, cl.Term, cl.AdoptedFrom)
						return
					}
					if err := work(t.Context(), db, c, id, cl, true); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db := pool(t, dsn)
	var done, worked, distinct, claimers int
	if err := db.QueryRow(t.Context(), `
		SELECT (SELECT count(*) FROM jobs WHERE state = 'done'),
		       (SELECT count(*) FROM work), (SELECT count(DISTINCT job_id) FROM work),
		       (SELECT count(DISTINCT replica) FROM work)`).Scan(&done, &worked, &distinct, &claimers); err != nil {
		t.Fatal(err)
	}
	if done != jobs || worked != jobs || distinct != jobs {
		t.Fatalf("%d jobs done, %d steps worked on %d distinct jobs; want %d each", done, worked, distinct, jobs)
	}
	t.Logf("%d jobs worked exactly once by %d claimers", jobs, claimers)
}

// With the default Stale (30 s), a job whose claimer stopped heart-beating
// 29 s ago stays its own; at 31 s another replica adopts it, and the old
// claimer's writes are refused. The heartbeat's age is set in the database
// rather than waited for.
func TestClaimAdoptsAJobSilentForStale(t *testing.T) {
	ctx := t.Context()
	dsn := jobsDatabase(t, 1)
	a, b := pool(t, dsn), pool(t, dsn)
	c := claims()

	clA, ok, err := c.Claim(ctx, a, "a")
	if err != nil || !ok || clA.Term != 1 {
		t.Fatalf("a's claim: %+v ok %v err %v", clA, ok, err)
	}
	if err := work(ctx, a, c, "a", clA, false); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Claim(ctx, b, "b"); ok {
		t.Fatal("b claimed a job a holds")
	}
	run(t, a, `UPDATE jobs SET heartbeat_at = now() - interval '29 seconds'`)
	if _, ok, _ := c.Claim(ctx, b, "b"); ok {
		t.Fatal("b adopted a job whose heartbeat is 29 s old")
	}
	run(t, a, `UPDATE jobs SET heartbeat_at = now() - interval '31 seconds'`)
	clB, ok, err := c.Claim(ctx, b, "b")
	if err != nil || !ok {
		t.Fatalf("b could not adopt a job silent for 31 s: ok %v err %v", ok, err)
	}
	if clB.ID != clA.ID || clB.Term != 2 || clB.AdoptedFrom != "a" {
		t.Fatalf("adopted claim %+v; want job %d, term 2, from a", clB, clA.ID)
	}
	// a wakes up: its heartbeat shows the job is gone, and its writes are
	// refused.
	ids, err := c.Heartbeat(ctx, a, "a")
	if err != nil || len(ids) != 0 {
		t.Fatalf("a's heartbeat after adoption: %v, %v; want no jobs", ids, err)
	}
	if err := work(ctx, a, c, "a", clA, true); !errors.Is(err, replica.ErrClaimLost) {
		t.Fatalf("a's write after adoption: %v, want ErrClaimLost", err)
	}
	if err := work(ctx, b, c, "b", clB, true); err != nil {
		t.Fatalf("b's write: %v", err)
	}
	rows, _ := a.Query(ctx, `SELECT replica || ':' || term FROM work ORDER BY term`)
	steps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(steps) != "[a:1 b:2]" {
		t.Fatalf("steps worked %v, want [a:1 b:2]", steps)
	}
}

// In real time, with a short Stale: a heart-beating claimer keeps its job;
// once it stops, another replica adopts the job about Stale later.
func TestClaimHeartbeatKeepsAndSilenceLoses(t *testing.T) {
	ctx := t.Context()
	dsn := jobsDatabase(t, 1)
	a, b := pool(t, dsn), pool(t, dsn)
	c := claims()
	c.Stale = time.Second

	clA, ok, _ := c.Claim(ctx, a, "a")
	if !ok {
		t.Fatal("no claim")
	}
	for range 8 { // 2 s of heartbeats every 250 ms, b trying all along
		time.Sleep(250 * time.Millisecond)
		ids, err := c.Heartbeat(ctx, a, "a")
		if err != nil || len(ids) != 1 || ids[0] != clA.ID {
			t.Fatalf("heartbeat: %v %v", ids, err)
		}
		if cl, ok, _ := c.Claim(ctx, b, "b"); ok {
			t.Fatalf("b adopted %+v from a heart-beating claimer", cl)
		}
	}
	silent := time.Now()
	var clB replica.Claim
	waitFor(t, 10*time.Second, "b to adopt the job", func() bool {
		cl, ok, err := c.Claim(ctx, b, "b")
		clB = cl
		return err == nil && ok
	})
	took := time.Since(silent)
	if took < 900*time.Millisecond {
		t.Fatalf("adopted %s after the last heartbeat, before Stale (1 s)", took)
	}
	if clB.AdoptedFrom != "a" || clB.Term != 2 {
		t.Fatalf("adopted claim %+v", clB)
	}
	t.Logf("adopted %s after the last heartbeat (Stale 1 s)", took.Round(time.Millisecond))
}

// Released jobs, and finished ones, are handled at once: a released one is
// claimable by anyone, a finished one by nobody.
func TestClaimReleaseAndFinish(t *testing.T) {
	ctx := t.Context()
	dsn := jobsDatabase(t, 2)
	a := pool(t, dsn)
	c := claims()
	cl1, _, _ := c.Claim(ctx, a, "a")
	cl2, _, _ := c.Claim(ctx, a, "a")
	if cl1.ID == cl2.ID {
		t.Fatalf("claimed job %d twice", cl1.ID)
	}
	if err := work(ctx, a, c, "a", cl1, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, a, "a", cl2); err != nil {
		t.Fatal(err)
	}
	cl, ok, err := c.Claim(ctx, a, "b")
	if err != nil || !ok || cl.ID != cl2.ID || cl.Term != 2 || cl.AdoptedFrom != "" {
		t.Fatalf("claim after release: %+v ok %v err %v; want job %d, term 2, nobody's", cl, ok, err, cl2.ID)
	}
	if cl, ok, _ := c.Claim(ctx, a, "c"); ok {
		t.Fatalf("claimed %+v: the finished job or a held one", cl)
	}
}

// A claimer's fenced write in flight holds off the adoption until it
// commits, as with leases: the row it locks FOR SHARE is skipped by Claim's
// FOR UPDATE SKIP LOCKED, so an adopter neither waits nor takes the job.
func TestClaimFenceHoldsOffAdoption(t *testing.T) {
	ctx := t.Context()
	dsn := jobsDatabase(t, 1)
	a, b := pool(t, dsn), pool(t, dsn)
	c := claims()
	clA, _, _ := c.Claim(ctx, a, "a")
	run(t, b, `UPDATE jobs SET heartbeat_at = now() - interval '1 hour'`) // a looks dead

	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := c.Fence(ctx, tx, "a", clA); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if cl, ok, err := c.Claim(ctx, b, "b"); err != nil || ok {
		t.Fatalf("b's claim during a's fenced write: %+v ok %v err %v; want none", cl, ok, err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("b's claim waited %s for a's transaction instead of skipping the row", waited)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO work VALUES ($1, 'a', $2)`, clA.ID, clA.Term); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	clB, ok, err := c.Claim(ctx, b, "b")
	if err != nil || !ok || clB.AdoptedFrom != "a" {
		t.Fatalf("b's claim after a's commit: %+v ok %v err %v; want adopted from a", clB, ok, err)
	}
	if err := work(ctx, a, c, "a", clA, false); !errors.Is(err, replica.ErrClaimLost) {
		t.Fatalf("a's next write: %v, want ErrClaimLost", err)
	}
}
