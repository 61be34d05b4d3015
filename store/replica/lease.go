package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrLeaseLost reports that a lease is no longer held with the term its
// holder had: it expired, or another replica acquired it. A Lease's lead
// function sees it as its context's cause.
var ErrLeaseLost = errors.New("lease lost")

// ErrStaleTerm reports a write fenced with a term that is no longer the
// lease's current term (or whose lease has expired): another replica holds
// it, or may by now. The transaction must be rolled back.
var ErrStaleTerm = errors.New("stale lease term")

// Acquire takes the lease name for holder until ttl from now on the
// database's clock, if it is free (never taken, released or expired).
// Each acquisition increments the lease's term: the fencing token every
// write of the new holder carries (Fence). ok is false when another holder
// has it.
//
// It waits for the writes in flight under the previous term (their Fence
// holds a share lock on the row until they commit or roll back), so every
// write of term t commits before term t+1 begins.
func Acquire(ctx context.Context, db DB, name, holder string, ttl time.Duration) (term int64, ok bool, err error) {
	err = db.QueryRow(ctx, `
		INSERT INTO leases AS l (name, term, holder, acquired_at, renewed_at, expires_at)
		VALUES ($1, 1, $2, now(), now(), now() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET
			term = l.term + 1, holder = EXCLUDED.holder,
			acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at
		WHERE l.holder = '' OR l.expires_at <= now()
		RETURNING term`, name, holder, ttl.Microseconds()).Scan(&term)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return term, true, nil
}

// Renew extends holder's lease to ttl from now (database clock). It fails
// with ErrLeaseLost when holder no longer holds it under term: it expired
// first (whether or not someone took it since) or was released.
func Renew(ctx context.Context, db DB, name, holder string, term int64, ttl time.Duration) error {
	tag, err := db.Exec(ctx, `
		UPDATE leases SET renewed_at = now(), expires_at = now() + $4 * interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > now()`,
		name, holder, term, ttl.Microseconds())
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("renew lease %s (term %d): %w", name, term, ErrLeaseLost)
	}
	return nil
}

// Release gives the lease up at once, so that another replica need not wait
// for it to expire. Releasing a lease no longer held under term does
// nothing.
func Release(ctx context.Context, db DB, name, holder string, term int64) error {
	_, err := db.Exec(ctx, `
		UPDATE leases SET holder = '', expires_at = now()
		WHERE name = $1 AND holder = $2 AND term = $3`, name, holder, term)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// Fence makes the transaction tx a write of lease name's holder under term:
// it locks the lease row FOR SHARE and checks that term is still the
// current term and unexpired, else returns ErrStaleTerm (and the caller
// rolls back). Call it first in every transaction that writes what the
// lease guards.
//
// The share lock is what makes the check hold until commit: Acquire must
// update the row, which waits for every share lock, so a new term cannot
// begin while a write fenced with the old one is in flight, and every
// write fenced after it sees the new term. Nothing in this rests on the
// replicas' clocks, nor on the old holder knowing it lost: a replica cut
// off by a partition cannot commit at all, and once it reaches the
// database again its writes are refused here.
func Fence(ctx context.Context, tx pgx.Tx, name string, term int64) error {
	var current int64
	var live bool
	err := tx.QueryRow(ctx, `
		SELECT term, holder <> '' AND expires_at > clock_timestamp()
		FROM leases WHERE name = $1 FOR SHARE`, name).Scan(&current, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence %s at term %d: no such lease: %w", name, term, ErrStaleTerm)
	}
	if err != nil {
		return fmt.Errorf("fence %s at term %d: %w", name, term, err)
	}
	if current != term {
		return fmt.Errorf("fence %s: term %d is stale, the lease is at term %d: %w", name, term, current, ErrStaleTerm)
	}
	if !live {
		return fmt.Errorf("fence %s: term %d has expired or was released: %w", name, term, ErrStaleTerm)
	}
	return nil
}

// Holding is a lease's row as the database has it.
type Holding struct {
	Name      string
	Term      int64
	Holder    string // '' when released
	ExpiresAt time.Time
	Held      bool // a holder and not expired, by the database's clock
}

// Current reads lease name; ok is false when it was never acquired. This is
// what an operator's status shows as the ingester's replica.
func Current(ctx context.Context, db DB, name string) (h Holding, ok bool, err error) {
	h.Name = name
	err = db.QueryRow(ctx, `
		SELECT term, holder, expires_at, holder <> '' AND expires_at > now()
		FROM leases WHERE name = $1`, name).Scan(&h.Term, &h.Holder, &h.ExpiresAt, &h.Held)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("read lease %s: %w", name, err)
	}
	return h, true, nil
}

// The defaults of a Lease: a dead holder's lease is taken over within
// DefaultTTL + DefaultPollEvery (7 s) of its last renewal.
const (
	DefaultTTL        = 6 * time.Second
	DefaultRenewEvery = 2 * time.Second
	DefaultPollEvery  = 1 * time.Second
)

