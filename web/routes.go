package web

import "net/http"

// route is one line of the route table: a ServeMux pattern, the permission
// it needs, and its handler.
type route struct {
	pattern string
	perm    perm
	handler http.Handler
}

// routeTable is the one route table. Every route declares its permission
// (perm.go); New panics on a route without one, and a test walks the table
// asking every route as every role.
func (s *Server) routeTable() []route {
	rs := []route{
		{"GET /healthz", public, http.HandlerFunc(s.healthz)},
		{"GET /static/{file}", public, s.handle(s.serveStatic)},
		{"GET /favicon.ico", public, s.handle(s.serveFavicon)},
		{"GET /{$}", viewer, s.handle(s.showHome)},
		{"GET /live", viewer, s.handle(s.serveLive)},
		{"GET /groups", viewer, s.handle(s.listGroupsPage)},
		{"GET /groups/{key}", viewer, s.handle(s.showGroupPage)},
		{"POST /groups/{key}", operator, s.handle(s.updateGroupPage)},
		{"GET /alerts", viewer, s.handle(s.alertsPage)},
		{"POST /alerts", admin, s.handle(s.addWebhookPage)},
		{"POST /alerts/{id}/remove", admin, s.handle(s.removeWebhookPage)},
		{"GET /alerts/history", viewer, s.handle(s.alertHistoryPage)},
		{"GET /messages", viewer, s.handle(s.listMessagesPage)},
		{"GET /messages/count", viewer, s.handle(s.messageCountFragment)},
		{"GET /messages/{id}", viewer, s.handle(s.showMessagePage)},
		{"GET /messages/{id}/edit", admin, s.handle(s.showEditPage)},
		{"POST /messages/{id}/edit", admin, s.handle(s.editReplayPage)},
		{"GET /inventory", viewer, s.handle(s.showInventory)},
		{"GET /messages/{id}/cancel", admin, s.handle(s.showCancelPage)},
		{"POST /messages/{id}/cancel", admin, s.handle(s.cancelScheduledPage)},
		{"POST /replays", operator, s.handle(s.confirmReplay)},
		{"POST /jobs", operator, s.handle(s.startReplay)},
		{"GET /jobs", viewer, s.handle(s.listJobsPage)},
		{"GET /jobs/{id}", viewer, s.handle(s.showJobPage)},
		{"POST /jobs/{id}/pause", operator, s.handle(s.controlJobPage(Jobs.Pause))},
		{"POST /jobs/{id}/resume", operator, s.handle(s.controlJobPage(Jobs.Resume))},
		{"POST /jobs/{id}/cancel", operator, s.handle(s.controlJobPage(Jobs.Cancel))},
		{"GET /audit", viewer, s.handle(s.listAuditPage)},
		{"GET /audit/actions/{id}", viewer, s.handle(s.showAuditActionPage)},

		// Sign-in and sign-out (signin.go).
		{"GET /login", public, s.handle(s.startSignIn)},
		{"GET /auth/callback", public, s.handle(s.finishSignIn)},
		{"POST /logout", public, s.handle(s.signOut)},

		// The JSON API (docs/api.md). Errors are JSON too, unknown paths included.
		{"GET /api/v1/status", viewer, s.api(s.showStatus)},
		{"GET /api/v1/entities", viewer, s.api(s.listEntities)},
		{"GET /api/v1/groups", viewer, s.api(s.listGroups)},
		{"PATCH /api/v1/groups/{key}", operator, s.api(s.patchGroup)},
		{"GET /api/v1/alerts/webhooks", viewer, s.api(s.listWebhooks)},
		{"POST /api/v1/alerts/webhooks", admin, s.api(s.createWebhook)},
		{"DELETE /api/v1/alerts/webhooks/{id}", admin, s.api(s.deleteWebhook)},
		{"GET /api/v1/alerts/deliveries", viewer, s.api(s.listDeliveries)},
		{"GET /api/v1/messages", viewer, s.api(s.listMessages)},
		{"GET /api/v1/messages/count", viewer, s.api(s.countMessages)},
		{"GET /api/v1/messages/properties", viewer, s.api(s.messageProperties)},
		{"GET /api/v1/messages/{id}", viewer, s.api(s.showMessage)},
		{"GET /api/v1/messages/{id}/body", bodies, s.api(s.downloadMessageBody)},
		{"POST /api/v1/messages/{id}/replay", admin, s.api(s.replayMessage)},
		{"POST /api/v1/jobs", operator, s.api(s.createJob)},
		{"POST /api/v1/scheduled/cancel", admin, s.api(s.cancelScheduled)},
		{"GET /api/v1/jobs", viewer, s.api(s.listJobs)},
		{"GET /api/v1/jobs/{id}", viewer, s.api(s.showJob)},
		{"GET /api/v1/jobs/{id}/messages", viewer, s.api(s.listJobMessages)},
		{"POST /api/v1/jobs/{id}/pause", operator, s.api(s.controlJob(Jobs.Pause))},
		{"POST /api/v1/jobs/{id}/resume", operator, s.api(s.controlJob(Jobs.Resume))},
		{"POST /api/v1/jobs/{id}/cancel", operator, s.api(s.controlJob(Jobs.Cancel))},
		{"GET /api/v1/audit", viewer, s.api(s.listAudit)},
		{"GET /api/v1/audit/actions", viewer, s.api(s.listAuditActions)},
		{"GET /api/v1/audit/actions/{id}/messages", viewer, s.api(s.listAuditActionMessages)},
		{"GET /api/v1/audit/export", viewer, s.api(s.exportAudit)},
		{"/api/", viewer, s.api(s.apiNotFound)},

		// Anything else is a 404 page.
		{"/", public, s.handle(func(http.ResponseWriter, *http.Request) error { return ErrNotFound })},
	}
	if s.metricsHandler != nil {
		// Prometheus scrapes with a token of the viewer role (or, with
		// --metrics-addr, from a listener of its own, outside this table).
		rs = append(rs, route{"GET /metrics", viewer, s.everyNamespace(s.metricsHandler)})
	}
	return rs
}

// routes registers the table, each route behind its permission check.
// Middleware wraps the whole mux, so every route, including every future
// POST, gets request ids, panic recovery, security headers, cross-origin
// protection and the request's identity.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routeTable() {
		mux.Handle(rt.pattern, s.require(rt))
	}

	var h http.Handler = mux
	h = s.identify(h)
	h = s.limitRequest(h) // request bodies and the read deadline (limits.go)
	h = s.crossOrigin(h)
	h = securityHeaders(h)
	h = s.strictTransport(h) // over https only (middleware.go)
	h = s.recoverPanics(h)
	h = s.checkHost(h) // DNS rebinding: only the dashboard's own names (hosts.go)
	h = withRequestID(h)
	h = s.measure(mux, h) // request durations by route pattern (metrics_middleware.go)
	return h
}
