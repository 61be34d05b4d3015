package main

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/devcred"
)

// productionOpener opens namespaces with package servicebus: a connection
// string with Open, a credential with OpenWithCredential.
func productionOpener() namespaceOpener {
	return namespaceOpener{
		open: func(ctx context.Context, connectionString string, opts namespaceOptions) (*servicebus.Client, error) {
			return servicebus.Open(ctx, connectionString, serviceBusOptions(opts))
		},
		openWithCredential: func(ctx context.Context, fqns string, cred azcore.TokenCredential, opts namespaceOptions) (*servicebus.Client, error) {
			return servicebus.OpenWithCredential(ctx, fqns, cred, serviceBusOptions(opts))
		},
		newCredential: newCredential,
	}
}

// serviceBusOptions is opts as servicebus.Options.
func serviceBusOptions(opts namespaceOptions) servicebus.Options {
	t := opts.Timeout
	return servicebus.Options{
		Name:           opts.Name,
		AdminEndpoint:  opts.AdminEndpoint,
		Transport:      opts.Transport,
		CustomEndpoint: opts.CustomEndpoint,
		TLSConfig:      opts.TLSConfig,
		Logger:         opts.Logger,
		Timeouts:       servicebus.Timeouts{Attach: t, Send: t, Receive: t, Settle: t, Peek: t, Admin: t},
	}
}

// newEmulatorCredential signs the emulator's tokens with key (credential:
// emulator), for the emulator and tests only.
func newEmulatorCredential(key []byte) (azcore.TokenCredential, error) {
	return devcred.New(key, devcred.Options{})
}
