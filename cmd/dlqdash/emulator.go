package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/config"
)

// runEmulator runs `dlqdash emulator`: the Service Bus emulator alone, AMQP
// on cfg.Emulator.AMQPAddr, admin HTTP on cfg.Emulator.AdminAddr, entities
// from cfg.Emulator.ConfigPath (or the built-in sample namespace). It prints
// the connection string on stdout and serves until ctx ends.
func runEmulator(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	entities := config.Default()
	if path := cfg.Emulator.ConfigPath; path != "" {
		var err error
		if entities, err = config.Load(path); err != nil {
			return fmt.Errorf("emulator configuration: %w", err)
		}
	}
	emu, err := emulator.Start(ctx, emulator.Config{
		AMQPAddr:  cfg.Emulator.AMQPAddr,
		AdminAddr: cfg.Emulator.AdminAddr,
		Entities:  entities,
		KeyName:   cfg.Emulator.KeyName,
		Key:       string(cfg.Emulator.Key),
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	logger.Info("emulator ready", "namespace", emu.Namespace().Name(), "entities", entities.Summary())
	fmt.Fprintln(stdout, clientConnectionString(emu, cfg.Emulator))

	<-ctx.Done()
	logger.Info("shutting down", "reason", context.Cause(ctx).Error())
	err = emu.Close()
	logger.Info("stopped")
	return err
}

// clientConnectionString is the connection string to print for users. On
// the default port it is exactly the one Microsoft's emulator documents
// (Endpoint=sb://localhost;...), so tools configured for it work unchanged.
// A custom key is not printed.
func clientConnectionString(emu *emulator.Emulator, cfg EmulatorConfig) string {
	host, port, _ := net.SplitHostPort(emu.AMQPAddr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		host = "localhost"
	}
	endpoint := net.JoinHostPort(host, port)
	if port == strconv.Itoa(5672) {
		endpoint = host
	}
	key := string(cfg.Key)
	if key != emulator.DefaultKey {
		key = "<the value of " + envEmulatorKey + ">"
	}
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true;", endpoint, cfg.KeyName, key)
}
