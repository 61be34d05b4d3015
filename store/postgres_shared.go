package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store/replica"
)

// Several replicas on one PostgreSQL database (issue 20): the store's side
// of serve's shared wiring (cmd/dlqdash's sharedStore). ReplicaDB is the
// pool the replicas coordinate on; FencedNamespace and FencedJobs are the
// catalog and the jobs whose every write transaction calls a fencer (a
// lease's term, a job's claim) right after the write lock, and rolls back
// when it refuses. The audit chain needs no fencer of its own: every
// append already holds the store's write lock (engine.lockWriter), so the
// appends of all replicas form one chain (TestAuditConcurrentAppends).

// replicaPoolSize is the coordination pool's size: lease campaigns and
// renewals, job claims and heartbeats, notifications.
const replicaPoolSize = 8

// openReplicaPool opens the coordination pool with the writer's config.
func openReplicaPool(ctx context.Context, cfg *pgx.ConnConfig) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pc.ConnConfig = cfg.Copy()
	pc.MaxConns = replicaPoolSize
	pc.MaxConnIdleTime = pgConnIdleTime
	return pgxpool.NewWithConfig(ctx, pc)
}

// ReplicaDB is the pool the replicas coordinate on (leases, job claims,
// notifications); ok is false on SQLite, which one process owns.
func (s *Store) ReplicaDB() (pool *pgxpool.Pool, ok bool) { return s.replicaPool, s.replicaPool != nil }

// fenceKey carries a write's fencer in its context to beginWrite.
type fenceKey struct{}

func withFence(ctx context.Context, f replica.Fencer) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceOf(ctx context.Context) replica.Fencer {
	f, _ := ctx.Value(fenceKey{}).(replica.Fencer)
	return f
}

// beginFenced begins a write transaction on PostgreSQL that holds the write
// lock and then passes f. The fencer runs on the transaction's own
// connection (a pgx.Tx over it), so it sees and locks what the
// transaction will write.
func (s *Store) beginFenced(ctx context.Context, f replica.Fencer) (*sql.Tx, error) {
	tx, conn, err := s.beginOnConn(ctx, f)
	if err != nil {
		return nil, err
	}
	// Close returns the connection to the pool once the transaction has
	// ended (it waits for it): the caller commits or rolls back tx as any.
	go conn.Close()
	return tx, nil
}

// beginOnConn begins a write transaction on PostgreSQL on a connection of
// its own, which it returns too (for COPY: beginIngest): the transaction
// holds the write lock and then passes f, when there is one. The caller
// closes conn once tx has ended.
func (s *Store) beginOnConn(ctx context.Context, f replica.Fencer) (*sql.Tx, *sql.Conn, error) {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	fail := func(err error) (*sql.Tx, *sql.Conn, error) {
		tx.Rollback()
		conn.Close()
		return nil, nil, err
	}
	if err := s.eng.lockWriter(ctx, tx); err != nil {
		return fail(err)
	}
	if f != nil {
		if err := conn.Raw(func(dc any) error {
			pc, ok := dc.(*pgConn)
			if !ok {
				return fmt.Errorf("fence a write: the connection is a %T, not PostgreSQL's", dc)
			}
			return f.Fence(ctx, connTx{pc.Conn.Conn()})
		}); err != nil {
			return fail(err)
		}
	}
	return tx, conn, nil
}

// connTx is a pgx.Tx over the connection of a transaction that
// database/sql began and ends: a fencer's statements run inside it.
type connTx struct{ c *pgx.Conn }

var errNotOwned = errors.New("the store's transaction is ended by the store, not by its fencer")

func (t connTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNotOwned }
func (t connTx) Commit(context.Context) error          { return errNotOwned }
func (t connTx) Rollback(context.Context) error        { return errNotOwned }
func (t connTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.c.CopyFrom(ctx, table, cols, src)
}
func (t connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.c.SendBatch(ctx, b)
}
func (t connTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }
func (t connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.c.Prepare(ctx, name, sql)
}
func (t connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.c.Exec(ctx, sql, args...)
}
func (t connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.c.Query(ctx, sql, args...)
}
func (t connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.c.QueryRow(ctx, sql, args...)
}
func (t connTx) Conn() *pgx.Conn { return t.c }

// execWrite runs one writing statement: alone, or, when ctx carries a
// fencer, in a fenced transaction (a cursor or a depth sample written by
// an ingester that lost its lease is refused as its pages are).
func (s *Store) execWrite(ctx context.Context, q string, args ...any) error {
	if fenceOf(ctx) == nil || !s.eng.postgres {
		_, err := s.writer.ExecContext(ctx, q, args...)
		return err
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return err
	}
	return tx.Commit()
}

// FencedNamespace is the catalog of namespace name whose every write
// transaction calls fence first (a lease's term: replica.LeaseFence) and
// rolls back when it refuses.
func (s *Store) FencedNamespace(name string, fence replica.Fencer) dlq.Catalog {
	return fencedCatalog{n: s.Namespace(name), fence: fence}
}

