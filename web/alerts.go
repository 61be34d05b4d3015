package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/alert"
	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/views"
)

// Alerts are the alert webhooks as the Alerts pages manage them.
// *alert.Admin implements it. Webhooks come back without their URLs.
type Alerts interface {
	Webhooks(ctx context.Context) ([]alert.Webhook, error)
	// AddWebhook checks and stores w; its refusals have InvalidParameter().
	AddWebhook(ctx context.Context, w alert.Webhook) (alert.Webhook, error)
	// RemoveWebhook removes a stored webhook; NotFound() when none.
	RemoveWebhook(ctx context.Context, id int64) (alert.Webhook, error)
	Deliveries(ctx context.Context, limit int) ([]alert.Delivery, error)
}

// historyLimit is how many deliveries the history shows.
const historyLimit = 200

// webhookInput is a webhook as the form and the API send it.
type webhookInput struct {
	Name            string   `json:"name"`
	URL             string   `json:"url"`
	Format          string   `json:"format"`
	Events          []string `json:"events"`
	GrowthPerMinute int      `json:"growth_per_minute"`
	UntriagedAfter  string   `json:"untriaged_after"`
}

func (in webhookInput) webhook(r *http.Request, publicURL string) (alert.Webhook, error) {
	w := alert.Webhook{Name: in.Name, URL: in.URL, Format: alert.Format(strings.TrimSpace(in.Format)),
		GrowthPerMinute: in.GrowthPerMinute, CreatedBy: audit.ActorFrom(r.Context())}
	for _, e := range in.Events {
		for _, part := range strings.Split(e, ",") {
			if part = strings.TrimSpace(part); part != "" {
				w.Events = append(w.Events, alert.Event(part))
			}
		}
	}
	if s := strings.TrimSpace(in.UntriagedAfter); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return w, invalidArgument("untriaged_after", `must be a duration such as "30m" or "2h", not %q`, s)
		}
		w.UntriagedAfter = d
	}
	if publicURL == "" {
		// Links point back to the dashboard as this person reached it.
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		w.BaseURL = scheme + "://" + r.Host
	}
	return w, nil
}

// addWebhook stores a webhook and audits it (never its URL).
func (s *Server) addWebhook(ctx context.Context, w alert.Webhook) (alert.Webhook, error) {
	out, err := s.alerts.AddWebhook(ctx, w)
	if err != nil {
		return out, err
	}
	s.record(ctx, audit.Record{Action: audit.ActionAlertWebhookAdded, Params: webhookParams(out)})
	return out, nil
}

func webhookParams(w alert.Webhook) map[string]any {
	events := make([]string, len(w.Events))
	for i, e := range w.Events {
		events[i] = string(e)
	}
	return map[string]any{"id": w.ID, "name": w.Name, "host": w.Host, "format": string(w.Format), "events": events}
}

// alertsPage renders GET /alerts: the webhooks (by host) and the form to
// add one.
func (s *Server) alertsPage(w http.ResponseWriter, r *http.Request) error {
	return s.renderAlerts(w, r, http.StatusOK, views.AlertsForm{Format: string(alert.FormatSlack),
		Events: []string{string(alert.EventNewGroup)}, UntriagedAfter: "30m", GrowthPerMinute: "100"}, nil)
}

func (s *Server) renderAlerts(w http.ResponseWriter, r *http.Request, status int, form views.AlertsForm, refusal *views.FieldError) error {
	if s.alerts == nil {
		return ErrNotFound
	}
	hooks, err := s.alerts.Webhooks(r.Context())
	if err != nil {
		return err
	}
	page := views.AlertsPage{Form: form, Error: refusal, PublicURL: s.publicURL}
	if id := r.URL.Query().Get("added"); id != "" {
		page.Added = id
	}
	for _, h := range hooks {
		page.Webhooks = append(page.Webhooks, alertWebhook(h))
	}
	for _, e := range alert.Events {
		page.EventChoices = append(page.EventChoices, views.Choice{Value: string(e), Label: e.Label()})
	}
	for _, f := range alert.Formats {
		page.FormatChoices = append(page.FormatChoices, views.Choice{Value: string(f), Label: f.Label()})
	}
	return s.write(w, r, status, views.AlertsPageView(page))
}

