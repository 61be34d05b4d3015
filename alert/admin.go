package alert

import (
	"context"
	"fmt"
	"slices"
)

// AdminStore keeps the webhooks added on the Alerts page and reads the
// history. Package store implements it.
type AdminStore interface {
	AlertWebhooks(ctx context.Context) ([]Webhook, error)
	AddAlertWebhook(ctx context.Context, w Webhook) (Webhook, error)
	RemoveAlertWebhook(ctx context.Context, id int64) (Webhook, error)
	AlertDeliveries(ctx context.Context, limit int) ([]Delivery, error)
}

// Admin is the Alerts page's view of the webhooks: the config file's and
// the stored ones, never with their URLs.
type Admin struct {
	Store AdminStore
	// Config are the config file's webhooks.
	Config []Webhook
	// PublicURL is --public-url ("" when not set).
	PublicURL string
}

// Webhooks lists the config file's webhooks, then the stored ones, with
// URL cleared.
func (a *Admin) Webhooks(ctx context.Context) ([]Webhook, error) {
	stored, err := a.Store.AlertWebhooks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	out := append(slices.Clone(a.Config), stored...)
	for i := range out {
		out[i].URL = ""
	}
	return out, nil
}

// AddWebhook checks and stores w, and returns it without its URL.
func (a *Admin) AddWebhook(ctx context.Context, w Webhook) (Webhook, error) {
	w.FromConfig, w.ID = false, 0
	if err := w.Check(); err != nil {
		return Webhook{}, err
	}
	for _, c := range a.Config {
		if c.Name == w.Name {
			return Webhook{}, &InvalidError{"name", fmt.Sprintf("%q is the name of a webhook in the config file", w.Name)}
		}
	}
	out, err := a.Store.AddAlertWebhook(ctx, w)
	if err != nil {
		return Webhook{}, fmt.Errorf("add webhook: %w", err)
	}
	out.URL = ""
	return out, nil
}

// RemoveWebhook removes stored webhook id and returns it without its URL.
func (a *Admin) RemoveWebhook(ctx context.Context, id int64) (Webhook, error) {
	w, err := a.Store.RemoveAlertWebhook(ctx, id)
	if err != nil {
		return Webhook{}, fmt.Errorf("remove webhook: %w", err)
	}
	w.URL = ""
	return w, nil
}

// Deliveries returns the newest deliveries, newest first.
func (a *Admin) Deliveries(ctx context.Context, limit int) ([]Delivery, error) {
	return a.Store.AlertDeliveries(ctx, limit)
}
