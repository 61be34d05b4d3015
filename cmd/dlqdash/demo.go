package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dlqdash/dlqdash/demo"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/store"
)

// runDemo runs `dlqdash demo`: the embedded emulator serving the demo's
// namespaces (prod-eu and prod-us, each on loopback ports of its own), each
// seeded and with consumers that fail the way real ones do, at its own
// rate; and the dashboard cataloging all of them, one ingester each, as
// serve does with a config file of several namespaces.
//
// Shutdown order: the dashboard's HTTP, then its loops (the demo traffic
// among them), then the store (all in serveDashboard), then the emulator.
func runDemo(ctx context.Context, cfg Config, logger *slog.Logger) (err error) {
	names := demo.Namespaces()
	var nss []emulator.NamespaceConfig
	for _, name := range names {
		ns := broker.New(broker.Options{Logger: logger.With("namespace", name)})
		if err := demo.ProvisionNamespace(ns, name); err != nil {
			return err
		}
		nss = append(nss, emulator.NamespaceConfig{Name: name, Namespace: ns})
	}
	emu, err := emulator.Start(ctx, emulator.Config{Namespaces: nss, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := emu.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop the emulator: %w", cerr))
		}
	}()

	var (
		loops      []func(context.Context) error
		namespaces []catalogNamespace
		endpoints  []string
	)
	for _, s := range emu.Servers() {
		name := s.Name()
		logger.Info("demo namespace ready", "namespace", name, "endpoint", "sb://"+s.AMQPAddr().String(), "admin_addr", s.AdminAddr().String(),
			"key", "the emulator's default development key (see dlqdash emulator -h)")
		traffic, err := demo.Dial(s.ConnectionString(), demo.ForNamespace(name, demo.Options{Logger: logger.With("component", "demo-traffic")}))
		if err != nil {
			return err
		}
		defer traffic.Close(context.WithoutCancel(ctx))
		loops = append(loops, traffic.Run)

		b, err := openBroker(ctx, s.ConnectionString(), s.AdminURL(), "", cfg.ServiceBusTimeout, logger.With("namespace", name))
		if err != nil {
			return err
		}
		defer b.Close(context.WithoutCancel(ctx))
		namespaces = append(namespaces, catalogNamespace{name: name, broker: b})
		endpoints = append(endpoints, s.AMQPAddr().String())
	}

	catalog := withCatalog(cfg, namespaces, logger)
	return serveDashboard(ctx, cfg, logger, dashboard{
		mode:       "demo",
		namespace:  strings.Join(endpoints, ", "),
		namespaces: names,
		loops:      loops,
		onStore: func(ctx context.Context, st *store.Store, d *dashboard) error {
			// A catalog of an earlier demo, which had one namespace named
			// "demo", carries on as the first of today's.
			if n, err := st.Adopt(ctx, legacyDemoNamespace, names[0]); err != nil {
				return fmt.Errorf("open database: %w", err)
			} else if n > 0 {
				logger.Info("catalog adopted the earlier demo's namespace", "from", legacyDemoNamespace, "namespace", names[0], "entities", n)
			}
			return catalog(ctx, st, d)
		},
	})
}

// legacyDemoNamespace named the demo's one namespace in the catalog before
// the demo showed two.
const legacyDemoNamespace = "demo"
