package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/store"
)

// openBroker connects the Service Bus adapter. It does not fail when the
// namespace is unreachable: the ingester reports that in its status and keeps
// trying, while the dashboard serves the catalog it has.
// transport is servicebus.Options.Transport ("" for AMQP over TCP).
func openBroker(ctx context.Context, connectionString, adminEndpoint, transport string, timeout time.Duration, logger *slog.Logger) (*servicebus.Client, error) {
	c, err := servicebus.Open(ctx, connectionString, servicebus.Options{
		AdminEndpoint: adminEndpoint,
		Transport:     transport,
		Logger:        logger.With("component", "servicebus"),
		Timeouts: servicebus.Timeouts{Attach: timeout, Send: timeout, Receive: timeout, Settle: timeout,
			Peek: timeout, Admin: timeout},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Service Bus: %w", err)
	}
	return c, nil
}

// serviceBus is what the dashboard needs of the namespace: the catalog reads
// it, the replay engine changes it. *servicebus.Client is both.
type serviceBus interface {
	dlq.Broker
	replay.Broker
}

// withCatalog makes the dashboard run an ingester and a replay engine over
// broker once its store is open.
func withCatalog(cfg Config, broker serviceBus, namespace string, logger *slog.Logger) func(*store.Store, *dashboard) error {
	return func(st *store.Store, d *dashboard) error {
		retention := cfg.Retention
		if retention == 0 {
			retention = -1 // keep forever
		}
		ing := dlq.New(dlq.Config{
			Broker:    broker,
			Catalog:   st,
			Logger:    logger.With("component", "catalog"),
			Namespace: namespace,
			Poll:      cfg.Poll,
			Retention: retention,
			Publish:   d.publish,
		})
		d.status = ing
		d.loops = append(d.loops, ing.Run)

		engine, err := replay.New(replay.Config{
			Store:     st,
			Broker:    broker,
			Audit:     d.audit,
			Logger:    logger.With("component", "replay"),
			OnChange:  d.onJob,
			OnRemoved: ing.Removed,
			PoisonCap: cfg.PoisonCap,
		})
		if err != nil {
			return err
		}
		d.jobs = engine
		d.loops = append(d.loops, engine.Run)
		return nil
	}
}
