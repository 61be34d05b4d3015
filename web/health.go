package web

import "net/http"

// healthz answers 200 "ok" while the server is up. It checks nothing else on
// purpose: container health checks must not flap with the broker.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok\n"))
}
