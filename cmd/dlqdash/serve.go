package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
)

// runServe runs `dlqdash serve` against the configured namespaces (today
// the one in cfg.ConnectionString): the dashboard, with one ingester per
// namespace keeping its catalog current.
func runServe(ctx context.Context, cfg Config, logger *slog.Logger) (err error) {
	conns, err := openNamespaces(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		// After serveDashboard: the ingesters and the engine have stopped
		// using the clients.
		err = errors.Join(err, closeNamespaces(context.WithoutCancel(ctx), conns))
	}()
	names := make([]string, len(conns))
	for i, c := range conns {
		names[i] = c.Name
		logger.Info("reading Service Bus", "namespace", c.Name, "host", c.Client.Namespace(), "poll", cfg.Poll.String(),
			"transport", namespaceTransport(cfg, i))
	}
	return serveDashboard(ctx, cfg, logger, dashboard{
		mode:       "serve",
		namespace:  strings.Join(names, ", "),
		namespaces: names,
		onStore:    withCatalog(cfg, catalogNamespaces(conns), logger),
	})
}

// namespaceTransport is the transport of the i-th namespace serve opened
// (openNamespaces keeps the config file's order): the file's transport key
// with --config, else --servicebus-transport.
func namespaceTransport(cfg Config, i int) string {
	if i < len(cfg.Namespaces) {
		return cfg.Namespaces[i].Transport
	}
	return cmp.Or(cfg.ServiceBusTransport, transportAMQP)
}
