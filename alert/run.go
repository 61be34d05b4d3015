package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// Store is what the Alerter reads and records. Package store implements it.
type Store interface {
	// ListGroups returns every failure group with its counters and triage.
	ListGroups(ctx context.Context) ([]dlq.GroupSummary, error)
	// TakeNewGroups returns the keys of the groups cataloged since the
	// last call (since the migration, the first time) and moves past them.
	TakeNewGroups(ctx context.Context) ([]string, error)
	// OldestPresent returns, for each of the groups, when its oldest dead
	// letter still in the broker was enqueued (absent: none present).
	OldestPresent(ctx context.Context, groupKeys []string) (map[string]time.Time, error)
	// UnauditedReopenings and MarkReopeningAudited: resolved groups that
	// received new dead letters, until the audit trail has them.
	UnauditedReopenings(ctx context.Context) ([]Reopening, error)
	MarkReopeningAudited(ctx context.Context, id int64) error
	// AlertWebhooks returns the webhooks added on the Alerts page, with
	// their URLs.
	AlertWebhooks(ctx context.Context) ([]Webhook, error)
	// AddAlertDelivery records a delivery and returns it with its ID.
	AddAlertDelivery(ctx context.Context, d Delivery) (Delivery, error)
	// AlertDeliveriesSince returns the deliveries at or after since.
	AlertDeliveriesSince(ctx context.Context, since time.Time) ([]Delivery, error)
	// JobsOfCopies returns the jobs of which the catalog messages ids
	// hold dead-lettered copies (none for ordinary dead letters).
	JobsOfCopies(ctx context.Context, ids []int64) ([]replay.Job, error)
}

// Poster sends a body to a webhook URL and returns the HTTP status it
// answered. Package alert/webhook implements it over HTTP. Its errors must
// not contain the URL.
type Poster interface {
	Post(ctx context.Context, url string, body []byte) (status int, err error)
}

// Auditor records the reopening of resolved groups.
type Auditor interface {
	Append(ctx context.Context, r audit.Record) (audit.Entry, error)
}

// Defaults.
const (
	DefaultRepeatEvery = 15 * time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultAttempts    = 3
	DefaultBackoff     = 2 * time.Second
	// tick is how often the time-based events (growth, untriaged) are
	// looked at when nothing else wakes the loop.
	tick = 5 * time.Second
	// settle lets a burst of catalog changes land before one evaluation;
	// minGap spaces evaluations (each reads the groups) under a steady
	// stream of changes.
	settle = 200 * time.Millisecond
	minGap = time.Second
	// growthWindow is the window the growth rate is measured over.
	growthWindow = time.Minute
	// maxInFlight bounds the deliveries sent at once.
	maxInFlight = 4
	// maxNewGroups is how many new groups one evaluation tells one by
	// one; the rest go in one alert linking to the groups page.
	maxNewGroups = 5
)

