package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/cluster"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/replica"
)

// sharedStore is a store that several replicas share: the PostgreSQL
// store implements it (store.Store on a postgres:// database). The
// SQLite store, which one process owns, does not, and serve then runs as
// one replica alone (cluster.Solo), exactly as before replicas.
type sharedStore interface {
	// ReplicaDB is the pool the replicas coordinate on (leases, job
	// claims, notifications); ok is false for an engine one process owns.
	ReplicaDB() (pool *pgxpool.Pool, ok bool)
	// FencedNamespace is the catalog of namespace name whose every write
	// transaction calls fence first (a lease's term: replica.LeaseFence)
	// and rolls back when it fails.
	FencedNamespace(name string, fence replica.Fencer) dlq.Catalog
	// FencedJobs is the jobs store whose every write transaction calls
	// fence first (a job's claim: replica.ClaimFence).
	FencedJobs(fence replica.Fencer) replay.Store
}

// replicas is what this replica shares with the others on its database.
// With SQLite: Solo leases, no claims, no wake-ups.
type replicas struct {
	id     string
	leases cluster.Leases
	// catalog opens a namespace's catalog for a term of its ingest lease.
	catalog func(namespace, lease string, term int64) dlq.Catalog
	// claims and jobs are the engine's Claims and its Store (a
	// replay.ClaimStore on PostgreSQL); claims is nil with SQLite.
	claims replay.Claims
	jobs   replay.Store
	// listener wakes the hub and the engine for the other replicas'
	// changes; notifier tells them of this one's. Nil with SQLite.
	listener *replica.Listener
	notifier *cluster.Notifier
	// hubWake is the hub's share of the listener's wake-ups; engineWake
	// (set once the engine exists) the engine's.
	hubWake    chan struct{}
	engineWake func()
}

// openReplicas picks how this replica works with the others, by the store's
// engine.
func openReplicas(st *store.Store, id string, logger *slog.Logger) *replicas {
	r := &replicas{id: id, leases: cluster.Solo{ID: id}, jobs: st,
		catalog: func(ns, _ string, _ int64) dlq.Catalog { return st.Namespace(ns) }}
	shared, ok := any(st).(sharedStore)
	if !ok {
		return r
	}
	pool, ok := shared.ReplicaDB()
	if !ok {
		return r
	}
	return sharedReplicas(st, shared, pool, id, logger)
}

// sharedReplicas is a replica among others on the database of pool.
func sharedReplicas(st replay.Store, shared sharedStore, pool *pgxpool.Pool, id string, logger *slog.Logger) *replicas {
	r := &replicas{id: id}
	logger = logger.With("component", "replicas", "replica", id)
	r.leases = &cluster.Postgres{DB: pool, ID: id, Logger: logger}
	r.catalog = func(ns, lease string, term int64) dlq.Catalog {
		return shared.FencedNamespace(ns, replica.LeaseFence{Name: lease, Term: term})
	}
	claims := cluster.NewJobClaims(pool, id, 0)
	r.claims = claims
	r.jobs = claimedJobs{Store: st, claims: claims, fenced: shared.FencedJobs}
	r.listener = replica.NewListener(pool.Config().ConnConfig, logger, cluster.ChannelCatalog, cluster.ChannelJobs)
	r.listener.Self = id
	r.notifier = cluster.NewNotifier(pool, id, logger)
	r.hubWake = make(chan struct{}, 1)
	logger.Info("sharing the database with other replicas: leases, job claims and LISTEN/NOTIFY")
	return r
}

// remote is the hub's wake-up from the other replicas; nil alone.
func (r *replicas) remote() <-chan struct{} {
	if r.listener == nil {
		return nil
	}
	return r.hubWake
}

// fanWake hands each of the listener's wake-ups to the hub and the
// engine, until ctx ends.
func (r *replicas) fanWake(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.listener.Wake():
		}
		select {
		case r.hubWake <- struct{}{}:
		default:
		}
		if r.engineWake != nil {
			r.engineWake()
		}
	}
}

// changed tells the other replicas that the catalog changed; nil alone.
func (r *replicas) changed() func() {
	if r.notifier == nil {
		return nil
	}
	return r.notifier.Changed
}

// jobChanged tells the other replicas that a job changed.
func (r *replicas) jobChanged(replay.Job) {
	if r.notifier != nil {
		r.notifier.JobChanged()
	}
}

// loops are the listener's and the notifier's; none alone.
func (r *replicas) loops() []func(context.Context) error {
	if r.listener == nil {
		return nil
	}
	return []func(context.Context) error{r.listener.Run, r.notifier.Run, r.fanWake}
}

// claimedJobs is the jobs store with its runs' writes fenced by their
// claims (replay.ClaimStore).
type claimedJobs struct {
	replay.Store
	claims *cluster.JobClaims
	fenced func(replica.Fencer) replay.Store
}

func (c claimedJobs) Claimed(cl replay.Claim) replay.Store { return c.fenced(c.claims.Fencer(cl)) }
