package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/dlqdash/dlqdash/store/replica"
)

// The channels replicas wake each other on.
const (
	// ChannelCatalog: the catalog changed (an ingester's page, a group's
	// triage): live pages on other replicas refetch.
	ChannelCatalog = "dlqdash_catalog"
	// ChannelJobs: a job changed (created, paused, resumed, cancelled, its
	// counts): other replicas' engines look for work and follow its
	// status, and their live pages refetch.
	ChannelJobs = "dlqdash_jobs"
)

// Notifier tells the other replicas that something changed, after it was
// committed: the writers call Changed or JobChanged (the dashboard's
// change fan-out, which runs after the store's transaction returned), and
// Run sends at most one notification per channel per Every, so a burst of
// writes costs one. The notification names this replica (Self), whose own
// Listener ignores it.
type Notifier struct {
	DB     replica.DB
	Self   string
	Every  time.Duration // 0 means 100 ms
	Logger *slog.Logger

	catalog, jobs chan struct{}
}

// NewNotifier builds a Notifier; Run sends.
func NewNotifier(db replica.DB, self string, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{DB: db, Self: self, Logger: logger, catalog: make(chan struct{}, 1), jobs: make(chan struct{}, 1)}
}

func pending(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Changed marks the catalog changed. It never blocks.
func (n *Notifier) Changed() { pending(n.catalog) }

// JobChanged marks a job changed. It never blocks.
func (n *Notifier) JobChanged() { pending(n.jobs) }

// Run sends the notifications until ctx ends.
func (n *Notifier) Run(ctx context.Context) error {
	every := n.Every
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	send := func(channel string) {
		if err := replica.NotifyFrom(ctx, n.DB, channel, n.Self); err != nil && ctx.Err() == nil {
			// Nothing is lost: the other replicas read the tables on
			// their next wake-up (their own writes, a reconnection).
			n.Logger.Warn("cannot notify the other replicas", "channel", channel, "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.catalog:
			send(ChannelCatalog)
		case <-n.jobs:
			send(ChannelJobs)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}