// Config is what New needs.
type Config struct {
	Store  Store
	Poster Poster
	// Audit records reopened groups; nil records nothing (tests).
	Audit  Auditor
	Logger *slog.Logger
	// Webhooks are the config file's webhooks.
	Webhooks []Webhook
	// PublicURL is the dashboard's external base URL (--public-url); links
	// use it when set, otherwise each webhook's BaseURL, otherwise
	// FallbackURL's (the dashboard's listen address, known once it
	// listens).
	PublicURL   string
	FallbackURL func() string
	// RepeatEvery holds back a repeat of an alert about the same subject
	// to the same webhook; 0 means DefaultRepeatEvery.
	RepeatEvery time.Duration
	// Timeout bounds each attempt; Attempts is how many are made; Backoff
	// is the wait before the second, doubling after. Zero means the
	// defaults.
	Timeout  time.Duration
	Attempts int
	Backoff  time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Alerter evaluates the events and sends the alerts. Its methods are safe
// for concurrent use.
type Alerter struct {
	cfg  Config
	wake chan struct{}

	mu   sync.Mutex
	jobs map[int64]replay.Job // job changes not yet looked at
	// copies are the dead letters cataloged since the last evaluation,
	// which may be a job's copies dead-lettered again: the engine tells
	// nothing of those (a job that has ended least of all), the catalog
	// counts them for their job.
	copies []int64

	// Owned by Run's goroutine.
	samples   map[string][]sample // group key → its totals over the growth window
	sent      map[string]time.Time
	redead    map[int64]int // job → the redeadlettered count last alerted
	inFlight  chan struct{}
	deliverWG sync.WaitGroup
}

type sample struct {
	at    time.Time
	total int64
}

// New returns an Alerter; call Run.
func New(cfg Config) *Alerter {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RepeatEvery <= 0 {
		cfg.RepeatEvery = DefaultRepeatEvery
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Alerter{cfg: cfg, wake: make(chan struct{}, 1), jobs: map[int64]replay.Job{},
		samples: map[string][]sample{}, sent: map[string]time.Time{}, redead: map[int64]int{},
		inFlight: make(chan struct{}, maxInFlight)}
}

// maxCopies bounds the new dead letters one evaluation looks at for copies
// (a second's worth of a fast ingest); past it, the rest are not looked at.
const maxCopies = 100_000

// CatalogChanged wakes the loop after the catalog changed. It never blocks.
func (a *Alerter) CatalogChanged(c dlq.Change) {
	if c.Kind == dlq.ChangeFreshness || c.Kind == dlq.ChangeCounts {
		return
	}
	if c.Kind == dlq.ChangeNew && c.SubQueue != dlq.SubQueueMain && len(c.IDs) > 0 {
		a.mu.Lock()
		if n := min(len(c.IDs), maxCopies-len(a.copies)); n > 0 {
			a.copies = append(a.copies, c.IDs[:n]...)
		}
		a.mu.Unlock()
	}
	a.poke()
}

// JobChanged hands the loop a job's new state. It never blocks.
func (a *Alerter) JobChanged(j replay.Job) {
	a.mu.Lock()
	a.jobs[j.ID] = j
	a.mu.Unlock()
	a.poke()
}

func (a *Alerter) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run evaluates the events when woken and every few seconds, until ctx
// ends; then it waits for the deliveries in flight.
func (a *Alerter) Run(ctx context.Context) error {
	defer a.deliverWG.Wait()
	if err := a.loadSent(ctx); err != nil {
		a.cfg.Logger.Warn("alert history not read: repeats may be sent again", "error", err)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		last := time.Now()
		a.Evaluate(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.wake:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(settle, minGap-time.Since(last))):
			}
		}
	}
}

// loadSent remembers the deliveries of the last RepeatEvery, so that a
// restart does not repeat them.
func (a *Alerter) loadSent(ctx context.Context) error {
	ds, err := a.cfg.Store.AlertDeliveriesSince(ctx, a.cfg.Now().Add(-a.cfg.RepeatEvery))
	if err != nil {
		return err
	}
	for _, d := range ds {
		k := limitKey(d.Webhook, d.Event, d.Subject)
		if d.At.After(a.sent[k]) {
			a.sent[k] = d.At
		}
	}
	return nil
}

func limitKey(webhook string, e Event, subject string) string {
	return webhook + "\x00" + string(e) + "\x00" + subject
}

// Evaluate looks at every event once and sends what is due. Run calls it;
// tests call it directly. Errors are logged: the next evaluation tries
// again.
func (a *Alerter) Evaluate(ctx context.Context) {
	if err := a.evaluate(ctx); err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("alerts not evaluated", "error", err)
	}
}

