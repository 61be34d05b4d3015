package servicebus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
)

// DefaultTimeout is the deadline of every kind of Service Bus call that
// Timeouts leaves zero: generous for a healthy namespace (whose calls
// take milliseconds, seconds when it throttles), short enough that a
// frozen or cut-off broker is reported within seconds instead of never.
const DefaultTimeout = 10 * time.Second

// abandonGrace is how long after a call's deadline the adapter waits for
// the SDK to give up. The SDK honours its context nearly everywhere, but a
// few of its paths wait without one (on a link's lock while another call
// recovers it; for its background releaser, up to a minute): past the
// grace the adapter returns the timeout anyway, leaves the SDK's call to
// finish on its own, and replaces the link it was using.
const abandonGrace = time.Second

// perPeekedMessage is added to a peek's (and a receive by sequence
// number's) deadline for every message asked for: 5000 messages, the most
// one request can carry, get 10 s more.
const perPeekedMessage = 2 * time.Millisecond

// Timeouts are the deadlines of the adapter's Service Bus calls, one per
// kind of call. Zero means DefaultTimeout. A call that exceeds its deadline
// fails with an *Error that matches dlq.ErrUnreachable (and
// context.DeadlineExceeded) saying which call the broker did not answer
// within how long; the caller's own deadline, if sooner, still applies.
type Timeouts struct {
	// Attach bounds opening a link: the connection (TLS, SASL), the $cbs
	// authorisation and the attach. It is added to the deadline of the
	// first call of a sender or receiver, and of the first call after the
	// adapter replaced a link that timed out.
	Attach time.Duration
	// Send bounds one batch of copies (one round trip).
	Send time.Duration
	// Receive is the margin over the caller's wait that a receive may
	// take; a receive that waits for its context alone (wait <= 0) has no
	// deadline of its own.
	Receive time.Duration
	// Settle bounds completing or abandoning one message.
	Settle time.Duration
	// Peek bounds one $management read: a peek, a receive by sequence
	// number, the check that an empty receive was an empty queue. 2 ms per
	// message asked for are added.
	Peek time.Duration
	// Admin bounds one request of the admin API: each page of a listing,
	// each Get.
	Admin time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	for _, d := range []*time.Duration{&t.Attach, &t.Send, &t.Receive, &t.Settle, &t.Peek, &t.Admin} {
		if *d <= 0 {
			*d = DefaultTimeout
		}
	}
	return t
}

// peek is the deadline of a $management read of n messages.
func (t Timeouts) peek(n int) time.Duration {
	return t.Peek + time.Duration(n)*perPeekedMessage
}

// outcome is how a bounded call ended.
type outcome struct {
	err error
	// timedOut: the call's own deadline passed (not the caller's context)
	// and it failed for that.
	timedOut bool
	// expired: a deadline passed, the call's or the caller's, and it failed
	// for that.
	expired bool
	// abandoned: the SDK did not return within abandonGrace of the
	// deadline; it is still running, and the link it uses is suspect.
	abandoned bool
}

// broken says the link the call used should be replaced.
func (o outcome) broken() bool { return o.expired || o.abandoned }

// within runs f with a deadline d (within ctx) and returns when f does or,
// if f ignores its context, abandonGrace after the deadline (or after ctx
// ends), leaving f to finish in the background.
func within(ctx context.Context, d time.Duration, f func(context.Context) error) outcome {
	cctx, cancel := context.WithTimeout(ctx, d)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- f(cctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-cctx.Done():
		t := time.NewTimer(abandonGrace)
		select {
		case err = <-done:
			t.Stop()
		case <-t.C:
			if err := ctx.Err(); err != nil {
				return outcome{err: err, expired: errors.Is(err, context.DeadlineExceeded), abandoned: true}
			}
			return outcome{err: context.DeadlineExceeded, timedOut: true, expired: true, abandoned: true}
		}
	}
	if err == nil {
		return outcome{}
	}
	ctxErr := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	return outcome{
		err:      err,
		timedOut: ctxErr && ctx.Err() == nil && cctx.Err() != nil,
		expired:  ctxErr && errors.Is(cctx.Err(), context.DeadlineExceeded),
	}
}

// timeoutError is the adapter's error for a call that its deadline ended:
// what did not answer (the broker, or the admin API), which call (what,
// "a send to orders"), and within how long.
func (c *Client) timeoutError(op, what string, d time.Duration, admin bool, err error) error {
	who := "the broker"
	if admin {
		who = "the admin API at " + c.adminBase
	}
	hint := fmt.Sprintf("%s did not answer %s within %s: it may be overloaded, stopped or cut off (the call can be retried)", who, what, words(d))
	return &Error{Op: op, Kind: dlq.ErrUnreachable, Hint: hint, Err: err,
		msg: c.ns.Redact(fmt.Sprintf("%s: %v: %s", op, dlq.ErrUnreachable, hint))}
}

// bounded runs one AMQP call of the SDK under deadline d and maps its
// error: a timeout says so in words (see timeoutError), anything else goes
// through mapError.
func (c *Client) bounded(ctx context.Context, op, what string, d time.Duration, f func(context.Context) error) (error, outcome) {
	o := within(ctx, d, f)
	return c.boundedError(op, what, d, o), o
}

