package alert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Body is the JSON a webhook of format f receives for a; link is the
// absolute URL of the alert's page ("" when none is known).
func Body(f Format, a Alert, link string) ([]byte, error) {
	var v any
	switch f {
	case FormatSlack:
		v = slackBody(a, link)
	case FormatTeams:
		v = teamsBody(a, link)
	case FormatGeneric:
		v = genericBody(a, link)
	default:
		return nil, fmt.Errorf("unknown webhook format %q", f)
	}
	// Not HTML-escaped: "<" stays "<" (Slack's links are <url|text>).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// generic is the generic format (docs/api.md, "Alerts").
type generic struct {
	Event   Event         `json:"event"`
	Subject string        `json:"subject"`
	Title   string        `json:"title"`
	Text    string        `json:"text"`
	Link    string        `json:"link"`
	At      string        `json:"at"`
	Group   *genericGroup `json:"group,omitempty"`
	Job     *genericJob   `json:"job,omitempty"`
}

type genericGroup struct {
	Key                string   `json:"key"`
	Name               string   `json:"name"`
	Status             string   `json:"status"`
	Reason             string   `json:"reason"`
	DescriptionPattern string   `json:"description_pattern"`
	Count              int64    `json:"count"`
	Total              int64    `json:"total"`
	Entities           []string `json:"entities"`
}

type genericJob struct {
	ID             int64  `json:"id"`
	Status         string `json:"status"`
	PausedReason   string `json:"paused_reason"`
	Total          int    `json:"total"`
	Sent           int    `json:"sent"`
	Redeadlettered int    `json:"redeadlettered"`
}

func genericBody(a Alert, link string) generic {
	out := generic{Event: a.Event, Subject: a.Subject, Title: a.Title, Text: a.Text, Link: link,
		At: a.At.UTC().Format(time.RFC3339Nano)}
	if g := a.Group; g != nil {
		es := g.Entities
		if es == nil {
			es = []string{}
		}
		out.Group = &genericGroup{Key: g.Key, Name: g.Name, Status: g.Status, Reason: g.Reason,
			DescriptionPattern: g.DescriptionPattern, Count: g.Count, Total: g.Total, Entities: es}
	}
	if j := a.Job; j != nil {
		out.Job = &genericJob{ID: j.ID, Status: j.Status, PausedReason: j.PausedReason, Total: j.Total, Sent: j.Sent,
			Redeadlettered: j.Redeadlettered}
	}
	return out
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackBody is a Slack incoming webhook's message: text (the notification
// and the fallback) and one section block with the title linked.
func slackBody(a Alert, link string) map[string]any {
	title := "*" + slackEscape(a.Title) + "*"
	if link != "" {
		title = "*<" + link + "|" + slackEscape(a.Title) + ">*"
	}
	return map[string]any{
		"text": a.Title,
		"blocks": []any{
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": title + "\n" + slackEscape(a.Text)}},
			map[string]any{"type": "context", "elements": []any{
				map[string]any{"type": "mrkdwn", "text": "dlqdash · " + string(a.Event) + " · " + a.At.UTC().Format("2006-01-02 15:04:05 UTC")},
			}},
		},
	}
}

// teamsBody is a Microsoft Teams incoming webhook's message: one Adaptive
// Card (which Teams' incoming webhooks and its Workflows webhooks both
// take) with the title, the text and a button to the page.
func teamsBody(a Alert, link string) map[string]any {
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body": []any{
			map[string]any{"type": "TextBlock", "text": a.Title, "weight": "Bolder", "size": "Medium", "wrap": true},
			map[string]any{"type": "TextBlock", "text": a.Text, "wrap": true},
			map[string]any{"type": "TextBlock", "text": "dlqdash · " + string(a.Event) + " · " + a.At.UTC().Format("2006-01-02 15:04:05 UTC"),
				"isSubtle": true, "size": "Small", "wrap": true},
		},
	}
	if link != "" {
		card["actions"] = []any{map[string]any{"type": "Action.OpenUrl", "title": "Open in dlqdash", "url": link}}
	}
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"contentUrl":  nil,
			"content":     card,
		}},
	}
}
