package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// runServe runs `dlqdash serve` against the namespace in
// cfg.ConnectionString: the dashboard, with the ingester keeping its catalog
// current.
func runServe(ctx context.Context, cfg Config, logger *slog.Logger) (err error) {
	broker, err := openBroker(ctx, cfg.ConnectionString.Raw(), cfg.AdminEndpoint, cfg.ServiceBusTransport, cfg.ServiceBusTimeout, logger)
	if err != nil {
		return err
	}
	defer func() {
		// After serveDashboard: the ingester has stopped using the client.
		if cerr := broker.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the Service Bus connection: %w", cerr))
		}
	}()
	logger.Info("reading Service Bus", "namespace", cfg.ConnectionString.Namespace(), "poll", cfg.Poll.String(), "transport", cfg.ServiceBusTransport)
	ns := cfg.ConnectionString.Namespace()
	return serveDashboard(ctx, cfg, logger, dashboard{
		mode:      "serve",
		namespace: cfg.ConnectionString.Host,
		onStore:   withCatalog(cfg, broker, ns, logger),
	})
}
