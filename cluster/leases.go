package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdash/dlqdash/store/replica"
)

// Leases is how a replica campaigns for named roles.
type Leases interface {
	// Run campaigns for the lease name until ctx ends, calling lead each
	// time this replica acquires it, with the lease's term and a context
	// that ends as soon as the lease is lost (or may be). It returns when
	// ctx ends (nil) or lead fails by itself (its error).
	Run(ctx context.Context, name string, lead func(ctx context.Context, term int64) error) error
	// Holder is the replica holding the lease now, "" when none does.
	Holder(ctx context.Context, name string) (string, error)
}

// IngestLease is the name of the lease whose holder ingests namespace.
func IngestLease(namespace string) string { return "ingest/" + namespace }

// Solo is the leases of a replica alone with its database (SQLite, which
// one process writes): it holds every lease, at term 1, for as long as it
// runs.
type Solo struct {
	ID string // this replica's id
}

// Run calls lead at once, with term 1, and returns what it returns.
func (s Solo) Run(ctx context.Context, _ string, lead func(context.Context, int64) error) error {
	return lead(ctx, 1)
}

// Holder is this replica.
func (s Solo) Holder(context.Context, string) (string, error) { return s.ID, nil }

// local says that every lease is this replica's from the start.
func (s Solo) local() bool { return true }

// Postgres is the leases of replicas sharing a PostgreSQL database:
// store/replica's lease rows, renewed by their holder and fenced with their
// term. The zero durations are replica's defaults (a dead holder's lease is
// taken over within 7 s).
type Postgres struct {
	DB     replica.DB // the replica's pool
	ID     string     // this replica's id
	Logger *slog.Logger

	TTL, RenewEvery, PollEvery time.Duration
}

// Run implements Leases with replica.Lease.
func (p *Postgres) Run(ctx context.Context, name string, lead func(context.Context, int64) error) error {
	l := &replica.Lease{DB: p.DB, Name: name, Holder: p.ID, TTL: p.TTL, RenewEvery: p.RenewEvery, PollEvery: p.PollEvery, Logger: p.Logger}
	return l.Run(ctx, lead)
}

// Holder implements Leases with replica.Current: "" for a lease never
// taken, released or expired.
func (p *Postgres) Holder(ctx context.Context, name string) (string, error) {
	h, ok, err := replica.Current(ctx, p.DB, name)
	if err != nil {
		return "", fmt.Errorf("read who holds %s: %w", name, err)
	}
	if !ok || !h.Held {
		return "", nil
	}
	return h.Holder, nil
}
