package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notify wakes the listeners of channel on every replica. Inside a
// transaction it is sent when the transaction commits, and not at all if
// it rolls back, so listeners never wake before the data is there. A
// notification carries no data: listeners read what changed from the
// tables, so one that misses a notification (it was reconnecting) loses
// nothing.
func Notify(ctx context.Context, db DB, channel string) error {
	return NotifyFrom(ctx, db, channel, "")
}

// NotifyFrom is Notify naming the replica that sends it, so that its own
// Listener (whose Self is sender) does not wake for what that replica
// already knows.
func NotifyFrom(ctx context.Context, db DB, channel, sender string) error {
	if _, err := db.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, sender); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Listener turns the notifications of some channels into wake-ups. It
// holds one connection of its own (not one of a pool's) and, when that
// connection is lost, reconnects; after each (re)connection it wakes its
// reader once, since notifications sent while it was away are gone.
type Listener struct {
	connect  func(context.Context) (*pgx.Conn, error)
	channels []string
	logger   *slog.Logger
	wake     chan struct{}

	// Idle is how long the connection may be silent before the listener
	// pings it, to notice a connection that died without a word; RetryEvery
	// how long it waits between failed connection attempts.
	Idle, RetryEvery time.Duration
	// Self, when not empty, is this replica's id: notifications it sent
	// itself (NotifyFrom with it) do not wake it.
	Self string
}

// NewListener listens to channels on connections from config (a pool's
// config: pool.Config().ConnConfig).
func NewListener(config *pgx.ConnConfig, logger *slog.Logger, channels ...string) *Listener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{
		connect:    func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, config.Copy()) },
		channels:   channels,
		logger:     logger,
		wake:       make(chan struct{}, 1),
		Idle:       30 * time.Second,
		RetryEvery: time.Second,
	}
}

// Wake receives when a listened channel was notified, and once after each
// (re)connection. Wake-ups coalesce: one pending wake-up stands for any
// number of notifications.
func (l *Listener) Wake() <-chan struct{} { return l.wake }

func (l *Listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run listens until ctx ends, reconnecting as often as needed.
func (l *Listener) Run(ctx context.Context) error {
	for {
		err := l.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		l.logger.Warn("listener: connection lost; reconnecting", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.RetryEvery):
		}
	}
}

// session is one connection: LISTEN, wake once, then wake on every
// notification until the connection fails.
func (l *Listener) session(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	l.signal()
	for {
		wctx, cancel := context.WithTimeout(ctx, l.Idle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if l.Self == "" || n.Payload != l.Self {
				l.signal()
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Silent for Idle: make sure the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping after %s without notifications: %w", l.Idle, err)
			}
		default:
			return err
		}
	}
}
