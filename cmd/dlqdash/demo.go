package main

import (
	"context"
	"log/slog"
)

// runDemo runs `dlqdash demo`.
//
// For now it serves the dashboard shell on an empty catalog. When the
// emulator and the catalog land, this is the function to replace: start the
// embedded emulator (servicebus/emulator) with a seeded namespace and failing
// traffic, point the Service Bus adapter at it, and pass the ingester and
// traffic generator to serveDashboard as loops (stopping the emulator after
// serveDashboard returns).
func runDemo(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("demo: the embedded Service Bus emulator is not part of this build yet; serving an empty catalog")
	return serveDashboard(ctx, cfg, logger, dashboard{mode: "demo"})
}
