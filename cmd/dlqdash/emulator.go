package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/config"
)

// runEmulator runs `dlqdash emulator`: the Service Bus emulator alone, AMQP
// on cfg.Emulator.AMQPAddr, admin HTTP on cfg.Emulator.AdminAddr, entities
// from cfg.Emulator.ConfigPath (or the built-in sample namespace); or the
// namespaces of cfg.Emulator.Namespaces, each on its own listeners; over TLS
// and checking JWTs when configured. It prints the connection string on
// stdout (one "NAME CONNECTION-STRING" line per namespace with
// --namespace) and serves until ctx ends.
func runEmulator(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	ec := cfg.Emulator
	entities := config.Default()
	if path := ec.ConfigPath; path != "" {
		var err error
		if entities, err = config.Load(path); err != nil {
			return fmt.Errorf("emulator configuration: %w", err)
		}
	}
	emuCfg := emulator.Config{
		KeyName: ec.KeyName,
		Key:     string(ec.Key),
		Logger:  logger,
	}
	for _, r := range ec.SASRules {
		emuCfg.AuthorizationRules = append(emuCfg.AuthorizationRules,
			broker.AuthorizationRule{KeyName: r.KeyName, Rights: r.Rights, PrimaryKey: string(r.Key)})
	}
	if len(ec.Namespaces) == 0 {
		emuCfg.AMQPAddr, emuCfg.AdminAddr, emuCfg.Entities = ec.AMQPAddr, ec.AdminAddr, entities
	}
	for _, n := range ec.Namespaces {
		nsEntities := entities
		if n.ConfigPath != "" {
			var err error
			if nsEntities, err = config.Load(n.ConfigPath); err != nil {
				return fmt.Errorf("emulator configuration of namespace %s: %w", n.Name, err)
			}
		}
		emuCfg.Namespaces = append(emuCfg.Namespaces, emulator.NamespaceConfig{
			Name: n.Name, AMQPAddr: n.AMQPAddr, AdminAddr: n.AdminAddr, Entities: nsEntities,
		})
	}
	var err error
	if emuCfg.JWTKey, err = emulatorJWTKey(ec); err != nil {
		return err
	}
	if ec.TLSCert != "" || ec.TLSCAOut != "" {
		emuCfg.TLS = &emulator.TLSConfig{}
		if ec.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(ec.TLSCert, ec.TLSKey)
			if err != nil {
				return fmt.Errorf("emulator TLS certificate: %w", err)
			}
			emuCfg.TLS.Certificate = &cert
		}
	}
	emu, err := emulator.Start(ctx, emuCfg)
	if err != nil {
		return err
	}
	if ec.TLSCAOut != "" {
		if err := os.WriteFile(ec.TLSCAOut, emu.CertificatePEM(), 0o644); err != nil {
			_ = emu.Close()
			return fmt.Errorf("write the emulator's certificate for clients: %w", err)
		}
		logger.Info("emulator certificate written", "file", ec.TLSCAOut)
	}
	tlsOn := emuCfg.TLS != nil
	for _, s := range emu.Servers() {
		attrs := []any{"namespace", s.Namespace().Name(), "endpoint", "sb://" + s.AMQPAddr().String(),
			"admin_url", s.AdminURL(), "tls", tlsOn, "jwt", len(emuCfg.JWTKey) > 0}
		if len(ec.Namespaces) == 0 {
			attrs = append(attrs, "entities", entities.Summary())
		}
		logger.Info("emulator ready", attrs...)
		line := clientConnectionString(s.AMQPAddr(), ec, tlsOn)
		if len(ec.Namespaces) > 0 {
			line = s.Name() + " " + line
		}
		fmt.Fprintln(stdout, line)
	}

	<-ctx.Done()
	logger.Info("shutting down", "reason", context.Cause(ctx).Error())
	err = emu.Close()
	logger.Info("stopped")
	return err
}

// emulatorJWTKey reads the JWT key: the file's contents, or the variable's
// value, surrounding whitespace trimmed; nil when neither is given.
func emulatorJWTKey(ec EmulatorConfig) ([]byte, error) {
	if ec.JWTKeyFile == "" {
		if ec.JWTKey == "" {
			return nil, nil
		}
		return []byte(ec.JWTKey), nil
	}
	raw, err := os.ReadFile(ec.JWTKeyFile)
	if err != nil {
		return nil, fmt.Errorf("emulator JWT key: %w", err)
	}
	key := bytes.TrimSpace(raw)
	if len(key) < minJWTKey {
		return nil, fmt.Errorf("emulator JWT key file %s has %d bytes; use at least %d (for example: openssl rand -base64 32 > %s)", ec.JWTKeyFile, len(key), minJWTKey, ec.JWTKeyFile)
	}
	return key, nil
}

// clientConnectionString is the connection string to print for users. On
// the default port it is exactly the one Microsoft's emulator documents
// (Endpoint=sb://localhost;...), so tools configured for it work unchanged.
// Over TLS it has no UseDevelopmentEmulator=true (which makes the SDK dial
// plain TCP), and the default port is 5671. A custom key is not printed.
func clientConnectionString(addr net.Addr, cfg EmulatorConfig, tlsOn bool) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		host = "localhost"
	}
	endpoint := net.JoinHostPort(host, port)
	flag, defaultPort := "UseDevelopmentEmulator=true;", "5672"
	if tlsOn {
		flag, defaultPort = "", "5671"
	}
	if port == defaultPort {
		endpoint = host
	}
	key := string(cfg.Key)
	if key != emulator.DefaultKey {
		key = "<the value of " + envEmulatorKey + ">"
	}
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;%s", endpoint, cfg.KeyName, key, flag)
}
