package alert

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Event is what an alert is about; a webhook chooses the events it gets.
type Event string

// The events.
const (
	// EventNewGroup: a failure group appeared (or a resolved one came back).
	EventNewGroup Event = "new_group"
	// EventGroupGrowth: a group received at least the webhook's
	// GrowthPerMinute dead letters per minute.
	EventGroupGrowth Event = "group_growth"
	// EventUntriaged: the oldest dead letter of a group still new (nobody
	// triaged it) is older than the webhook's UntriagedAfter.
	EventUntriaged Event = "untriaged"
	// EventJobPaused: a replay job paused itself (its canary failed, too
	// many copies dead-lettered again, ...), not paused by a person.
	EventJobPaused Event = "job_paused"
	// EventJobRedeadlettered: copies sent by a replay job were
	// dead-lettered again.
	EventJobRedeadlettered Event = "job_redeadlettered"
)

// Events are every event, in the order the pages list them.
var Events = []Event{EventNewGroup, EventGroupGrowth, EventUntriaged, EventJobPaused, EventJobRedeadlettered}

// Label is the event in words.
func (e Event) Label() string {
	switch e {
	case EventNewGroup:
		return "New failure group"
	case EventGroupGrowth:
		return "Group growing fast"
	case EventUntriaged:
		return "Untriaged dead letter too old"
	case EventJobPaused:
		return "Replay job paused itself"
	case EventJobRedeadlettered:
		return "Replayed copies dead-lettered again"
	}
	return string(e)
}

// ParseEvents reads a list of event names (comma-separated values
// allowed), refusing unknown ones and an empty list.
func ParseEvents(vals []string) ([]Event, error) {
	var out []Event
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			e := Event(s)
			if !slices.Contains(Events, e) {
				return nil, fmt.Errorf("%q is not an event: want %s", s, eventList())
			}
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no events: want one or more of %s", eventList())
	}
	return out, nil
}

func eventList() string {
	s := make([]string, len(Events))
	for i, e := range Events {
		s[i] = string(e)
	}
	return strings.Join(s, ", ")
}

// Format is the shape of the JSON a webhook receives.
type Format string

// The formats.
const (
	FormatGeneric Format = "generic" // dlqdash's own JSON object (docs/api.md)
	FormatSlack   Format = "slack"   // a Slack incoming webhook
	FormatTeams   Format = "teams"   // a Microsoft Teams incoming webhook (an Adaptive Card)
)

// Formats are every format.
var Formats = []Format{FormatGeneric, FormatSlack, FormatTeams}

// Label is the format in words.
func (f Format) Label() string {
	switch f {
	case FormatGeneric:
		return "Generic JSON"
	case FormatSlack:
		return "Slack"
	case FormatTeams:
		return "Microsoft Teams"
	}
	return string(f)
}

// ParseFormat reads a format name.
func ParseFormat(s string) (Format, error) {
	f := Format(strings.TrimSpace(s))
	if !slices.Contains(Formats, f) {
		return "", fmt.Errorf("%q is not a format: want generic, slack or teams", s)
	}
	return f, nil
}

// CheckURL checks a webhook URL (http or https, with a host) and returns its
// host, the only part of it ever shown again. Its errors never repeat the
// URL: it is a secret.
func CheckURL(raw string) (host string, err error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("is empty: want the webhook's http(s) URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("is not a URL: want the webhook's http(s) URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("must start with https:// or http://")
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", errors.New("has no host")
	}
	return u.Host, nil
}

// Webhook is where alerts go.
type Webhook struct {
	// ID is the stored webhook's id; 0 for one of the config file.
	ID   int64
	Name string
	// URL is a secret: never logged, never shown (Host is).
	URL    string
	Host   string
	Format Format
	Events []Event
	// GrowthPerMinute is EventGroupGrowth's threshold (dead letters per
	// minute); 0 turns the event off.
	GrowthPerMinute int
	// UntriagedAfter is EventUntriaged's threshold; 0 turns it off.
	UntriagedAfter time.Duration
	// BaseURL is where its alerts' links point when Config.PublicURL is
	// not set: the origin of the page it was added on.
	BaseURL   string
	CreatedAt time.Time
	CreatedBy string
	// FromConfig: the webhook is in the config file (not removable on the
	// Alerts page).
	FromConfig bool
}

