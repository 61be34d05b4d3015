package web

import "net/http"

// routes is the one route table. Middleware wraps the whole mux, so every
// route, including every future POST, gets request ids, panic recovery,
// security headers and cross-origin protection.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()

	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /static/{file}", s.handle(s.serveStatic))
	mux.Handle("GET /{$}", s.handle(s.showHome))

	// Anything else is a 404 page.
	mux.Handle("/", s.handle(func(http.ResponseWriter, *http.Request) error { return ErrNotFound }))

	var h http.Handler = mux
	h = s.crossOrigin(h)
	h = securityHeaders(h)
	h = s.recoverPanics(h)
	h = withRequestID(h)
	return h
}
