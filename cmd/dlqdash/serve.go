package main

import (
	"context"
	"log/slog"
)

// runServe runs `dlqdash serve` against cfg.ConnectionString.
//
// For now it only validates the connection string (parseConfig did) and
// serves the dashboard shell on an empty catalog. When the Service Bus
// adapter lands, build it from cfg.ConnectionString.Raw() here and pass the
// ingester to serveDashboard as a loop.
func runServe(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("serve: connection string accepted; connecting to Service Bus is not implemented in this build yet, so the catalog stays empty",
		"namespace", cfg.ConnectionString.Namespace())
	return serveDashboard(ctx, cfg, logger, dashboard{mode: "serve", namespace: cfg.ConnectionString.Host})
}