func (a *Alerter) evaluate(ctx context.Context) error {
	now := a.cfg.Now()
	reopened, err := a.auditReopenings(ctx)
	if err != nil {
		return err
	}
	fresh, err := a.cfg.Store.TakeNewGroups(ctx)
	if err != nil {
		return fmt.Errorf("read new groups: %w", err)
	}
	hooks, err := a.webhooks(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	jobs, copies := a.jobs, a.copies
	a.jobs, a.copies = map[int64]replay.Job{}, nil
	a.mu.Unlock()
	if len(copies) > 0 && slices.ContainsFunc(hooks, func(h Webhook) bool { return h.Wants(EventJobRedeadlettered) || h.Wants(EventJobPaused) }) {
		// Copies dead-lettered again: their jobs as they are now, read
		// after the catalog counted them.
		back, err := a.cfg.Store.JobsOfCopies(ctx, copies)
		if err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("alerts: jobs of copies dead-lettered again not read", "error", err)
		}
		for _, j := range back {
			jobs[j.ID] = j
		}
	}
	if len(hooks) == 0 {
		// Nobody to tell: the groups seen so far are not new to a webhook
		// added later, and the catalog is not read.
		for _, j := range jobs {
			a.redead[j.ID] = j.Counts.Redeadlettered
		}
		clear(a.samples)
		return nil
	}
	groups, err := a.cfg.Store.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("read groups: %w", err)
	}
	byKey := make(map[string]dlq.GroupSummary, len(groups))
	for _, g := range groups {
		byKey[g.ID] = g
	}
	a.sample(now, groups)

	var due []Alert
	var more []string // new groups past maxNewGroups, told in one alert
	for _, key := range fresh {
		g, ok := byKey[key]
		if !ok || g.Triage.Status.Silent() {
			continue
		}
		if len(due) == maxNewGroups {
			more = append(more, g.DisplayName())
			continue
		}
		due = append(due, groupAlert(EventNewGroup, g, now, "New failure group: "+g.DisplayName(),
			fmt.Sprintf("%s dead-lettered in %s.", plural(g.Total, "message"), entities(g))))
	}
	if len(more) > 0 {
		// A first start on a large backlog, or a broad outage: one alert
		// for the rest, not a flood.
		shown := more[:min(len(more), 3)]
		text := strings.Join(shown, "; ")
		if len(more) > len(shown) {
			text += fmt.Sprintf("; and %d more", len(more)-len(shown))
		}
		due = append(due, Alert{Event: EventNewGroup, Subject: "more:" + fresh[len(fresh)-1], Path: "/groups", At: now,
			Title: strings.Replace(plural(int64(len(more)), "new failure group"), " ", " more ", 1), Text: text + "."})
	}
	for _, r := range reopened {
		if g, ok := byKey[r.GroupKey]; ok && !g.Triage.Status.Silent() {
			due = append(due, groupAlert(EventNewGroup, g, now, "Resolved group failing again: "+g.DisplayName(),
				fmt.Sprintf("%s dead-lettered since it was marked resolved; it is new again.", plural(r.Added, "new message"))))
		}
	}
	jobAlerts := a.jobAlerts(jobs, now)
	for _, h := range hooks {
		for _, al := range due {
			if h.Wants(al.Event) {
				a.send(ctx, h, al, now)
			}
		}
		for _, al := range jobAlerts {
			if h.Wants(al.Event) {
				a.send(ctx, h, al, now)
			}
		}
		if h.Wants(EventGroupGrowth) && h.GrowthPerMinute > 0 {
			for _, g := range groups {
				if g.Triage.Status.Silent() {
					continue
				}
				if rate, ok := a.rate(g.ID, now); ok && rate >= float64(h.GrowthPerMinute) {
					a.send(ctx, h, groupAlert(EventGroupGrowth, g, now, "Failure group growing: "+g.DisplayName(),
						fmt.Sprintf("%.0f dead letters per minute (the threshold is %d); %s present.", rate, h.GrowthPerMinute,
							plural(g.Present, "message"))), now)
				}
			}
		}
	}
	return a.untriaged(ctx, hooks, groups, now)
}

