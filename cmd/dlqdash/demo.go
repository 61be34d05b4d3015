package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dlqdash/dlqdash/demo"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

// runDemo runs `dlqdash demo`: the embedded emulator on loopback ports of
// its own, a seeded namespace with consumers that fail the way real ones
// do, and the dashboard.
//
// Shutdown order: the dashboard's HTTP, then its loops (the demo traffic
// among them), then the store (all in serveDashboard), then the emulator.
func runDemo(ctx context.Context, cfg Config, logger *slog.Logger) (err error) {
	ns := broker.New(broker.Options{Logger: logger})
	if err := demo.Provision(ns); err != nil {
		return err
	}
	emu, err := emulator.Start(ctx, emulator.Config{Namespace: ns, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := emu.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop the emulator: %w", cerr))
		}
	}()
	logger.Info("demo namespace ready", "endpoint", "sb://"+emu.AMQPAddr().String(), "admin_addr", emu.AdminAddr().String(),
		"key", "the emulator's default development key (see dlqdash emulator -h)")

	traffic, err := demo.Dial(emu.ConnectionString(), demo.Options{Logger: logger.With("component", "demo-traffic")})
	if err != nil {
		return err
	}
	defer traffic.Close(context.WithoutCancel(ctx))

	broker, err := openBroker(ctx, emu.ConnectionString(), emu.AdminURL(), "", cfg.ServiceBusTimeout, logger)
	if err != nil {
		return err
	}
	defer broker.Close(context.WithoutCancel(ctx))

	return serveDashboard(ctx, cfg, logger, dashboard{
		mode:       "demo",
		namespace:  emu.AMQPAddr().String(),
		namespaces: []string{demoNamespace},
		loops:      []func(context.Context) error{traffic.Run},
		onStore:    withCatalog(cfg, []catalogNamespace{{name: demoNamespace, broker: broker}}, logger),
	})
}

// demoNamespace names the demo's one namespace in the catalog: a name of its
// own rather than the emulator's address, whose port changes from run to
// run while the database stays.
const demoNamespace = "demo"