func alertWebhook(h alert.Webhook) views.AlertWebhook {
	v := views.AlertWebhook{ID: h.ID, Name: text(h.Name), Host: text(h.Host), Format: h.Format.Label(), FromConfig: h.FromConfig,
		CreatedAt: h.CreatedAt, CreatedBy: h.CreatedBy, GrowthPerMinute: h.GrowthPerMinute}
	for _, e := range h.Events {
		v.Events = append(v.Events, e.Label())
	}
	if h.UntriagedAfter > 0 {
		v.UntriagedAfter = h.UntriagedAfter.String()
	}
	return v
}

// addWebhookPage answers POST /alerts, the Alerts page's form.
func (s *Server) addWebhookPage(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return ErrNotFound
	}
	if err := r.ParseForm(); err != nil {
		return invalidArgument("body", "the form could not be read: %v", err)
	}
	f := r.PostForm
	form := views.AlertsForm{Name: f.Get("name"), Format: f.Get("format"), Events: f["events"],
		GrowthPerMinute: f.Get("growth_per_minute"), UntriagedAfter: f.Get("untriaged_after")}
	in := webhookInput{Name: form.Name, URL: f.Get("url"), Format: form.Format, Events: form.Events, UntriagedAfter: form.UntriagedAfter}
	var err error
	if g := strings.TrimSpace(form.GrowthPerMinute); g != "" {
		if in.GrowthPerMinute, err = strconv.Atoi(g); err != nil {
			err = invalidArgument("growth_per_minute", "must be a whole number of dead letters per minute, not %q", g)
		}
	}
	var hook alert.Webhook
	if err == nil {
		hook, err = in.webhook(r, s.publicURL)
	}
	if err == nil {
		hook, err = s.addWebhook(r.Context(), hook)
	}
	if err != nil {
		status, fe, ok := formProblem(err)
		if !ok {
			return err
		}
		// The URL is never echoed back, even refused: the field is empty.
		return s.renderAlerts(w, r, status, form, fe)
	}
	http.Redirect(w, r, "/alerts?added="+strconv.FormatInt(hook.ID, 10), http.StatusSeeOther)
	return nil
}

// removeWebhookPage answers POST /alerts/{id}/remove.
func (s *Server) removeWebhookPage(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.removeWebhook(r); err != nil {
		return err
	}
	http.Redirect(w, r, "/alerts", http.StatusSeeOther)
	return nil
}

func (s *Server) removeWebhook(r *http.Request) (alert.Webhook, error) {
	if s.alerts == nil {
		return alert.Webhook{}, ErrNotFound
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return alert.Webhook{}, notFound("no webhook %q", r.PathValue("id"))
	}
	hook, err := s.alerts.RemoveWebhook(r.Context(), id)
	if err != nil {
		if catalogNotFound(err) {
			return hook, notFound("no webhook %d", id)
		}
		return hook, err
	}
	s.record(r.Context(), audit.Record{Action: audit.ActionAlertWebhookRemoved, Params: webhookParams(hook)})
	return hook, nil
}

// alertHistoryPage renders GET /alerts/history: what was sent, when, and
// what the webhook answered.
func (s *Server) alertHistoryPage(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return ErrNotFound
	}
	ds, err := s.alerts.Deliveries(r.Context(), historyLimit)
	if err != nil {
		return err
	}
	rows := make([]views.AlertDelivery, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, views.AlertDelivery{At: d.At, Webhook: text(d.WebhookName), Host: text(d.Host), Event: d.Event.Label(),
			Title: text(d.Title), Link: d.Link, Path: pathOf(d.Link), StatusCode: d.StatusCode, Error: text(d.Error), Attempts: d.Attempts, OK: d.OK()})
	}
	return s.render(w, r, views.AlertHistoryPage(rows))
}

