package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

// pendingRows counts the stored sign-ins in progress (of client, or all).
func pendingRows(t *testing.T, s *Store, client string) int {
	t.Helper()
	var n int
	q, args := `SELECT count(*) FROM oidc_signins`, []any{}
	if client != "" {
		q, args = q+` WHERE client = ?`, []any{client}
	}
	if err := s.reader.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPendingSignInSingleUse(t *testing.T) { ForEachEngine(t, testPendingSignInSingleUse) }

func testPendingSignInSingleUse(t *testing.T, engine string) {
	target := FreshTarget(t, engine)
	// Two stores on one database: two replicas (or two processes on one
	// SQLite file).
	var stores [2]*Store
	for i := range stores {
		s, err := Open(t.Context(), target, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	ctx := t.Context()
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	p := auth.PendingSignIn{StateHash: "aa01", Client: "192.0.2.1", Next: "/messages?entity=orders", CreatedAt: at, ExpiresAt: at.Add(10 * time.Minute)}
	if err := stores[0].CreatePendingSignIn(ctx, p, 100); err != nil {
		t.Fatal(err)
	}
	// Started on one, taken on the other, with every field.
	got, err := stores[1].TakePendingSignIn(ctx, "aa01", at.Add(time.Minute))
	if err != nil || got.StateHash != p.StateHash || got.Client != p.Client || got.Next != p.Next ||
		!got.CreatedAt.Equal(p.CreatedAt) || !got.ExpiresAt.Equal(p.ExpiresAt) {
		t.Fatalf("TakePendingSignIn = %+v, %v; want %+v", got, err, p)
	}
	for i, s := range stores {
		if _, err := s.TakePendingSignIn(ctx, "aa01", at.Add(time.Minute)); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("store %d took a sign-in taken already: %v", i, err)
		}
	}
	if _, err := stores[0].TakePendingSignIn(ctx, "unknown", at); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("an unknown state: %v", err)
	}

	// Replayed callbacks racing on both stores: each sign-in is taken by
	// exactly one of them.
	const signIns, racers = 10, 8
	for i := range signIns {
		p := auth.PendingSignIn{StateHash: fmt.Sprintf("race%02d", i), Client: "192.0.2.1", Next: "/", CreatedAt: at, ExpiresAt: at.Add(10 * time.Minute)}
		if err := stores[i%2].CreatePendingSignIn(ctx, p, 100); err != nil {
			t.Fatal(err)
		}
	}
	var taken [signIns]atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, signIns*racers)
	for i := range signIns {
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := stores[r%2].TakePendingSignIn(ctx, fmt.Sprintf("race%02d", i), at.Add(time.Minute))
				switch {
				case err == nil:
					taken[i].Add(1)
				case !errors.Is(err, auth.ErrNotFound):
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a racing take failed: %v", err)
	}
	for i := range taken {
		if n := taken[i].Load(); n != 1 {
			t.Errorf("sign-in %d was taken %d times by %d racing callbacks, want once", i, n, racers)
		}
	}
	if n := pendingRows(t, stores[0], ""); n != 0 {
		t.Errorf("%d rows left after every sign-in was taken", n)
	}
}

func TestPendingSignInExpiry(t *testing.T) { ForEachEngine(t, testPendingSignInExpiry) }

func testPendingSignInExpiry(t *testing.T, engine string) {
	s := OpenFresh(t, engine)
	ctx := t.Context()
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	create := func(hash, client string, created time.Time) {
		t.Helper()
		if err := s.CreatePendingSignIn(ctx, auth.PendingSignIn{StateHash: hash, Client: client, Next: "/", CreatedAt: created, ExpiresAt: created.Add(ttl)}, 100); err != nil {
			t.Fatal(err)
		}
	}
	// A callback at the expiry is refused, and the row goes.
	create("lapsed", "192.0.2.1", at)
	if _, err := s.TakePendingSignIn(ctx, "lapsed", at.Add(ttl)); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("a callback at the expiry: %v, want auth.ErrNotFound", err)
	}
	if _, err := s.TakePendingSignIn(ctx, "lapsed", at); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("a lapsed sign-in refused once was kept: %v", err)
	}
	// One just before its expiry finishes.
	create("fresh", "192.0.2.1", at)
	if _, err := s.TakePendingSignIn(ctx, "fresh", at.Add(ttl-time.Millisecond)); err != nil {
		t.Errorf("a callback a millisecond before the expiry: %v", err)
	}
	// Abandoned sign-ins (from any address) are swept by the next start
	// after they lapse; those still running are kept.
	create("abandoned-1", "192.0.2.1", at)
	create("abandoned-2", "198.51.100.9", at.Add(time.Minute))
	create("running", "198.51.100.9", at.Add(5*time.Minute))
	if n := pendingRows(t, s, ""); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
	create("later", "203.0.113.5", at.Add(ttl+time.Minute))
	if n := pendingRows(t, s, ""); n != 2 {
		t.Errorf("after a start 11 minutes on: %d rows, want 2 (running, later)", n)
	}
	for _, h := range []string{"running", "later"} {
		if _, err := s.TakePendingSignIn(ctx, h, at.Add(ttl+time.Minute)); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
}

func TestPendingSignInBound(t *testing.T) { ForEachEngine(t, testPendingSignInBound) }

func testPendingSignInBound(t *testing.T, engine string) {
	s := OpenFresh(t, engine)
	ctx := t.Context()
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	const limit = 20
	create := func(hash, client string, created time.Time) {
		t.Helper()
		if err := s.CreatePendingSignIn(ctx, auth.PendingSignIn{StateHash: hash, Client: client, Next: "/", CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}, limit); err != nil {
			t.Fatal(err)
		}
	}
	create("neighbour", "198.51.100.9", at)
	// A flood of 5 × limit starts from one address within a minute (some
	// in the same millisecond).
	for i := range 5 * limit {
		create(fmt.Sprintf("flood%03d", i), "192.0.2.66", at.Add(time.Duration(i/2)*time.Millisecond))
		if n := pendingRows(t, s, "192.0.2.66"); n > limit {
			t.Fatalf("after %d starts the address holds %d rows, over its limit of %d", i+1, n, limit)
		}
	}
	if n := pendingRows(t, s, "192.0.2.66"); n != limit {
		t.Errorf("the flooding address holds %d rows, want %d", n, limit)
	}
	// The newest are kept (the person who just clicked can finish), the
	// oldest went; another address's sign-in is untouched.
	now := at.Add(time.Minute)
	if _, err := s.TakePendingSignIn(ctx, fmt.Sprintf("flood%03d", 5*limit-1), now); err != nil {
		t.Errorf("the newest start: %v", err)
	}
	if _, err := s.TakePendingSignIn(ctx, "flood000", now); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("the oldest start: %v, want auth.ErrNotFound", err)
	}
	if _, err := s.TakePendingSignIn(ctx, "neighbour", now); err != nil {
		t.Errorf("another address's sign-in: %v", err)
	}
	if err := s.CreatePendingSignIn(ctx, auth.PendingSignIn{StateHash: "x", Client: "c", CreatedAt: at, ExpiresAt: at}, 0); err == nil {
		t.Error("a limit of 0 was accepted")
	}
}
