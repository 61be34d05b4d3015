package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdash/dlqdash/cluster"
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

// catalogNamespace is one namespace as the catalog and the engine see it.
type catalogNamespace struct {
	name   string
	broker serviceBus
}

// withCatalog makes the dashboard run one ingester per namespace (each with
// its own health and backoff, so a namespace that does not answer never
// slows or hides the others) and a replay engine with a broker per
// namespace, once its store is open. Rows cataloged before the catalog knew
// namespaces are adopted by the first namespace.
func withCatalog(cfg Config, namespaces []catalogNamespace, logger *slog.Logger) func(context.Context, *store.Store, *dashboard) error {
	return func(ctx context.Context, st *store.Store, d *dashboard) error {
		if len(namespaces) == 0 {
			return errors.New("no Service Bus namespace is configured")
		}
		if n, err := st.AdoptUnnamed(ctx, namespaces[0].name); err != nil {
			return fmt.Errorf("open database: %w", err)
		} else if n > 0 {
			logger.Info("catalog adopted the entities it had before namespaces", "namespace", namespaces[0].name, "entities", n)
		}
		retention := cfg.Retention
		if retention == 0 {
			retention = -1 // keep forever
		}
		var statuses dlq.StatusSet
		ingesters := map[string]*cluster.Ingester{}
		rs := d.replicas
		if rs == nil {
			rs = openReplicas(st, cfg.ReplicaID, logger)
		}
		brokers := map[string]replay.Broker{"": namespaces[0].broker} // jobs of the unnamed namespace, if any are left
		publish := d.publish
		if len(namespaces) > 1 && publish != nil {
			// The freshness the pages show is every namespace's summary.
			inner := publish
			publish = func(c dlq.Change) {
				if c.Kind == dlq.ChangeFreshness {
					sum := statuses.Status()
					c.Status = &sum
				}
				inner(c)
			}
		}
		for i, ns := range namespaces {
			// Retention and the search index's merging are catalog-wide:
			// the first namespace's ingester does them for all.
			keep := retention
			if i > 0 {
				keep = -1
			}
			// The namespace's ingester runs only while this replica holds
			// its ingest lease (always, alone on SQLite), writing through
			// the catalog of the lease's term (cluster.Ingester).
			ing := cluster.NewIngester(cluster.IngesterConfig{
				Namespace: ns.name,
				Self:      rs.id,
				Leases:    rs.leases,
				Catalog: func(lease string, term int64) dlq.Catalog {
					return rs.catalog(ns.name, lease, term)
				},
				New: func(catalog dlq.Catalog) *dlq.Ingester {
					return dlq.New(dlq.Config{
						Broker:    ns.broker,
						Catalog:   catalog,
						Logger:    logger.With("component", "catalog", "namespace", ns.name),
						Namespace: ns.name,
						Poll:      cfg.Poll,
						Retention: keep,
						Publish:   publish,
					})
				},
				LastSuccess: st.Namespace(ns.name).LastSuccess,
				Stale:       max(3*cfg.Poll, 5*time.Second), // the ingester's own (dlq.Config.Stale)
				Publish:     publish,
				Logger:      logger,
			})
			statuses = append(statuses, ing)
			ingesters[ns.name] = ing
			brokers[ns.name] = ns.broker
			d.loops = append(d.loops, ing.Run)
		}
		if len(namespaces) == 1 {
			d.status = statuses[0]
		} else {
			d.status = statuses
		}

		engine, err := replay.New(replay.Config{
			Store:  rs.jobs,
			Claims: rs.claims,
			Brokers: func(name string) (replay.Broker, error) {
				if b, ok := brokers[name]; ok {
					return b, nil
				}
				return nil, fmt.Errorf("no namespace %q is configured", name)
			},
			Audit:    d.audit,
			Logger:   logger.With("component", "replay"),
			OnChange: d.onJob,
			OnRemovedFrom: func(namespace, entity string, q dlq.SubQueue, n int) {
				if ing := ingesters[namespace]; ing != nil {
					ing.Removed(entity, q, n)
				}
			},
			PoisonCap: cfg.PoisonCap,
		})
		if err != nil {
			return err
		}
		d.jobs = engine
		rs.engineWake = engine.Wake
		d.loops = append(d.loops, engine.Run)
		return nil
	}
}
