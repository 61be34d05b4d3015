package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/dlqdash/dlqdash/servicebus/emulator"
	"github.com/dlqdash/dlqdash/servicebus/emulator/atom"
	"github.com/dlqdash/dlqdash/servicebus/emulator/broker"
	"github.com/dlqdash/dlqdash/servicebus/emulator/config"
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
	ns := broker.New(broker.Options{Logger: logger})
	if err := entities.Apply(ns); err != nil {
		return fmt.Errorf("emulator configuration: %w", err)
	}
	emu, err := startEmulator(ns, cfg.Emulator, logger)
	if err != nil {
		return err
	}
	logger.Info("emulator ready", "namespace", ns.Name(), "entities", entities.Summary())
	fmt.Fprintln(stdout, emu.clientConnectionString(cfg.Emulator))

	<-ctx.Done()
	logger.Info("shutting down", "reason", context.Cause(ctx).Error())
	err = emu.Close(context.WithoutCancel(ctx))
	logger.Info("stopped")
	return err
}

// embeddedEmulator is the emulator with both of its listeners: AMQP for the
// SDK's clients and admin HTTP/ATOM for its admin client.
type embeddedEmulator struct {
	amqp      *emulator.Server
	admin     *http.Server
	adminAddr net.Addr
	adminDone chan struct{}
	log       *slog.Logger
}

// startEmulator listens on both addresses (port 0 works) and serves ns.
func startEmulator(ns *broker.Namespace, cfg EmulatorConfig, logger *slog.Logger) (*embeddedEmulator, error) {
	amqp := emulator.New(emulator.Options{
		Namespace: ns,
		KeyName:   cfg.KeyName,
		Key:       string(cfg.Key),
		Logger:    logger.With("component", "emulator"),
	})
	if _, err := amqp.Start(cfg.AMQPAddr); err != nil {
		return nil, fmt.Errorf("start the emulator's AMQP endpoint: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		_ = amqp.Close()
		return nil, fmt.Errorf("start the emulator's admin endpoint: %w", err)
	}
	e := &embeddedEmulator{
		amqp: amqp,
		admin: &http.Server{
			Handler: atom.NewHandler(ns, atom.Options{
				KeyName: cfg.KeyName,
				Key:     string(cfg.Key),
				Logger:  logger.With("component", "emulator-admin"),
				Faults:  amqp, // drop-connections and latency under /$emulator/faults
			}),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		adminAddr: ln.Addr(),
		adminDone: make(chan struct{}),
		log:       logger,
	}
	go func() {
		defer close(e.adminDone)
		if err := e.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("emulator admin endpoint stopped", "error", err)
		}
	}()
	logger.Info("emulator admin listening", "addr", ln.Addr().String())
	return e, nil
}

// connectionString is what an SDK client in this process uses.
func (e *embeddedEmulator) connectionString() string { return e.amqp.ConnectionString() }

// clientConnectionString is the connection string to print for users. On
// the default port it is exactly the one Microsoft's emulator documents
// (Endpoint=sb://localhost;...), so tools configured for it work unchanged.
// A custom key is not printed.
func (e *embeddedEmulator) clientConnectionString(cfg EmulatorConfig) string {
	host, port, _ := net.SplitHostPort(e.amqp.Addr().String())
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

// Close stops the admin endpoint, then the AMQP endpoint.
func (e *embeddedEmulator) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := e.admin.Shutdown(ctx)
	<-e.adminDone
	return errors.Join(err, e.amqp.Close())
}
