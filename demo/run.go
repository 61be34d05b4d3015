package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Dial connects demo traffic to the namespace behind connectionString.
// The returned Traffic owns its client: Close it when done.
func Dial(connectionString string, o Options) (*Traffic, error) {
	client, err := azservicebus.NewClientFromConnectionString(connectionString, nil)
	if err != nil {
		return nil, fmt.Errorf("demo traffic: %w", err)
	}
	t := New(client, o)
	t.owned = true
	return t, nil
}

// Close closes the client if Dial created it.
func (t *Traffic) Close(ctx context.Context) error {
	if !t.owned {
		return nil
	}
	return t.client.Close(ctx)
}

// Run is the whole demo traffic life: consumers start, the burst is sent
// and processed, then a trickle keeps going until ctx ends. It returns nil
// when ctx ends and an error only if the burst could not be sent.
func (t *Traffic) Run(ctx context.Context) error {
	t.Start(ctx)
	defer t.Wait()
	if _, err := t.Seed(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	err := t.Trickle(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
