package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

type ctxKey int

const requestIDKey ctxKey = iota

// withRequestID gives every request a random id, in its context and in the
// X-Request-Id response header; error pages and log lines carry it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// contentSecurityPolicy allows only same-origin resources and no inline
// script or style.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

var errCrossOrigin = errors.New("cross-origin request refused")

// crossOrigin refuses cross-origin state-changing requests (anything but
// GET, HEAD and OPTIONS) with a 403: the API's JSON error under /api/, the
// error page elsewhere. It wraps the whole mux so that no POST route can be
// added without it.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	page := s.handle(func(http.ResponseWriter, *http.Request) error { return errCrossOrigin })
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			s.serveAPIError(w, r, errCrossOrigin)
			return
		}
		page.ServeHTTP(w, r)
	}))
	return p.Handler(next)
}

// recoverPanics turns a panicking handler into the 500 page (logged once
// with its request id) instead of a dropped connection.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.serveError(w, r, fmt.Errorf("panic: %v", v))
		}()
		next.ServeHTTP(w, r)
	})
}

// strictTransportSecurity is sent on answers to requests that arrived over
// https: a year, this host only (the dashboard's name may share a parent
// domain with plain-http services).
const strictTransportSecurity = "max-age=31536000"

// strictTransport sends Strict-Transport-Security when the request arrived
// over https: on a TLS connection of its own, or from a proxy in
// --trusted-proxies that says so in X-Forwarded-Proto (from anyone else the
// header is not believed). Browsers ignore the header over plain http.
func (s *Server) strictTransport(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.overHTTPS(r) {
			w.Header().Set("Strict-Transport-Security", strictTransportSecurity)
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) overHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	if !strings.EqualFold(strings.TrimSpace(proto), "https") || s.auth == nil {
		return false
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && s.auth.TrustsProxy(peer.Addr())
}
