package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dlqdash/dlqdash/servicebus/demo"
	"github.com/dlqdash/dlqdash/servicebus/emulator"
	"github.com/dlqdash/dlqdash/servicebus/emulator/broker"
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
	emu, err := startEmulator(ns, EmulatorConfig{
		AMQPAddr:  "127.0.0.1:0",
		AdminAddr: "127.0.0.1:0",
		KeyName:   emulator.DefaultKeyName,
		Key:       emulator.DefaultKey,
	}, logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := emu.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop the emulator: %w", cerr))
		}
	}()
	logger.Info("demo namespace ready", "endpoint", "sb://"+emu.amqp.Addr().String(), "admin_addr", emu.adminAddr.String(),
		"key", "the emulator's default development key (see dlqdash emulator -h)")

	traffic, err := demo.Dial(emu.connectionString(), demo.Options{Logger: logger.With("component", "demo-traffic")})
	if err != nil {
		return err
	}
	defer traffic.Close(context.WithoutCancel(ctx))

	broker, err := openBroker(ctx, emu.connectionString(), "http://"+emu.adminAddr.String(), logger)
	if err != nil {
		return err
	}
	defer broker.Close(context.WithoutCancel(ctx))

	return serveDashboard(ctx, cfg, logger, dashboard{
		mode:      "demo",
		namespace: emu.amqp.Addr().String(),
		loops:     []func(context.Context) error{traffic.Run},
		onStore:   withCatalog(cfg, broker, emu.amqp.Addr().String(), logger),
	})
}
