package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

// Failed sign-ins and bad tokens are logged (never the token), counted
// (AuthFailureCounter) and throttled per client address: after
// MaxAuthFailures within AuthFailureWindow, an address gets 429 on every
// request that presents a token and on the sign-in routes until the window
// ends. Refused requests of a role too low are audited once per actor and
// route per DeniedAuditWindow; the rest are counted (and the next recorded
// entry says how many were left out).
const (
	MaxAuthFailures   = 10
	AuthFailureWindow = 5 * time.Minute
	DeniedAuditWindow = time.Minute
	// maxTracked bounds each table of the guard (addresses, actor and
	// route pairs): past it, expired rows are dropped, then the table is
	// cleared, which only forgets counts.
	maxTracked = 10000
)

// Reasons of an authentication failure: the values of the reason label
// of dlqdash_auth_failures_total.
const (
	FailureBadToken      = "bad_token"      // unknown, expired or revoked API token
	FailureBadHeader     = "bad_header"     // an Authorization header that is not "Bearer <token>"
	FailureSignIn        = "sign_in"        // the provider's callback did not complete a sign-in
	FailureNoRole        = "no_role"        // signed in at the provider, but no group earns a role
	FailureThrottled     = "throttled"      // refused with 429 without being checked
	FailureUntrustedPeer = "untrusted_peer" // identity headers from an address not in --trusted-proxies
)

// AuthFailureReasons lists the reasons, for metrics to initialise.
func AuthFailureReasons() []string {
	return []string{FailureBadToken, FailureBadHeader, FailureSignIn, FailureNoRole, FailureThrottled, FailureUntrustedPeer}
}

// AuthFailureCounter counts authentication failures and the denied
// requests left out of the audit trail. *metrics.Metrics implements it;
// New takes it from Config.Metrics when that implements it too.
type AuthFailureCounter interface {
	AuthFailed(reason string)
	DeniedUnaudited()
}

// authGuard keeps the failure counts per address and the denied-audit
// windows per actor and route.
type authGuard struct {
	now     func() time.Time
	counter AuthFailureCounter // nil: not counted

	mu       sync.Mutex
	failures map[netip.Addr]*failureWindow
	denied   map[string]*deniedWindow
}

type failureWindow struct {
	start time.Time
	n     int
}

type deniedWindow struct {
	start      time.Time
	suppressed int
}

func newAuthGuard(m RequestObserver) *authGuard {
	g := &authGuard{now: time.Now, failures: map[netip.Addr]*failureWindow{}, denied: map[string]*deniedWindow{}}
	if c, ok := m.(AuthFailureCounter); ok && !isNil(c) {
		g.counter = c
	}
	return g
}

// clientAddr is the address failures are counted against: the TCP peer,
// or, when the peer is a trusted proxy, the last address of its
// X-Forwarded-For (the one the proxy itself appended).
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer := ap.Addr().Unmap()
	if s.auth != nil && s.auth.TrustsProxy(peer) {
		xff := r.Header.Values("X-Forwarded-For")
		if len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if a, err := netip.ParseAddr(strings.TrimSpace(parts[len(parts)-1])); err == nil {
				return a.Unmap()
			}
		}
	}
	return peer
}

// throttled reports whether addr has failed too often, and for how much
// longer it is refused.
func (g *authGuard) throttled(addr netip.Addr) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.failures[addr]
	if f == nil {
		return 0, false
	}
	left := f.start.Add(AuthFailureWindow).Sub(g.now())
	if left <= 0 {
		delete(g.failures, addr)
		return 0, false
	}
	return left, f.n >= MaxAuthFailures
}

// failed counts one failure of addr.
func (g *authGuard) failed(addr netip.Addr, reason string) {
	if g.counter != nil {
		g.counter.AuthFailed(reason)
	}
	if reason == FailureThrottled || reason == FailureUntrustedPeer {
		return // counted, but not a guess at a credential
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	f := g.failures[addr]
	if f == nil || now.Sub(f.start) >= AuthFailureWindow {
		if len(g.failures) >= maxTracked {
			for a, w := range g.failures {
				if now.Sub(w.start) >= AuthFailureWindow {
					delete(g.failures, a)
				}
			}
			if len(g.failures) >= maxTracked {
				clear(g.failures)
			}
		}
		f = &failureWindow{start: now}
		g.failures[addr] = f
	}
	f.n++
}

// auditDenied reports whether a denied request of actor on route is the
// first of its window (to audit), and how many were left out before it;
// the others are counted.
func (g *authGuard) auditDenied(actor, route string) (record bool, leftOut int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	key := actor + "\x00" + route
	d := g.denied[key]
	if d != nil && now.Sub(d.start) < DeniedAuditWindow {
		d.suppressed++
		if g.counter != nil {
			g.counter.DeniedUnaudited()
		}
		return false, 0
	}
	if d != nil {
		leftOut = d.suppressed
	}
	if d == nil && len(g.denied) >= maxTracked {
		for k, w := range g.denied {
			if now.Sub(w.start) >= DeniedAuditWindow && w.suppressed == 0 {
				delete(g.denied, k)
			}
		}
		if len(g.denied) >= maxTracked {
			clear(g.denied)
		}
	}
	g.denied[key] = &deniedWindow{start: now}
	return true, leftOut
}

// authFailed logs and counts a refused credential or sign-in: the reason
// in words, the client's address, never the credential.
func (s *Server) authFailed(r *http.Request, reason, detail string) {
	addr := s.clientAddr(r)
	s.logger.LogAttrs(r.Context(), slog.LevelWarn, "authentication failed",
		slog.String("reason", reason), slog.String("detail", detail),
		slog.String("remote_addr", addr.String()), slog.String("path", r.URL.Path),
		slog.String("request_id", requestID(r.Context())))
	s.guard.failed(addr, reason)
}

// tooManyFailures answers 429 if the request's address has failed too
// often (and counts it); it reports whether it did.
func (s *Server) tooManyFailures(w http.ResponseWriter, r *http.Request) bool {
	left, ok := s.guard.throttled(s.clientAddr(r))
	if !ok {
		return false
	}
	s.authFailed(r, FailureThrottled, "too many failures from this address")
	secs := int(left.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	err := &apiError{status: http.StatusTooManyRequests, code: "too_many_requests",
		msg: fmt.Sprintf("too many failed sign-ins or bad tokens from this address (%d within %s): try again in %d seconds", MaxAuthFailures, AuthFailureWindow, secs)}
	if isAPIPath(r.URL.Path) || r.Header.Get("Authorization") != "" {
		s.serveAPIError(w, r, err)
	} else {
		s.serveError(w, r, err)
	}
	return true
}

// isAPIPath reports whether a request path is answered in JSON.
func isAPIPath(p string) bool { return strings.HasPrefix(p, "/api/") || p == "/live" }

// credentialReason is the failure reason of a refused credential.
func credentialReason(r *http.Request, err error) string {
	var ce *auth.CredentialsError
	if errors.As(err, &ce) && r.Header.Get("Authorization") != "" {
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return FailureBadHeader
		}
		return FailureBadToken
	}
	return ""
}
