package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dlqdash/dlqdash/alert"
)

// Alerts (issue 19): --public-url, --alert-repeat, and the config file's
// alerts: list of webhooks.

const (
	envPublicURL       = "DLQDASH_PUBLIC_URL"
	envAlertRepeat     = "DLQDASH_ALERT_REPEAT"
	defaultAlertRepeat = "15m"
)

// AlertsConfig is what the alert loop is configured with.
type AlertsConfig struct {
	// PublicURL is the dashboard's external base URL: alert links point
	// under it. Empty: a webhook added on the Alerts page links to the
	// origin of the page it was added on; the config file's to the
	// dashboard's listen address.
	PublicURL string
	// RepeatEvery holds back a repeat of an alert about the same subject
	// to the same webhook.
	RepeatEvery time.Duration
	// Webhooks are the config file's (alerts:).
	Webhooks []alert.Webhook
}

func alertFlags(f *flagSet) {
	f.str("public-url", envPublicURL, "", "the dashboard's external base URL (https://dlq.example.com): alert links point under it; empty links to the address a webhook was added from (the listen address for the config file's)")
	f.str("alert-repeat", envAlertRepeat, defaultAlertRepeat, "how long an alert about the same group or job is held back after it was sent to a webhook (a Go duration: 15m, 1h)")
}

func parseAlertFlags(f *flagSet, bad func(string, ...any) error) (AlertsConfig, error) {
	var c AlertsConfig
	if p := strings.TrimSpace(f.get("public-url")); p != "" {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return c, bad("invalid public URL %q from %s: want http(s)://host[:port][/path]", p, f.source("public-url"))
		}
		c.PublicURL = strings.TrimRight(p, "/")
	}
	d, err := time.ParseDuration(f.get("alert-repeat"))
	if err != nil || d < time.Second || d > 7*24*time.Hour {
		return c, bad("invalid alert repeat %q from %s: want a duration from 1s to 168h, e.g. 15m", f.get("alert-repeat"), f.source("alert-repeat"))
	}
	c.RepeatEvery = d
	return c, nil
}

var webhookKeys = []string{"name", "url_env", "url_file", "format", "events", "growth_per_minute", "untriaged_after"}

// parseAlerts reads the config file's alerts: a list of webhooks, each URL
// from url_env or url_file (a webhook URL is a secret: url: is refused).
func parseAlerts(n *yaml.Node, getenv func(string) string, readFile func(string) ([]byte, error)) ([]alert.Webhook, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n.Line, "alerts must be a list of webhooks (- name: ..., url_env: ..., format: slack, events: [...])")
	}
	var out []alert.Webhook
	names := map[string]int{}
	for i, wn := range n.Content {
		where := fmt.Sprintf("alerts[%d]", i)
		f, err := readFields(wn, where, webhookKeys)
		if err != nil {
			return nil, err
		}
		var w alert.Webhook
		if !f.has("name") {
			return nil, errAt(wn.Line, "%s has no name", where)
		}
		if w.Name, err = f.str("name"); err != nil {
			return nil, err
		}
		if l, dup := names[w.Name]; dup {
			return nil, f.bad("name", "%q is already the name of the webhook on line %d: names must be unique", w.Name, l)
		}
		names[w.Name] = wn.Line
		f.where = fmt.Sprintf("%s (%s)", where, w.Name)
		key, err := f.oneOf("url_env", "url_file")
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, errAt(wn.Line, "%s needs url_env (an environment variable) or url_file (a file) holding the webhook URL", f.where)
		}
		raw, err := f.secret(key, "webhook URL", getenv, readFile)
		if err != nil {
			return nil, err
		}
		w.URL = string(raw)
		format := "generic"
		if f.has("format") {
			if format, err = f.str("format"); err != nil {
				return nil, err
			}
		}
		w.Format = alert.Format(format)
		if !f.has("events") {
			return nil, errAt(wn.Line, "%s has no events: want a list of new_group, group_growth, untriaged, job_paused, job_redeadlettered", f.where)
		}
		list := f.vals["events"]
		items := []*yaml.Node{list}
		if list.Kind == yaml.SequenceNode {
			items = list.Content
		}
		for _, it := range items {
			if it.Kind != yaml.ScalarNode {
				return nil, f.bad("events", "want event names")
			}
			w.Events = append(w.Events, alert.Event(strings.TrimSpace(it.Value)))
		}
		if f.has("growth_per_minute") {
			s, err := f.str("growth_per_minute")
			if err != nil {
				return nil, err
			}
			if w.GrowthPerMinute, err = strconv.Atoi(s); err != nil {
				return nil, f.bad("growth_per_minute", "%q is not a whole number of dead letters per minute", s)
			}
		}
		if f.has("untriaged_after") {
			s, err := f.str("untriaged_after")
			if err != nil {
				return nil, err
			}
			if w.UntriagedAfter, err = time.ParseDuration(s); err != nil {
				return nil, f.bad("untriaged_after", "%q is not a duration such as 30m", s)
			}
		}
		w.FromConfig = true
		if err := w.Check(); err != nil {
			ie, _ := err.(*alert.InvalidError)
			key := ie.Param
			switch key {
			case "url":
				return nil, errAt(f.lines[firstKey(f, "url_env", "url_file")], "the webhook URL of %s %s", f.where, ie.Msg)
			case "untriaged_after", "growth_per_minute", "events", "format", "name":
				if _, ok := f.lines[key]; !ok {
					return nil, errAt(wn.Line, "%s: %s", f.where, err.Error())
				}
				return nil, f.bad(key, "%s", ie.Msg)
			}
			return nil, errAt(wn.Line, "%s: %v", f.where, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func firstKey(f fields, keys ...string) string {
	for _, k := range keys {
		if f.has(k) {
			return k
		}
	}
	return ""
}
