package store

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

func TestTokens(t *testing.T) { ForEachEngine(t, testTokens) }

func testTokens(t *testing.T, engine string) {
	s, err := Open(t.Context(), FreshTarget(t, engine), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	exp := at.Add(90 * 24 * time.Hour)
	secret, _, err := auth.CreateToken(ctx, s, auth.Token{Name: "ci", Role: auth.Operator, CreatedAt: at, CreatedBy: "cli:root", ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.CreateToken(ctx, s, auth.Token{Name: "ci", Role: auth.Admin, CreatedAt: at}); !errors.Is(err, auth.ErrNameTaken) {
		t.Errorf("duplicate name: %v", err)
	}
	if _, _, err := auth.CreateToken(ctx, s, auth.Token{Name: "grafana", Role: auth.Viewer, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	got, err := s.TokenByHash(ctx, auth.HashToken(secret))
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Token{Name: "ci", Role: auth.Operator, CreatedAt: at, CreatedBy: "cli:root", ExpiresAt: &exp}
	if got.Name != want.Name || got.Role != want.Role || !got.CreatedAt.Equal(at) || got.CreatedBy != want.CreatedBy ||
		got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.LastUsedAt != nil || got.RevokedAt != nil {
		t.Errorf("TokenByHash = %+v", got)
	}
	if _, err := s.TokenByHash(ctx, auth.HashToken("dlq_other")); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("unknown hash: %v", err)
	}
	used := at.Add(time.Hour)
	if err := s.TokenUsed(ctx, "ci", used); err != nil {
		t.Fatal(err)
	}
	revoked := at.Add(2 * time.Hour)
	r, err := s.RevokeToken(ctx, "ci", revoked)
	if err != nil || r.RevokedAt == nil || !r.RevokedAt.Equal(revoked) || r.LastUsedAt == nil || !r.LastUsedAt.Equal(used) {
		t.Fatalf("RevokeToken = %+v, %v", r, err)
	}
	// Revoking again keeps the first time.
	if r, err := s.RevokeToken(ctx, "ci", revoked.Add(time.Hour)); err != nil || !r.RevokedAt.Equal(revoked) {
		t.Errorf("second revoke = %+v, %v", r, err)
	}
	if _, err := s.RevokeToken(ctx, "nobody", revoked); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
	list, err := s.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tk := range list {
		names = append(names, tk.Name+"/"+tk.State(revoked))
	}
	if !slices.Equal(names, []string{"ci/revoked", "grafana/active"}) {
		t.Errorf("ListTokens: %q", names)
	}
}

func TestSessions(t *testing.T) { ForEachEngine(t, testSessions) }

func testSessions(t *testing.T, engine string) {
	s, err := Open(t.Context(), FreshTarget(t, engine), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	a := auth.Session{ID: "a", Name: "alice", Email: "alice@example.com", Groups: []string{"sre", "support"}, Role: auth.Operator,
		CreatedAt: at, LastSeenAt: at, IdleExpiresAt: at.Add(time.Hour), ExpiresAt: at.Add(12 * time.Hour)}
	b := auth.Session{ID: "b", Name: "bob", Role: auth.Viewer,
		CreatedAt: at, LastSeenAt: at, IdleExpiresAt: at.Add(2 * time.Hour), ExpiresAt: at.Add(3 * time.Hour)}
	for _, sess := range []auth.Session{a, b} {
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SessionByID(ctx, "a")
	if err != nil || got.Name != "alice" || got.Email != a.Email || !slices.Equal(got.Groups, a.Groups) || got.Role != auth.Operator ||
		!got.ExpiresAt.Equal(a.ExpiresAt) || !got.IdleExpiresAt.Equal(a.IdleExpiresAt) {
		t.Fatalf("SessionByID = %+v, %v", got, err)
	}
	if got, _ := s.SessionByID(ctx, "b"); got.Groups == nil || len(got.Groups) != 0 {
		t.Errorf("no groups read back as %#v", got.Groups)
	}
	if err := s.TouchSession(ctx, "a", at.Add(50*time.Minute), at.Add(110*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// At 100 minutes: a was touched (idle until 110), b is idle until 120.
	if n, err := s.DeleteExpiredSessions(ctx, at.Add(100*time.Minute)); err != nil || n != 0 {
		t.Errorf("DeleteExpiredSessions(100m) = %d, %v", n, err)
	}
	if n, err := s.DeleteExpiredSessions(ctx, at.Add(110*time.Minute)); err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions(110m) = %d, %v", n, err)
	}
	if _, err := s.SessionByID(ctx, "a"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("a after expiry: %v", err)
	}
	if err := s.DeleteSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "b"); err != nil {
		t.Errorf("deleting a deleted session: %v", err)
	}
	if _, err := s.SessionByID(ctx, "b"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("b after delete: %v", err)
	}
}