type fencedCatalog struct {
	n     *Namespace
	fence replica.Fencer
}

func (c fencedCatalog) ctx(ctx context.Context) context.Context { return withFence(ctx, c.fence) }

func (c fencedCatalog) Cursors(ctx context.Context) ([]dlq.Cursor, error) { return c.n.Cursors(ctx) }
func (c fencedCatalog) SyncEntities(ctx context.Context, listed []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	return c.n.SyncEntities(c.ctx(ctx), listed, at)
}
func (c fencedCatalog) SaveSettings(ctx context.Context, settings []dlq.Settings) error {
	return c.n.SaveSettings(c.ctx(ctx), settings)
}
func (c fencedCatalog) ApplyPage(ctx context.Context, p dlq.Page) (dlq.PageResult, error) {
	return c.n.ApplyPage(c.ctx(ctx), p)
}
func (c fencedCatalog) SaveCursor(ctx context.Context, cur dlq.Cursor) error {
	return c.n.SaveCursor(c.ctx(ctx), cur)
}
func (c fencedCatalog) RecordDepth(ctx context.Context, entity string, counts dlq.Counts, at time.Time) error {
	return c.n.RecordDepth(c.ctx(ctx), entity, counts, at)
}
func (c fencedCatalog) PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	return c.n.PruneGone(c.ctx(ctx), cutoff, batch)
}
func (c fencedCatalog) MergeSearchIndex(ctx context.Context, pages int) (bool, error) {
	return c.n.MergeSearchIndex(c.ctx(ctx), pages)
}
func (c fencedCatalog) LastSuccess(ctx context.Context) (*time.Time, error) {
	return c.n.LastSuccess(ctx)
}

// FencedJobs is the jobs store whose every write transaction calls fence
// first (a job's claim: replica.ClaimFence). A write that PostgreSQL
// aborts as a deadlock is run once more: the claim fence's FOR SHARE of the
// job's row, upgraded by the write's UPDATE, can deadlock with a heartbeat
// of the same row (the engine's claims update it outside the write lock).
func (s *Store) FencedJobs(fence replica.Fencer) replay.Store {
	return fencedJobs{Store: s, fence: fence}
}

type fencedJobs struct {
	*Store
	fence replica.Fencer
}

// retryDeadlock runs fn, and once more if PostgreSQL aborted it as a
// deadlock (40P01).
func retryDeadlock[T any](fn func() (T, error)) (T, error) {
	v, err := fn()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		return fn()
	}
	return v, err
}

func (j fencedJobs) ctx(ctx context.Context) context.Context { return withFence(ctx, j.fence) }

func (j fencedJobs) CreateJob(ctx context.Context, job replay.Job, sel replay.Selection, poisonCap int) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) { return j.Store.CreateJob(j.ctx(ctx), job, sel, poisonCap) })
}
func (j fencedJobs) CreateJobAudited(ctx context.Context, job replay.Job, sel replay.Selection, poisonCap int,
	entry func(replay.Job) (audit.Build, error)) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) {
		return j.Store.CreateJobAudited(j.ctx(ctx), job, sel, poisonCap, entry)
	})
}
func (j fencedJobs) UpdateItems(ctx context.Context, jobID int64, ups []replay.Update) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) { return j.Store.UpdateItems(j.ctx(ctx), jobID, ups) })
}
func (j fencedJobs) SetStatus(ctx context.Context, jobID int64, st replay.Status, reason string, from ...replay.Status) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) { return j.Store.SetStatus(j.ctx(ctx), jobID, st, reason, from...) })
}
func (j fencedJobs) CancelUnsent(ctx context.Context, jobID int64) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) { return j.Store.CancelUnsent(j.ctx(ctx), jobID) })
}
func (j fencedJobs) SetRetrying(ctx context.Context, jobID int64, rs *replay.Retrying) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) { return j.Store.SetRetrying(j.ctx(ctx), jobID, rs) })
}
func (j fencedJobs) SetCanary(ctx context.Context, jobID int64, verdict string, sentBase, redeadletteredBase int) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) {
		return j.Store.SetCanary(j.ctx(ctx), jobID, verdict, sentBase, redeadletteredBase)
	})
}

// HoldSource is fenced: a run whose claim another replica adopted must not
// take its source back from its successor.
func (j fencedJobs) HoldSource(ctx context.Context, h replay.SourceHold) (int64, error) {
	return retryDeadlock(func() (int64, error) { return j.Store.HoldSource(j.ctx(ctx), h) })
}

func (j fencedJobs) SetStatusAudited(ctx context.Context, jobID int64, st replay.Status, reason string,
	entry func(replay.Job) (audit.Build, error), from ...replay.Status) (replay.Job, error) {
	return retryDeadlock(func() (replay.Job, error) {
		return j.Store.SetStatusAudited(j.ctx(ctx), jobID, st, reason, entry, from...)
	})
}
