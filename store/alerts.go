package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/alert"
)

// The alert loop's tables (migration 0014): webhooks added on the Alerts
// page, the delivery history, and the new-group cursor.

var _ alert.Store = (*Store)(nil)

// TakeNewGroups returns the keys of the groups cataloged since the last call
// (or since migration 0014) and moves the cursor past them, in one
// transaction.
func (s *Store) TakeNewGroups(ctx context.Context) ([]string, error) {
	// Most calls find nothing: ask a reader before taking the writer.
	var found bool
	if err := s.reader.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM groups
		WHERE id > (SELECT group_id FROM alert_cursor WHERE id = 1))`).Scan(&found); err != nil {
		return nil, fmt.Errorf("read new groups: %w", err)
	}
	if !found {
		return nil, nil
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return nil, s.wrap("read new groups", err)
	}
	defer tx.Rollback()
	var cursor int64
	if err := tx.QueryRowContext(ctx, `SELECT group_id FROM alert_cursor WHERE id = 1`).Scan(&cursor); err != nil {
		return nil, fmt.Errorf("read new groups: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, key FROM groups WHERE id > ? ORDER BY id`, cursor)
	if err != nil {
		return nil, fmt.Errorf("read new groups: %w", err)
	}
	var keys []string
	for rows.Next() {
		var key string
		if err := rows.Scan(&cursor, &key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read new groups: %w", err)
		}
		keys = append(keys, key)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read new groups: %w", err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE alert_cursor SET group_id = ? WHERE id = 1`, cursor); err != nil {
		return nil, fmt.Errorf("read new groups: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap("read new groups", err)
	}
	return keys, nil
}

// OldestPresent returns, for each group key, when its oldest present dead
// letter was enqueued (the first time the catalog saw it, for one without
// an enqueued time). Each group is one seek of messages_by_group.
func (s *Store) OldestPresent(ctx context.Context, keys []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, key := range keys {
		var enq int64
		var firstSeen int64
		err := s.reader.QueryRowContext(ctx, `SELECT coalesce(m.enqueued_at, -1), m.first_seen_at FROM messages m
			WHERE m.group_id = (SELECT id FROM groups WHERE key = ?) AND m.gone_at IS NULL
			ORDER BY coalesce(m.enqueued_at, -1), m.id LIMIT 1`, key).Scan(&enq, &firstSeen)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("oldest dead letter of group %s: %w", key, err)
		}
		if enq < 0 {
			enq = firstSeen
		}
		out[key] = time.UnixMilli(enq).UTC()
	}
	return out, nil
}

const webhookColumns = `id, name, url, host, format, events, growth_per_minute, untriaged_after_ms, base_url, created_at, created_by`

func scanWebhook(sc interface{ Scan(...any) error }) (alert.Webhook, error) {
	var w alert.Webhook
	var format, events string
	var untriaged, created int64
	if err := sc.Scan(&w.ID, &w.Name, &w.URL, &w.Host, &format, &events, &w.GrowthPerMinute, &untriaged, &w.BaseURL,
		&created, &w.CreatedBy); err != nil {
		return w, err
	}
	w.Format = alert.Format(format)
	for _, e := range strings.Split(events, ",") {
		if e != "" {
			w.Events = append(w.Events, alert.Event(e))
		}
	}
	w.UntriagedAfter = time.Duration(untriaged) * time.Millisecond
	w.CreatedAt = time.UnixMilli(created).UTC()
	return w, nil
}

// AlertWebhooks returns the webhooks added on the Alerts page and not
// removed, oldest first, with their URLs (secrets: for the alert loop only).
func (s *Store) AlertWebhooks(ctx context.Context) ([]alert.Webhook, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+webhookColumns+` FROM alert_webhooks WHERE deleted_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	var out []alert.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// AddAlertWebhook stores w (checked by the caller) and returns it with its
// ID and creation time.
func (s *Store) AddAlertWebhook(ctx context.Context, w alert.Webhook) (alert.Webhook, error) {
	events := make([]string, len(w.Events))
	for i, e := range w.Events {
		events[i] = string(e)
	}
	w.CreatedAt = time.UnixMilli(s.nowMillis()).UTC()
	err := s.writer.QueryRowContext(ctx, `INSERT INTO alert_webhooks (name, url, host, format, events, growth_per_minute,
		untriaged_after_ms, base_url, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		w.Name, w.URL, w.Host, string(w.Format), strings.Join(events, ","), w.GrowthPerMinute, w.UntriagedAfter.Milliseconds(),
		w.BaseURL, w.CreatedAt.UnixMilli(), w.CreatedBy).Scan(&w.ID)
	if err != nil {
		return w, s.wrap("add webhook", err)
	}
	return w, nil
}

// RemoveAlertWebhook removes webhook id (its deliveries stay in the
// history) and returns it; ErrNotFound when there is none.
func (s *Store) RemoveAlertWebhook(ctx context.Context, id int64) (alert.Webhook, error) {
	w, err := scanWebhook(s.writer.QueryRowContext(ctx, `UPDATE alert_webhooks SET deleted_at = ?, url = ''
		WHERE id = ? AND deleted_at IS NULL RETURNING `+webhookColumns, s.nowMillis(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return w, fmt.Errorf("webhook %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return w, s.wrap("remove webhook", err)
	}
	return w, nil
}

const deliveryColumns = `id, at, webhook, webhook_name, host, format, event, subject, title, link, status_code, error, attempts`

// AddAlertDelivery records d and returns it with its ID.
func (s *Store) AddAlertDelivery(ctx context.Context, d alert.Delivery) (alert.Delivery, error) {
	var status *int
	if d.StatusCode != 0 {
		status = &d.StatusCode
	}
	err := s.writer.QueryRowContext(ctx, `INSERT INTO alert_deliveries (at, webhook, webhook_name, host, format, event, subject,
		title, link, status_code, error, attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		d.At.UTC().UnixMilli(), d.Webhook, d.WebhookName, d.Host, string(d.Format), string(d.Event), d.Subject, d.Title, d.Link,
		status, d.Error, d.Attempts).Scan(&d.ID)
	if err != nil {
		return d, s.wrap("record alert delivery", err)
	}
	return d, nil
}

func scanDeliveries(rows *sql.Rows) ([]alert.Delivery, error) {
	defer rows.Close()
	var out []alert.Delivery
	for rows.Next() {
		var d alert.Delivery
		var at int64
		var format, event string
		var status *int
		if err := rows.Scan(&d.ID, &at, &d.Webhook, &d.WebhookName, &d.Host, &format, &event, &d.Subject, &d.Title, &d.Link,
			&status, &d.Error, &d.Attempts); err != nil {
			return nil, fmt.Errorf("read alert history: %w", err)
		}
		d.At, d.Format, d.Event = time.UnixMilli(at).UTC(), alert.Format(format), alert.Event(event)
		if status != nil {
			d.StatusCode = *status
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// AlertDeliveriesSince returns the deliveries at or after since, oldest
// first.
func (s *Store) AlertDeliveriesSince(ctx context.Context, since time.Time) ([]alert.Delivery, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM alert_deliveries WHERE at >= ? ORDER BY id`,
		since.UTC().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read alert history: %w", err)
	}
	return scanDeliveries(rows)
}

// AlertDeliveries returns the newest deliveries, newest first, at most
// limit.
func (s *Store) AlertDeliveries(ctx context.Context, limit int) ([]alert.Delivery, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM alert_deliveries ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("read alert history: %w", err)
	}
	return scanDeliveries(rows)
}
