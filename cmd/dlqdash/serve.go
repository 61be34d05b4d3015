package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
)

// runServe runs `dlqdash serve` against the namespaces of --config, or the
// one in cfg.ConnectionString: the dashboard, with the ingester keeping its
// catalog current.
func runServe(ctx context.Context, cfg Config, logger *slog.Logger) (err error) {
	conns, err := openNamespaces(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		// After serveDashboard: the ingester has stopped using the clients.
		err = errors.Join(err, closeNamespaces(context.WithoutCancel(ctx), conns))
	}()
	// The catalog of several namespaces at once is helper E's part of issue
	// 17 (store and ingester per namespace); until it is merged the first
	// namespace is cataloged and the others are only opened.
	first := conns[0]
	for _, c := range conns[1:] {
		logger.Warn("namespace opened but not cataloged by this build", "namespace", c.Name)
	}
	ns := first.Client.Namespace()
	logger.Info("reading Service Bus", "namespace", ns, "poll", cfg.Poll.String(), "transport", cmp.Or(cfg.ServiceBusTransport, "config file"))
	display := cfg.ConnectionString.Host
	if len(cfg.Namespaces) > 0 {
		display = first.Name
	}
	return serveDashboard(ctx, cfg, logger, dashboard{
		mode:      "serve",
		namespace: display,
		onStore:   withCatalog(cfg, first.Client, ns, logger),
	})
}