// Lease campaigns for one named role (the ingester of a namespace) among
// replicas and runs the role's work while it holds it.
type Lease struct {
	DB     DB
	Name   string // the role: "ingest/" + namespace (cluster.IngestLease)
	Holder string // this replica's id

	// TTL is how long a renewal keeps the lease (DefaultTTL); RenewEvery how
	// often the holder renews (DefaultRenewEvery, well under TTL, so that a
	// renewal or two may fail without losing it); PollEvery how often a
	// replica that does not hold it tries to acquire it (DefaultPollEvery).
	TTL, RenewEvery, PollEvery time.Duration
	Logger                     *slog.Logger
}

// Run campaigns until ctx ends. Each time it acquires the lease it calls
// lead with the term, and a context that is cancelled, with cause
// ErrLeaseLost, as soon as the lease is lost or may be: when a renewal is
// refused, or when renewals have failed until the local deadline (the
// start of the last successful renewal plus TTL, less a tenth of TTL for
// clock-rate drift), which falls before the database lets anyone else take
// it. After lead returns because its lease was lost, Run campaigns again.
//
// When lead returns by itself, or ctx ends, Run releases the lease (so that
// another replica takes over at once rather than after TTL) and returns
// lead's error, or nil.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context, term int64) error) error {
	ttl, renewEvery, pollEvery := l.TTL, l.RenewEvery, l.PollEvery
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if renewEvery <= 0 {
		renewEvery = min(DefaultRenewEvery, ttl/3)
	}
	if pollEvery <= 0 {
		pollEvery = DefaultPollEvery
	}
	logger := l.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("lease", l.Name, "replica", l.Holder)

	poll := time.NewTimer(0)
	defer poll.Stop()
	failing := false // log a database that cannot be reached once, not every poll
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		}
		sent := time.Now()
		term, ok, err := Acquire(ctx, l.DB, l.Name, l.Holder, ttl)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			logger.Warn("lease: cannot acquire; retrying", "error", err)
			failing = true
		case err == nil && failing:
			logger.Info("lease: the database answers again")
			failing = false
		}
		if !ok {
			poll.Reset(pollEvery)
			continue
		}
		logger.Info("lease acquired", "term", term)
		lost, err := l.hold(ctx, logger, term, sent, ttl, renewEvery, lead)
		if !lost {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if rerr := Release(rctx, l.DB, l.Name, l.Holder, term); rerr != nil {
				logger.Warn("lease: cannot release; it will expire", "term", term, "error", rerr)
			} else {
				logger.Info("lease released", "term", term)
			}
			cancel()
			return err
		}
		logger.Warn("lease lost", "term", term)
		poll.Reset(pollEvery)
	}
}

// hold runs lead while renewing the lease. lost says the lease was lost
// (lead was cancelled for it); otherwise lead returned by itself or ctx
// ended, with lead's error.
func (l *Lease) hold(ctx context.Context, logger *slog.Logger, term int64, sent time.Time, ttl, renewEvery time.Duration, lead func(context.Context, int64) error) (lost bool, err error) {
	margin := ttl / 10
	deadline := sent.Add(ttl - margin)

	leadCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- lead(leadCtx, term) }()

	renew := time.NewTicker(renewEvery)
	defer renew.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for {
		select {
		case err := <-done:
			return false, err
		case <-expire.C:
			cancel(fmt.Errorf("lease %s (term %d) not renewed in time: %w", l.Name, term, ErrLeaseLost))
			<-done
			return true, nil
		case <-renew.C:
			start := time.Now()
			rctx, rcancel := context.WithDeadline(ctx, deadline)
			err := Renew(rctx, l.DB, l.Name, l.Holder, term, ttl)
			rcancel()
			switch {
			case err == nil:
				deadline = start.Add(ttl - margin)
				expire.Reset(time.Until(deadline))
			case errors.Is(err, ErrLeaseLost):
				cancel(err)
				<-done
				return true, nil
			case ctx.Err() != nil:
				// Shutting down: lead sees ctx end and returns.
			default:
				logger.Warn("lease: renewal failed", "term", term, "error", err)
			}
		}
	}
}

// IdleInTransactionTimeout is the idle_in_transaction_session_timeout that
// ConfigureWriter sets: under DefaultTTL - DefaultRenewEvery, so that the
// server aborts a fenced transaction whose replica froze (SIGSTOP, a long
// GC pause, a partition that leaves the TCP connection open) before that
// replica's lease can expire, and the transaction's share lock never holds
// off a takeover past the lease's own expiry.
const IdleInTransactionTimeout = 3 * time.Second

// ConfigureWriter prepares the connection config of the pool whose
// transactions call Fence (or Claims.Fence): the server aborts any of its
// transactions left idle for IdleInTransactionTimeout. Transactions must
// therefore never wait on anything but the database (no broker calls
// inside a transaction).
func ConfigureWriter(config *pgx.ConnConfig) {
	config.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(IdleInTransactionTimeout.Milliseconds())
}