// pathOf is the dashboard path of an alert's link ("/groups/...").
func pathOf(link string) string {
	for _, p := range []string{"/groups/", "/jobs/"} {
		if i := strings.Index(link, p); i >= 0 {
			return link[i:]
		}
	}
	return ""
}

// API: GET, POST /api/v1/alerts/webhooks, DELETE /api/v1/alerts/webhooks/{id},
// GET /api/v1/alerts/deliveries.

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return ErrNotFound
	}
	hooks, err := s.alerts.Webhooks(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Webhooks []webhookJSON `json:"webhooks"`
	}{Webhooks: []webhookJSON{}}
	for _, h := range hooks {
		out.Webhooks = append(out.Webhooks, newWebhookJSON(h))
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return ErrNotFound
	}
	var in webhookInput
	if err := decodeBody(r, &in, MaxRequestBody); err != nil {
		return err
	}
	hook, err := in.webhook(r, s.publicURL)
	if err != nil {
		return err
	}
	if hook, err = s.addWebhook(r.Context(), hook); err != nil {
		return err
	}
	writeJSON(w, r, http.StatusCreated, newWebhookJSON(hook))
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.removeWebhook(r); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return ErrNotFound
	}
	ds, err := s.alerts.Deliveries(r.Context(), historyLimit)
	if err != nil {
		return err
	}
	out := struct {
		Deliveries []deliveryJSON `json:"deliveries"`
	}{Deliveries: []deliveryJSON{}}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, deliveryJSON{ID: d.ID, At: d.At.UTC().Format(time.RFC3339Nano), Webhook: d.WebhookName,
			Host: d.Host, Format: string(d.Format), Event: string(d.Event), Subject: d.Subject, Title: d.Title, Link: d.Link,
			StatusCode: d.StatusCode, Error: d.Error, Attempts: d.Attempts, OK: d.OK()})
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// webhookJSON is a webhook in the API: never its URL, only its host.
type webhookJSON struct {
	ID              int64    `json:"id"`
	Name            string   `json:"name"`
	Host            string   `json:"host"`
	Format          string   `json:"format"`
	Events          []string `json:"events"`
	GrowthPerMinute int      `json:"growth_per_minute"`
	UntriagedAfter  string   `json:"untriaged_after"`
	Source          string   `json:"source"`
	CreatedAt       *string  `json:"created_at"`
	CreatedBy       string   `json:"created_by"`
}

func newWebhookJSON(h alert.Webhook) webhookJSON {
	out := webhookJSON{ID: h.ID, Name: h.Name, Host: h.Host, Format: string(h.Format), Events: []string{},
		GrowthPerMinute: h.GrowthPerMinute, Source: "ui", CreatedBy: h.CreatedBy}
	for _, e := range h.Events {
		out.Events = append(out.Events, string(e))
	}
	if h.UntriagedAfter > 0 {
		out.UntriagedAfter = h.UntriagedAfter.String()
	}
	if h.FromConfig {
		out.Source = "config"
	} else {
		at := h.CreatedAt.UTC().Format(time.RFC3339Nano)
		out.CreatedAt = &at
	}
	return out
}

type deliveryJSON struct {
	ID         int64  `json:"id"`
	At         string `json:"at"`
	Webhook    string `json:"webhook"`
	Host       string `json:"host"`
	Format     string `json:"format"`
	Event      string `json:"event"`
	Subject    string `json:"subject"`
	Title      string `json:"title"`
	Link       string `json:"link"`
	StatusCode int    `json:"status_code"`
	Error      string `json:"error"`
	Attempts   int    `json:"attempts"`
	OK         bool   `json:"ok"`
}
