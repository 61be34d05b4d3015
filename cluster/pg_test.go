package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/cluster"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store/replica"
)

// pgReplica is one replica of the lease-gated ingester test: its own pool
// and id, its own cluster.Ingester of namespace "prod".
type pgReplica struct {
	id     string
	pool   *pgxpool.Pool
	g      *cluster.Ingester
	cancel context.CancelFunc
	done   chan error
	// catalogs are the catalogs its terms opened, by term.
	catalogs chan *pgCatalog
}

func startPGReplica(t *testing.T, dsn, id string) *pgReplica {
	t.Helper()
	p := pool(t, dsn)
	r := &pgReplica{id: id, pool: p, done: make(chan error, 1), catalogs: make(chan *pgCatalog, 16)}
	r.g = cluster.NewIngester(cluster.IngesterConfig{
		Namespace: "prod",
		Self:      id,
		Leases:    &cluster.Postgres{DB: p, ID: id},
		Catalog: func(lease string, term int64) dlq.Catalog {
			c := &pgCatalog{db: p, begin: p.Begin, fence: replica.LeaseFence{Name: lease, Term: term}, replica: id, term: term, namespace: "prod"}
			r.catalogs <- c
			return c
		},
		New: func(c dlq.Catalog) *dlq.Ingester {
			return dlq.New(dlq.Config{Broker: emptyBroker{}, Catalog: c, Namespace: "prod", Poll: 50 * time.Millisecond})
		},
		LastSuccess: func(ctx context.Context) (*time.Time, error) { return lastSuccess(ctx, p, "prod") },
		Stale:       5 * time.Second,
		CheckEvery:  100 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.g.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *pgReplica) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// lastWriter is the replica and term of the newest read recorded.
func lastWriter(t *testing.T, db replica.DB) (string, int64, time.Time) {
	t.Helper()
	var who string
	var term int64
	var at time.Time
	err := db.QueryRow(t.Context(), `SELECT replica, term, at FROM reads ORDER BY id DESC LIMIT 1`).Scan(&who, &term, &at)
	if err != nil {
		return "", 0, time.Time{}
	}
	return who, term, at
}

// Two replicas of one namespace on one PostgreSQL database: exactly one
// ingests (holds ingest/prod); when its context is cancelled (a shutdown)
// the other takes over within 10 s with the next term; a write carrying
// the old term is refused by the database; and at no moment did two
// replicas write under one term, nor an older term after a newer one.
func TestLeaseGatedIngesterTakeover(t *testing.T) {
	dsn := database(t)
	a := startPGReplica(t, dsn, "replica-a")
	b := startPGReplica(t, dsn, "replica-b")
	waitFor(t, 10*time.Second, "one replica to ingest", func() bool { who, _, _ := lastWriter(t, a.pool); return who != "" })
	holder, other := a, b
	if who, _, _ := lastWriter(t, a.pool); who == "replica-b" {
		holder, other = b, a
	}
	waitFor(t, 5*time.Second, "the other replica to name the holder", func() bool {
		st := other.g.Status()
		return st.Replica == holder.id && st.Healthy
	})
	if holder.g.Leading() == other.g.Leading() {
		t.Fatalf("leading: %s %v, %s %v", holder.id, holder.g.Leading(), other.id, other.g.Leading())
	}
	first := <-holder.catalogs

	holder.stop()
	stopped := time.Now()
	waitFor(t, 10*time.Second, "the other replica to take over", func() bool {
		who, _, at := lastWriter(t, a.pool)
		return who == other.id && at.After(stopped)
	})
	took := time.Since(stopped)
	_, term, _ := lastWriter(t, a.pool)
	t.Logf("%s took over from %s (term %d to %d) %s after it stopped", other.id, holder.id, first.term, term, took.Round(time.Millisecond))
	if term <= first.term {
		t.Errorf("takeover at term %d, not after %d", term, first.term)
	}

	// The old holder's catalog, still carrying its term: refused.
	_, err := first.SyncEntities(t.Context(), nil, time.Now())
	if !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("a write with the stale term %d: %v, want ErrStaleTerm", first.term, err)
	}

	rows, err := a.pool.Query(t.Context(), `SELECT replica, term FROM reads ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	writerOf := map[int64]string{}
	var prev int64
	n := 0
	for rows.Next() {
		var who string
		var term int64
		if err := rows.Scan(&who, &term); err != nil {
			t.Fatal(err)
		}
		n++
		if w, ok := writerOf[term]; ok && w != who {
			t.Errorf("term %d written by %s and %s", term, w, who)
		}
		writerOf[term] = who
		if term < prev {
			t.Errorf("a write of term %d after one of term %d", term, prev)
		}
		prev = term
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if n < 2 {
		t.Errorf("%d reads recorded", n)
	}
}

// A replica cut off from the database past its lease (its renewals cannot
// get through: here the lease row is locked, as a partition or a SIGSTOP
// would leave them unanswered) stops ingesting on its own, at its local
// deadline, before the database lets anyone else take the lease; once the
// database answers again the lease moves to a new term, and a write with
// the old term is refused.
func TestLeaseGatedIngesterCutOff(t *testing.T) {
	dsn := database(t)
	a := startPGReplica(t, dsn, "replica-a")
	waitFor(t, 10*time.Second, "replica-a to ingest", func() bool { who, _, _ := lastWriter(t, a.pool); return who == "replica-a" })
	first := <-a.catalogs
	admin := pool(t, dsn)
	lockTx, err := admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lockTx.Rollback(context.Background())
	if _, err := lockTx.Exec(t.Context(), `SET LOCAL idle_in_transaction_session_timeout = 0`); err != nil {
		t.Fatal(err)
	}
	var expires time.Time
	if err := lockTx.QueryRow(t.Context(), `SELECT expires_at FROM leases WHERE name = 'ingest/prod' FOR UPDATE`).Scan(&expires); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	b := startPGReplica(t, dsn, "replica-b")
	waitFor(t, 10*time.Second, "replica-a to stop ingesting", func() bool { return !a.g.Leading() })
	stoppedAt := time.Now()
	var dbNow time.Time
	if err := admin.QueryRow(t.Context(), `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica-a stopped ingesting %s after it was cut off; its lease expires %s later", stoppedAt.Sub(cut).Round(time.Millisecond), expires.Sub(dbNow).Round(time.Millisecond))
	if !dbNow.Before(expires) {
		t.Errorf("replica-a stopped only after its lease expired (%s), when another could have taken it", expires)
	}
	before, _, _ := lastWriter(t, admin)
	if err := lockTx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "a new term", func() bool {
		h, ok, err := replica.Current(t.Context(), admin, "ingest/prod")
		return err == nil && ok && h.Held && h.Term > first.term
	})
	_, err = first.SyncEntities(t.Context(), nil, time.Now())
	if !errors.Is(err, replica.ErrStaleTerm) {
		t.Errorf("a write with the stale term %d after the cut: %v, want ErrStaleTerm", first.term, err)
	}
	h, _, _ := replica.Current(t.Context(), admin, "ingest/prod")
	t.Logf("lease now term %d held by %s (last write before: %s)", h.Term, h.Holder, before)
	_ = b
}
