package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/credential"
)

// namespaceConn is one namespace serve watches: its name (from the config
// file, or the host of SERVICEBUS_CONNECTION_STRING) and its client.
type namespaceConn struct {
	Name   string
	Client *servicebus.Client
}

// namespaceOptions is everything a namespace's client is opened with
// beyond its address and credential: servicebus.Options, as openNamespaces
// sees it (see namespaces_pending.go).
type namespaceOptions struct {
	Name           string // the namespace's name, for its errors and logs; empty (its host) without --config
	AdminEndpoint  string
	Transport      string // transportAMQP or transportWebSockets
	CustomEndpoint string
	TLSConfig      *tls.Config // nil: the system's roots
	Logger         *slog.Logger
	Timeout        time.Duration // each Service Bus call's deadline
}

// namespaceOpener is what openNamespaces uses of package servicebus: its
// two doors (a SAS connection string, a token credential) and the
// credentials. Tests record what it is asked for.
type namespaceOpener struct {
	open               func(ctx context.Context, connectionString string, opts namespaceOptions) (*servicebus.Client, error)
	openWithCredential func(ctx context.Context, fqns string, cred azcore.TokenCredential, opts namespaceOptions) (*servicebus.Client, error)
	newCredential      func(CredentialConfig) (azcore.TokenCredential, error)
}

// openNamespaces opens a client for each namespace of the config file, in
// its order, or without --config the one namespace of
// SERVICEBUS_CONNECTION_STRING, named after its host. Opening does no I/O
// (servicebus.Open): an unreachable namespace shows up in its own health,
// never here. If one cannot be opened (a credential that cannot be built),
// the ones already opened are closed and the error names the namespace.
func openNamespaces(ctx context.Context, cfg Config, logger *slog.Logger) ([]namespaceConn, error) {
	return openNamespacesWith(ctx, cfg, logger, productionOpener())
}

func openNamespacesWith(ctx context.Context, cfg Config, logger *slog.Logger, o namespaceOpener) (conns []namespaceConn, err error) {
	sbLogger := logger.With("component", "servicebus")
	if len(cfg.Namespaces) == 0 {
		// Today's way, unchanged: one namespace from the environment.
		c, err := o.open(ctx, cfg.ConnectionString.Raw(), namespaceOptions{AdminEndpoint: cfg.AdminEndpoint, Transport: cfg.ServiceBusTransport,
			Logger: sbLogger, Timeout: cfg.ServiceBusTimeout})
		if err != nil {
			return nil, fmt.Errorf("connect to Service Bus: %w", err)
		}
		return []namespaceConn{{Name: cfg.ConnectionString.Host, Client: c}}, nil
	}
	defer func() {
		if err != nil {
			for _, c := range conns {
				if cerr := c.Client.Close(context.WithoutCancel(ctx)); cerr != nil {
					logger.Warn("close a namespace's connection", "namespace", c.Name, "error", cerr)
				}
			}
			conns = nil
		}
	}()
	for _, ns := range cfg.Namespaces {
		c, signIn, err := openNamespace(ctx, ns, cfg.ServiceBusTimeout, sbLogger.With("namespace", ns.Name), o)
		if err != nil {
			return conns, fmt.Errorf("namespace %s (config file line %d): %w", ns.Name, ns.Line, err)
		}
		conns = append(conns, namespaceConn{Name: ns.Name, Client: c})
		logger.Info("namespace opened", "namespace", ns.Name, "host", ns.Host(), "sign_in", signIn, "transport", ns.Transport)
	}
	return conns, nil
}

// openNamespace opens one namespace of the file; signIn says how it signs
// in (sas, or the credential's kind), for the log.
func openNamespace(ctx context.Context, ns NamespaceConfig, timeout time.Duration, logger *slog.Logger, o namespaceOpener) (*servicebus.Client, string, error) {
	opts := namespaceOptions{Name: ns.Name, AdminEndpoint: ns.AdminEndpoint, Transport: ns.Transport, CustomEndpoint: ns.CustomEndpoint, Logger: logger, Timeout: timeout}
	if len(ns.TLSCA) > 0 {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ns.TLSCA) {
			return nil, "", fmt.Errorf("tls_ca_file %s holds no certificate", ns.TLSCAFile)
		}
		opts.TLSConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	if ns.FullyQualifiedNamespace == "" {
		c, err := o.open(ctx, ns.ConnectionString.Raw(), opts)
		return c, "sas", err
	}
	cred, err := o.newCredential(ns.Credential)
	if err != nil {
		return nil, "", err
	}
	c, err := o.openWithCredential(ctx, ns.FullyQualifiedNamespace, cred, opts)
	return c, ns.Credential.Kind, err
}

// newCredential builds a namespace's Entra ID credential (servicebus/credential),
// or for credential: emulator one that signs its own tokens with the
// emulator's key (newEmulatorCredential).
func newCredential(c CredentialConfig) (azcore.TokenCredential, error) {
	if c.Kind == credEmulator {
		return newEmulatorCredential([]byte(c.SigningKey))
	}
	return credential.New(credentialSpec(c))
}

// credentialSpec is c as servicebus/credential takes it.
func credentialSpec(c CredentialConfig) credential.Spec {
	return credential.Spec{Kind: credential.Kind(c.Kind), TenantID: c.TenantID, ClientID: c.ClientID, ClientSecret: string(c.ClientSecret)}
}

// closeNamespaces closes every client, joining their errors.
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
