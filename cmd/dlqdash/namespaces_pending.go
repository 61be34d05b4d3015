package main

// PENDING MERGE (issue 17): this file connects openNamespaces to the parts
// of package servicebus that helpers C and D add in parallel branches:
// servicebus.OpenWithCredential, Options.Name, Options.TLSConfig and
// servicebus/devcred (C), Options.Transport, Options.CustomEndpoint (D).
// Until they are merged, a namespace that needs one of them is refused with
// an error that says so; SAS namespaces over AMQP work. At the merge,
// replace the bodies below with the code in the comments and drop the
// refusals and errPendingMerge. (Checked against C's branch at 501b721 in a
// scratch merge: serve --config with credential: emulator, signing_key_file
// and tls_ca_file against 'dlqdash emulator --tls-ca-out --jwt-key-file'
// catalogs the namespace over TLS, and a wrong key shows as its status
// error.)

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dlqdash/dlqdash/servicebus"
)

var errPendingMerge = errors.New("this build of dlqdash cannot do that yet")

func productionOpener() namespaceOpener {
	return namespaceOpener{
		open: func(ctx context.Context, connectionString string, opts namespaceOptions) (*servicebus.Client, error) {
			so, err := serviceBusOptions(opts)
			if err != nil {
				return nil, err
			}
			return servicebus.Open(ctx, connectionString, so)
		},
		openWithCredential: func(ctx context.Context, fqns string, cred azcore.TokenCredential, opts namespaceOptions) (*servicebus.Client, error) {
			// At the merge:
			//	so, err := serviceBusOptions(opts)
			//	if err != nil { return nil, err }
			//	return servicebus.OpenWithCredential(ctx, fqns, cred, so)
			return nil, errors.New("signing in with an Entra ID credential: " + errPendingMerge.Error())
		},
		newCredential: newCredential,
	}
}

// serviceBusOptions is opts as servicebus.Options.
func serviceBusOptions(opts namespaceOptions) (servicebus.Options, error) {
	t := opts.Timeout
	so := servicebus.Options{
		// At the merge: Name: opts.Name,
		AdminEndpoint: opts.AdminEndpoint,
		Logger:        opts.Logger,
		Timeouts:      servicebus.Timeouts{Attach: t, Send: t, Receive: t, Settle: t, Peek: t, Admin: t},
	}
	// At the merge, instead of the three refusals:
	//	so.Transport = opts.Transport // servicebus.TransportAMQP or TransportWebSockets: the same strings
	//	so.CustomEndpoint = opts.CustomEndpoint
	//	so.TLSConfig = opts.TLSConfig
	switch {
	case opts.Transport != "" && opts.Transport != transportAMQP:
		return so, errors.New("transport " + opts.Transport + ": " + errPendingMerge.Error())
	case opts.CustomEndpoint != "":
		return so, errors.New("custom_endpoint: " + errPendingMerge.Error())
	case opts.TLSConfig != nil:
		return so, errors.New("tls_ca_file: " + errPendingMerge.Error())
	}
	return so, nil
}

// newEmulatorCredential signs the emulator's tokens with key. At the merge:
//
//	return devcred.New(key, devcred.Options{})
func newEmulatorCredential(key []byte) (azcore.TokenCredential, error) {
	_ = key
	return nil, errors.New("credential emulator: " + errPendingMerge.Error())
}
