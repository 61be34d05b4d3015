package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dlqdash/dlqdash/servicebus"
)

// namespaceConn is one configured namespace, opened.
type namespaceConn struct {
	Name   string // as configured; the single-namespace fallback is the connection string's host
	Client *servicebus.Client
}

// openNamespaces opens every configured namespace's Service Bus client, in
// configured order. Today that is the one namespace of
// SERVICEBUS_CONNECTION_STRING (and --admin-endpoint), named after its host.
// A namespace that is unreachable still opens: its ingester reports that in
// its status and keeps trying, while the others carry on. On error, the
// clients opened so far are closed.
func openNamespaces(ctx context.Context, cfg Config, logger *slog.Logger) ([]namespaceConn, error) {
	name := cfg.ConnectionString.Host
	c, err := openBroker(ctx, cfg.ConnectionString.Raw(), cfg.AdminEndpoint, cfg.ServiceBusTimeout, logger.With("namespace", name))
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	return []namespaceConn{{Name: name, Client: c}}, nil
}

// closeNamespaces closes every namespace's client.
func closeNamespaces(ctx context.Context, conns []namespaceConn) error {
	var errs []error
	for _, c := range conns {
		if err := c.Client.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close the Service Bus connection of %s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// catalogNamespaces are the namespaces as the catalog and the replay engine
// use them.
func catalogNamespaces(conns []namespaceConn) []catalogNamespace {
	out := make([]catalogNamespace, len(conns))
	for i, c := range conns {
		out[i] = catalogNamespace{name: c.Name, broker: c.Client}
	}
	return out
}