// boundedError is bounded's error for the outcome of a call within d: nil,
// the deadline in words, or the call's error mapped. Callers on a hot path
// run within themselves and word op and what only when it failed.
func (c *Client) boundedError(op, what string, d time.Duration, o outcome) error {
	switch {
	case o.err == nil:
		return nil
	case o.timedOut:
		return c.timeoutError(op, what, d, false, o.err)
	}
	return c.mapError(op, o.err)
}

// boundedAdmin is bounded for a request of the admin API.
func (c *Client) boundedAdmin(ctx context.Context, op string, f func(context.Context) error) error {
	d := c.timeouts.Admin
	o := within(ctx, d, f)
	switch {
	case o.err == nil:
		return nil
	case o.timedOut:
		return c.timeoutError(op, "a request ("+op+")", d, true, o.err)
	}
	return c.mapAdminError(op, o.err)
}

// words writes a deadline for people: "10 s", "250 ms", "1.5 s".
func words(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// sdkLink is what the adapter needs of an SDK sender or receiver.
type sdkLink interface {
	Close(ctx context.Context) error
}

// link holds the SDK sender or receiver behind one of the adapter's, and
// replaces it
//
//   - when a call on it timed out: the SDK keeps a link whose calls time
//     out (it recovers only from errors it recognises), and a call the
//     adapter abandoned may hold the SDK object's lock for a minute;
//   - when the Client replaced its SDK client after a connection failure
//     (see Client.connFailed): the old one's links are dead.
//
// The replacement attaches a new link on the next call; the old one is
// closed in the background, within Timeouts.Attach.
type link[T sdkLink] struct {
	c    *Client
	open func(sb *azservicebus.Client) (T, error)

	mu       sync.Mutex
	cur      T
	gen      uint64 // counts replacements
	conn     uint64 // the generation of the SDK client cur belongs to
	attached bool   // a call on cur succeeded, so its link is attached
	closed   bool
}

// newLink opens the first SDK object of a link.
func newLink[T sdkLink](c *Client, open func(sb *azservicebus.Client) (T, error)) (*link[T], error) {
	sb, conn := c.sdk()
	cur, err := open(sb)
	if err != nil {
		return nil, err
	}
	return &link[T]{c: c, open: open, cur: cur, conn: conn}, nil
}

// handle is one call's view of a link: the SDK object to use, its
// generations, and the deadline to add for attaching it.
type handle[T sdkLink] struct {
	sdk    T
	gen    uint64
	conn   uint64
	attach time.Duration
}

// get returns the SDK object to call, moving to the Client's current SDK
// client first if it was replaced.
func (l *link[T]) get() handle[T] {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		if sb, conn := l.c.sdk(); conn != l.conn {
			l.replaceLocked(sb, conn, "the connection was replaced")
		}
	}
	var attach time.Duration
	if !l.attached {
		attach = l.c.timeouts.Attach
	}
	return handle[T]{sdk: l.cur, gen: l.gen, conn: l.conn, attach: attach}
}

// ok records a successful call through h.
func (l *link[T]) ok(h handle[T]) {
	l.mu.Lock()
	if l.gen == h.gen {
		l.attached = true
	}
	l.mu.Unlock()
}

// after records how a call through h ended: a success marks the link
// attached; a failed connection replaces the Client's SDK client; a
// timeout replaces the SDK object.
func (l *link[T]) after(h handle[T], o outcome) {
	if o.err == nil {
		l.ok(h)
		return
	}
	if !o.abandoned {
		l.c.connFailed(h.conn, o.err)
	}
	if !o.broken() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.gen != h.gen {
		return
	}
	sb, conn := l.c.sdk()
	l.replaceLocked(sb, conn, "a call timed out")
}

// replaceLocked opens a new SDK object on sb and closes the old one in the
// background. l.mu is held.
func (l *link[T]) replaceLocked(sb *azservicebus.Client, conn uint64, why string) {
	fresh, err := l.open(sb)
	if err != nil {
		return // the client is closed: the next call says so
	}
	old := l.cur
	l.cur, l.gen, l.conn, l.attached = fresh, l.gen+1, conn, false
	l.c.log.Debug("link replaced", "reason", why, "generation", l.gen)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.c.timeouts.Attach)
		defer cancel()
		_ = old.Close(ctx)
	}()
}

// replaced reports whether the SDK object h used was replaced since (so
// that an error of a call through it saying "closed" is the adapter's
// doing, not the caller's).
func (l *link[T]) replaced(h handle[T]) bool {
	if l.c.isClosed() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.closed && (l.gen != h.gen || l.c.connGen() != h.conn)
}

// close closes the current SDK object for good (within ctx and
// Timeouts.Attach).
func (l *link[T]) close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	cur := l.cur
	l.mu.Unlock()
	o := within(ctx, l.c.timeouts.Attach, cur.Close)
	return o.err
}

// closedByReplacement is the error of a call whose link the adapter closed
// because another call on it timed out: retryable, like the timeout.
func (c *Client) closedByReplacement(op string, err error) error {
	const hint = "the link was replaced after a call on it timed out; retry"
	return &Error{Op: op, Kind: dlq.ErrUnreachable, Hint: hint, Err: err,
		msg: fmt.Sprintf("%s: %v: %s", op, dlq.ErrUnreachable, hint)}
}
