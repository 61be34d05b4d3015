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
	mux.Handle("GET /live", s.handle(s.serveLive))
	mux.Handle("GET /groups", s.handle(s.listGroupsPage))
	mux.Handle("GET /messages", s.handle(s.listMessagesPage))
	mux.Handle("GET /messages/{id}", s.handle(s.showMessagePage))
	mux.Handle("POST /messages/{id}/edit", s.handle(s.editReplayPage))
	mux.Handle("GET /inventory", s.handle(s.showInventory))
	mux.Handle("POST /replays", s.handle(s.confirmReplay))
	mux.Handle("POST /jobs", s.handle(s.startReplay))
	mux.Handle("GET /jobs", s.handle(s.listJobsPage))
	mux.Handle("GET /jobs/{id}", s.handle(s.showJobPage))
	mux.Handle("POST /jobs/{id}/pause", s.handle(s.controlJobPage(Jobs.Pause)))
	mux.Handle("POST /jobs/{id}/resume", s.handle(s.controlJobPage(Jobs.Resume)))
	mux.Handle("POST /jobs/{id}/cancel", s.handle(s.controlJobPage(Jobs.Cancel)))
	mux.Handle("GET /audit", s.handle(s.listAuditPage))

	// The JSON API (api.md). Errors are JSON too, unknown paths included.
	mux.Handle("GET /api/v1/status", s.api(s.showStatus))
	mux.Handle("GET /api/v1/entities", s.api(s.listEntities))
	mux.Handle("GET /api/v1/groups", s.api(s.listGroups))
	mux.Handle("GET /api/v1/messages", s.api(s.listMessages))
	mux.Handle("GET /api/v1/messages/{id}", s.api(s.showMessage))
	mux.Handle("GET /api/v1/messages/{id}/body", s.api(s.downloadMessageBody))
	mux.Handle("POST /api/v1/messages/{id}/replay", s.api(s.replayMessage))
	mux.Handle("POST /api/v1/jobs", s.api(s.createJob))
	mux.Handle("GET /api/v1/jobs", s.api(s.listJobs))
	mux.Handle("GET /api/v1/jobs/{id}", s.api(s.showJob))
	mux.Handle("GET /api/v1/jobs/{id}/messages", s.api(s.listJobMessages))
	mux.Handle("POST /api/v1/jobs/{id}/pause", s.api(s.controlJob(Jobs.Pause)))
	mux.Handle("POST /api/v1/jobs/{id}/resume", s.api(s.controlJob(Jobs.Resume)))
	mux.Handle("POST /api/v1/jobs/{id}/cancel", s.api(s.controlJob(Jobs.Cancel)))
	mux.Handle("GET /api/v1/audit", s.api(s.listAudit))
	mux.Handle("/api/", s.api(s.apiNotFound))

	// Anything else is a 404 page.
	mux.Handle("/", s.handle(func(http.ResponseWriter, *http.Request) error { return ErrNotFound }))

	var h http.Handler = mux
	h = s.crossOrigin(h)
	h = securityHeaders(h)
	h = s.recoverPanics(h)
	h = withRequestID(h)
	h = s.measure(mux, h) // request durations by route pattern; GET /metrics (metrics_middleware.go)
	return h
}