// Key names the webhook in the delivery history: "ui:<id>" or
// "config:<name>".
func (w Webhook) Key() string {
	if w.FromConfig {
		return "config:" + w.Name
	}
	return "ui:" + strconv.FormatInt(w.ID, 10)
}

// Wants reports whether the webhook gets e.
func (w Webhook) Wants(e Event) bool { return slices.Contains(w.Events, e) }

// Alert is one thing to tell people.
type Alert struct {
	Event   Event
	Subject string // the group's key or the job's id
	Title   string
	Text    string
	// Path is the dashboard page it links to: /groups/{key} or /jobs/{id}.
	Path  string
	At    time.Time
	Group *GroupFacts
	Job   *JobFacts
}

// GroupFacts are what an alert says about a failure group.
type GroupFacts struct {
	Key, Name, Status, Reason, DescriptionPattern string
	Count, Total                                  int64
	Entities                                      []string
}

// JobFacts are what an alert says about a replay job.
type JobFacts struct {
	ID                          int64
	Status, PausedReason        string
	Total, Sent, Redeadlettered int
}

// Delivery is one alert sent (or tried) to one webhook.
type Delivery struct {
	ID          int64
	At          time.Time
	Webhook     string // Webhook.Key
	WebhookName string
	Host        string
	Format      Format
	Event       Event
	Subject     string
	Title       string
	Link        string
	// StatusCode is the webhook's last answer (0: none); Error says what
	// went wrong ("" when it answered 2xx).
	StatusCode int
	Error      string
	Attempts   int
}

// OK reports whether the webhook took the alert.
func (d Delivery) OK() bool { return d.Error == "" && d.StatusCode >= 200 && d.StatusCode < 300 }

// Reopening is a resolved group that received new dead letters and went
// back to new (recorded by the catalog).
type Reopening struct {
	ID       int64
	GroupKey string
	Name     string
	At       time.Time
	Added    int64
}

// InvalidError is a webhook refused for one of its fields (Param).
type InvalidError struct {
	Param, Msg string
}

func (e *InvalidError) Error() string { return e.Param + " " + e.Msg }

// InvalidParameter names the field at fault.
func (e *InvalidError) InvalidParameter() string { return e.Param }

// maxWebhookName is the longest webhook name.
const maxWebhookName = 80

// Check checks a webhook before it is stored or used and fills in Host.
// Its errors are *InvalidError and never repeat the URL.
func (w *Webhook) Check() error {
	w.Name = strings.TrimSpace(w.Name)
	if w.Name == "" {
		return &InvalidError{"name", "is empty: give the webhook a name (e.g. the channel it posts to)"}
	}
	if len([]rune(w.Name)) > maxWebhookName || strings.ContainsFunc(w.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return &InvalidError{"name", fmt.Sprintf("must be at most %d characters, without control characters", maxWebhookName)}
	}
	host, err := CheckURL(w.URL)
	if err != nil {
		return &InvalidError{"url", err.Error()}
	}
	w.URL, w.Host = strings.TrimSpace(w.URL), host
	if !slices.Contains(Formats, w.Format) {
		return &InvalidError{"format", fmt.Sprintf("%q is not a format: want generic, slack or teams", w.Format)}
	}
	if len(w.Events) == 0 {
		return &InvalidError{"events", "is empty: choose at least one event"}
	}
	for _, e := range w.Events {
		if !slices.Contains(Events, e) {
			return &InvalidError{"events", fmt.Sprintf("%q is not an event: want %s", e, eventList())}
		}
	}
	if w.GrowthPerMinute < 0 {
		return &InvalidError{"growth_per_minute", "must be 0 (off) or more"}
	}
	if w.Wants(EventGroupGrowth) && w.GrowthPerMinute == 0 {
		return &InvalidError{"growth_per_minute", "is needed with the group_growth event: dead letters per minute"}
	}
	if w.UntriagedAfter < 0 {
		return &InvalidError{"untriaged_after", "must be 0 (off) or more"}
	}
	if w.Wants(EventUntriaged) && w.UntriagedAfter < time.Minute {
		return &InvalidError{"untriaged_after", "is needed with the untriaged event: at least a minute"}
	}
	return nil
}
