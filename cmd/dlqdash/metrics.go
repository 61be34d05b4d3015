package main

import (
	"log/slog"
	"net/http"

	"github.com/dlqdash/dlqdash/metrics"
	"github.com/dlqdash/dlqdash/web"
)

// fanOut calls each hook in turn. The hooks it joins (the live hub's and
// the metrics') never block, so neither does it.
func fanOut[T any](hooks ...func(T)) func(T) {
	return func(v T) {
		for _, h := range hooks {
			h(v)
		}
	}
}

// newMetricsServer serves GET /metrics alone, for --metrics-addr: a
// Prometheus scraper reaches it without reaching the dashboard. It needs
// no sign-in either (see web/metrics_middleware.go).
func newMetricsServer(m *metrics.Metrics, logger *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: web.ReadHeaderTimeout,
		ReadTimeout:       web.ReadTimeout, // a scrape has no body: the whole request
		IdleTimeout:       web.IdleTimeout,
		MaxHeaderBytes:    web.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