// untriaged sends EventUntriaged for the groups still new whose oldest
// present dead letter is older than a webhook's threshold.
func (a *Alerter) untriaged(ctx context.Context, hooks []Webhook, groups []dlq.GroupSummary, now time.Time) error {
	var wanted []Webhook
	for _, h := range hooks {
		if h.Wants(EventUntriaged) && h.UntriagedAfter > 0 {
			wanted = append(wanted, h)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	var keys []string
	for _, g := range groups {
		if g.Triage.Status == dlq.StatusNew && g.Present > 0 {
			keys = append(keys, g.ID)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	oldest, err := a.cfg.Store.OldestPresent(ctx, keys)
	if err != nil {
		return fmt.Errorf("read the oldest dead letters: %w", err)
	}
	for _, g := range groups {
		at, ok := oldest[g.ID]
		if !ok || g.Triage.Status != dlq.StatusNew {
			continue
		}
		age := now.Sub(at)
		for _, h := range wanted {
			if age >= h.UntriagedAfter {
				a.send(ctx, h, groupAlert(EventUntriaged, g, now, "Untriaged for "+roundAge(age)+": "+g.DisplayName(),
					fmt.Sprintf("Its oldest dead letter was enqueued %s ago and the group is still new (nobody has triaged it); %s present.",
						roundAge(age), plural(g.Present, "message"))), now)
			}
		}
	}
	return nil
}

// jobAlerts are the alerts the job changes call for: a job paused by
// itself (a person's pause says "paused by ..."), copies dead-lettered
// again (once per increase, then rate-limited).
func (a *Alerter) jobAlerts(jobs map[int64]replay.Job, now time.Time) []Alert {
	var out []Alert
	for _, j := range jobs {
		facts := &JobFacts{ID: j.ID, Status: string(j.Status), PausedReason: j.PausedReason, Total: j.Total,
			Sent: j.Counts.Sent + j.Counts.Completed, Redeadlettered: j.Counts.Redeadlettered}
		id := strconv.FormatInt(j.ID, 10)
		if j.Status == replay.StatusPaused && j.PausedReason != "" && !strings.HasPrefix(j.PausedReason, "paused by ") {
			out = append(out, Alert{Event: EventJobPaused, Subject: id, Path: "/jobs/" + id, At: now, Job: facts,
				Title: fmt.Sprintf("Replay job %d paused itself", j.ID), Text: j.PausedReason})
		}
		if n := j.Counts.Redeadlettered; n > a.redead[j.ID] {
			a.redead[j.ID] = n
			out = append(out, Alert{Event: EventJobRedeadlettered, Subject: id, Path: "/jobs/" + id, At: now, Job: facts,
				Title: fmt.Sprintf("Replay job %d: copies dead-lettered again", j.ID),
				Text:  fmt.Sprintf("%s of %s sent were dead-lettered again.", plural(int64(n), "copy"), strconv.Itoa(facts.Sent))})
		}
	}
	return out
}

func groupAlert(e Event, g dlq.GroupSummary, now time.Time, title, text string) Alert {
	return Alert{Event: e, Subject: g.ID, Path: "/groups/" + g.ID, At: now, Title: title, Text: text,
		Group: &GroupFacts{Key: g.ID, Name: g.DisplayName(), Status: string(g.Triage.Status), Reason: g.Reason,
			DescriptionPattern: g.DescriptionPattern, Count: g.Present, Total: g.Total, Entities: g.Entities}}
}

// sample records each group's total, keeping a window's worth.
func (a *Alerter) sample(now time.Time, groups []dlq.GroupSummary) {
	seen := make(map[string]bool, len(groups))
	for _, g := range groups {
		seen[g.ID] = true
		s := append(a.samples[g.ID], sample{at: now, total: g.Total})
		// Keep the newest sample at least a window old, and the ones after.
		i := 0
		for i+1 < len(s) && now.Sub(s[i+1].at) >= growthWindow {
			i++
		}
		a.samples[g.ID] = s[i:]
	}
	for k := range a.samples {
		if !seen[k] {
			delete(a.samples, k)
		}
	}
}

// rate is a group's growth in dead letters per minute over the window
// (over what has been seen of it, once that is at least a tenth of a
// window).
func (a *Alerter) rate(key string, now time.Time) (float64, bool) {
	s := a.samples[key]
	if len(s) < 2 {
		return 0, false
	}
	first, last := s[0], s[len(s)-1]
	span := last.at.Sub(first.at)
	if span < growthWindow/10 {
		return 0, false
	}
	if span < growthWindow {
		span = growthWindow // a partial window counts as a whole one: never overstate
	}
	return float64(last.total-first.total) / span.Minutes(), true
}

// webhooks are the config file's and the stored ones.
func (a *Alerter) webhooks(ctx context.Context) ([]Webhook, error) {
	stored, err := a.cfg.Store.AlertWebhooks(ctx)
	if err != nil {
		return nil, fmt.Errorf("read webhooks: %w", err)
	}
	return append(append([]Webhook(nil), a.cfg.Webhooks...), stored...), nil
}

// auditReopenings records the reopened groups in the audit trail and
// returns them.
func (a *Alerter) auditReopenings(ctx context.Context) ([]Reopening, error) {
	rs, err := a.cfg.Store.UnauditedReopenings(ctx)
	if err != nil {
		return nil, fmt.Errorf("read reopened groups: %w", err)
	}
	for _, r := range rs {
		if a.cfg.Audit != nil {
			if _, err := a.cfg.Audit.Append(ctx, audit.Record{Actor: audit.ActorSystem, Action: audit.ActionGroupReopened,
				Params: map[string]any{"group": r.GroupKey, "name": r.Name, "from": string(dlq.StatusResolved), "to": string(dlq.StatusNew),
					"added": r.Added, "at": r.At.UTC().Format(time.RFC3339Nano)}}); err != nil {
				return nil, fmt.Errorf("audit a reopened group: %w", err)
			}
		}
		if err := a.cfg.Store.MarkReopeningAudited(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// Link is the absolute URL of path for webhook h: under PublicURL, else
// the webhook's BaseURL; "" when neither is known.
func (a *Alerter) Link(h Webhook, path string) string {
	base := a.cfg.PublicURL
	if base == "" {
		base = strings.TrimRight(h.BaseURL, "/")
	}
	if base == "" && a.cfg.FallbackURL != nil {
		base = strings.TrimRight(a.cfg.FallbackURL(), "/")
	}
	if base == "" {
		return ""
	}
	return base + path
}

// send delivers al to h unless the same alert went there within
// RepeatEvery, in the background.
func (a *Alerter) send(ctx context.Context, h Webhook, al Alert, now time.Time) {
	k := limitKey(h.Key(), al.Event, al.Subject)
	if last, ok := a.sent[k]; ok && now.Sub(last) < a.cfg.RepeatEvery {
		return
	}
	a.sent[k] = now
	link := a.Link(h, al.Path)
	body, err := Body(h.Format, al, link)
	d := Delivery{At: now, Webhook: h.Key(), WebhookName: h.Name, Host: h.Host, Format: h.Format, Event: al.Event,
		Subject: al.Subject, Title: al.Title, Link: link}
	if err != nil {
		d.Error = err.Error()
		a.record(ctx, d)
		return
	}
	select {
	case a.inFlight <- struct{}{}:
	case <-ctx.Done():
		return
	}
	a.deliverWG.Go(func() {
		defer func() { <-a.inFlight }()
		a.record(ctx, a.deliver(ctx, h, body, d))
	})
}

// deliver posts body with a timeout per attempt, retrying a failure (no
// answer, 429 or 5xx) with backoff.
func (a *Alerter) deliver(ctx context.Context, h Webhook, body []byte, d Delivery) Delivery {
	wait := a.cfg.Backoff
	for attempt := 1; attempt <= a.cfg.Attempts; attempt++ {
		d.Attempts = attempt
		actx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
		status, err := a.cfg.Poster.Post(actx, h.URL, body)
		cancel()
		d.StatusCode, d.Error = status, ""
		switch {
		case err != nil:
			d.Error = err.Error()
			if errors.Is(err, context.DeadlineExceeded) {
				d.Error = fmt.Sprintf("no answer within %s", a.cfg.Timeout)
			}
		case status < 200 || status > 299:
			d.Error = fmt.Sprintf("the webhook answered %d", status)
		}
		retry := d.Error != "" && (err != nil || status == 429 || status >= 500)
		if !retry || attempt == a.cfg.Attempts {
			break
		}
		select {
		case <-ctx.Done():
			return d
		case <-time.After(wait):
		}
		wait *= 2
	}
	if d.OK() {
		a.cfg.Logger.Info("alert sent", "event", string(d.Event), "subject", d.Subject, "webhook", d.WebhookName, "host", d.Host,
			"status", d.StatusCode, "attempts", d.Attempts)
	} else {
		a.cfg.Logger.Warn("alert not delivered", "event", string(d.Event), "subject", d.Subject, "webhook", d.WebhookName,
			"host", d.Host, "status", d.StatusCode, "attempts", d.Attempts, "error", d.Error)
	}
	return d
}

func (a *Alerter) record(ctx context.Context, d Delivery) {
	if _, err := a.cfg.Store.AddAlertDelivery(context.WithoutCancel(ctx), d); err != nil {
		a.cfg.Logger.Warn("alert delivery not recorded", "event", string(d.Event), "subject", d.Subject, "error", err)
	}
}

func plural(n int64, one string) string {
	if n == 1 {
		return "1 " + one
	}
	if strings.HasSuffix(one, "y") {
		return strconv.FormatInt(n, 10) + " " + strings.TrimSuffix(one, "y") + "ies"
	}
	return strconv.FormatInt(n, 10) + " " + one + "s"
}

func entities(g dlq.GroupSummary) string {
	switch len(g.Entities) {
	case 0:
		return "no entity"
	case 1, 2, 3:
		return strings.Join(g.Entities, ", ")
	}
	return strings.Join(g.Entities[:3], ", ") + fmt.Sprintf(" and %d more", len(g.Entities)-3)
}

func roundAge(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Second).String()
}
