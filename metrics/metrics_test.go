package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type fakeCatalog struct {
	ents []dlq.EntitySummary
	err  error
}

func (f fakeCatalog) ListEntities(context.Context) ([]dlq.EntitySummary, error) { return f.ents, f.err }

type fakeJobs map[replay.Status]int

func (f fakeJobs) CountJobs(context.Context) (map[replay.Status]int, error) { return f, nil }

type fakeStatus dlq.Status

func (f fakeStatus) Status() dlq.Status { return dlq.Status(f) }

// scrape serves GET /metrics from m's Handler and parses the text format
// the way Prometheus does.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

// value finds the series of name with exactly labels; ok is false when
// there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.Label {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestDepthFromCatalog(t *testing.T) {
	at := t0
	cat := fakeCatalog{ents: []dlq.EntitySummary{
		{Entity: dlq.Entity{Path: "orders", Kind: dlq.KindQueue, Counts: dlq.Counts{Active: 9, DeadLetter: 5, TransferDeadLetter: 1}}, CountsAt: &at},
		{Entity: dlq.Entity{Path: "payments", Kind: dlq.KindTopic, Counts: dlq.Counts{Active: 3}}, CountsAt: &at},
		{Entity: dlq.Entity{Path: "payments/Subscriptions/audit", Kind: dlq.KindSubscription, Topic: "payments", Counts: dlq.Counts{DeadLetter: 2}}, CountsAt: &at},
		{Entity: dlq.Entity{Path: "retired", Kind: dlq.KindQueue, Counts: dlq.Counts{DeadLetter: 7}}, CountsAt: &at, DeletedAt: &at},
		{Entity: dlq.Entity{Path: "unread", Kind: dlq.KindQueue}},
	}}
	fams := scrape(t, New(Config{Catalog: cat}))
	tests := []struct {
		entity, subqueue string
		want             float64
	}{
		{"orders", "dead_letter", 5},
		{"orders", "transfer_dead_letter", 1},
		{"payments/Subscriptions/audit", "dead_letter", 2},
		{"payments/Subscriptions/audit", "transfer_dead_letter", 0},
	}
	for _, tt := range tests {
		got, ok := value(fams, "dlqdash_dlq_depth", map[string]string{"entity": tt.entity, "subqueue": tt.subqueue})
		if !ok || got != tt.want {
			t.Errorf("depth{%s,%s} = %v (present %v), want %v", tt.entity, tt.subqueue, got, ok, tt.want)
		}
	}
	if n := len(fams["dlqdash_dlq_depth"].GetMetric()); n != len(tests) {
		t.Errorf("%d depth series, want %d (no topic, deleted or never-read entity)", n, len(tests))
	}
	if f := fams["dlqdash_dlq_depth"]; f.GetType() != dto.MetricType_GAUGE {
		t.Errorf("depth is a %v, want a gauge", f.GetType())
	}
}

// A catalog that cannot be read costs its own series, not the scrape.
func TestDepthCatalogErrorKeepsTheRest(t *testing.T) {
	m := New(Config{Catalog: fakeCatalog{err: errors.New("database is locked")}})
	m.Publish(dlq.Change{Kind: dlq.ChangeNew, IDs: []int64{1}})
	fams := scrape(t, m)
	if _, ok := fams["dlqdash_dlq_depth"]; ok {
		t.Error("depth reported although the catalog failed")
	}
	if v, ok := value(fams, "dlqdash_messages_cataloged_total", nil); !ok || v != 1 {
		t.Errorf("cataloged_total = %v, %v; want 1 despite the failing collector", v, ok)
	}
}

func TestFreshness(t *testing.T) {
	last := t0.Add(-30 * time.Second)
	tests := []struct {
		name        string
		status      dlq.Status
		healthy     float64
		lastSuccess float64 // 0: absent
		lag         float64
	}{
		{"healthy", dlq.Status{Healthy: true, LastSuccessAt: &last}, 1, float64(last.Unix()), 30},
		{"failing after a success", dlq.Status{Error: "connection refused", LastSuccessAt: &last, ErrorSince: &t0}, 0, float64(last.Unix()), 30},
		{"never succeeded", dlq.Status{Error: "connection refused"}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{Now: func() time.Time { return t0 }})
			m.CollectStatus(fakeStatus(tt.status))
			fams := scrape(t, m)
			if v, ok := value(fams, "dlqdash_catalog_healthy", nil); !ok || v != tt.healthy {
				t.Errorf("healthy = %v, %v; want %v", v, ok, tt.healthy)
			}
			ts, tsOK := value(fams, "dlqdash_catalog_last_success_timestamp_seconds", nil)
			lag, lagOK := value(fams, "dlqdash_catalog_lag_seconds", nil)
			if tt.lastSuccess == 0 {
				if tsOK || lagOK {
					t.Errorf("last success %v and lag %v reported before any success", ts, lag)
				}
				return
			}
			if ts != tt.lastSuccess || lag != tt.lag {
				t.Errorf("last success %v, lag %v; want %v, %v", ts, lag, tt.lastSuccess, tt.lag)
			}
		})
	}
}

func TestCatalogedCountsNewMessagesOnly(t *testing.T) {
	m := New(Config{})
	m.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{1, 2, 3}})
	m.Publish(dlq.Change{Kind: dlq.ChangeGone, Entity: "orders", IDs: []int64{1, 2}})
	m.Publish(dlq.Change{Kind: dlq.ChangeUpdated, Entity: "orders", IDs: []int64{3}})
	m.Publish(dlq.Change{Kind: dlq.ChangeFreshness})
	m.Publish(dlq.Change{Kind: dlq.ChangeNew, Entity: "email", SubQueue: dlq.SubQueueMain, IDs: []int64{9}})
	if v, _ := value(scrape(t, m), "dlqdash_messages_cataloged_total", nil); v != 4 {
		t.Errorf("cataloged_total = %v, want 4", v)
	}
}

func TestJobMessagesFromSnapshots(t *testing.T) {
	now := t0
	m := New(Config{Now: func() time.Time { return now }})
	created := t0.Add(time.Second)
	snap := func(id int64, a replay.Action, s replay.Status, at time.Time, c replay.Counts) replay.Job {
		return replay.Job{ID: id, Action: a, Status: s, CreatedAt: at, Counts: c}
	}
	for _, j := range []replay.Job{
		// A new replay: skipped at creation, then progress, a stale
		// snapshot (a pause racing the runner), then the end.
		snap(1, replay.ActionReplay, replay.StatusQueued, created, replay.Counts{Pending: 8, Skipped: 2}),
		snap(1, replay.ActionReplay, replay.StatusRunning, created, replay.Counts{Pending: 4, Completed: 3, Failed: 1, Skipped: 2}),
		snap(1, replay.ActionReplay, replay.StatusPaused, created, replay.Counts{Pending: 6, Completed: 1, Failed: 1, Skipped: 2}),
		snap(1, replay.ActionReplay, replay.StatusCompleted, created, replay.Counts{Completed: 7, Failed: 1, Skipped: 2}),
		// A late snapshot of the finished job counts nothing again.
		snap(1, replay.ActionReplay, replay.StatusCancelling, created, replay.Counts{Completed: 7, Failed: 1, Skipped: 2}),
		// A discard.
		snap(2, replay.ActionDiscard, replay.StatusRunning, created, replay.Counts{Completed: 4}),
		// A job an earlier process created and counted: only what it does
		// from now on counts.
		snap(3, replay.ActionReplay, replay.StatusRunning, t0.Add(-time.Hour), replay.Counts{Pending: 10, Completed: 100}),
		snap(3, replay.ActionReplay, replay.StatusRunning, t0.Add(-time.Hour), replay.Counts{Pending: 5, Completed: 105}),
	} {
		m.JobChanged(j)
	}
	fams := scrape(t, m)
	tests := []struct {
		action, outcome string
		want            float64
	}{
		{"replay", "completed", 7 + 5},
		{"replay", "failed", 1},
		{"replay", "skipped", 2},
		{"discard", "completed", 4},
		{"discard", "failed", 0},
		{"discard", "skipped", 0},
	}
	for _, tt := range tests {
		got, ok := value(fams, "dlqdash_replay_messages_total", map[string]string{"action": tt.action, "outcome": tt.outcome})
		if !ok || got != tt.want {
			t.Errorf("replay_messages_total{%s,%s} = %v (present %v), want %v", tt.action, tt.outcome, got, ok, tt.want)
		}
	}
}

// Snapshots arrive from many goroutines in any order; the counter ends at
// the highest count whatever the interleaving (and -race sees no race).
func TestJobMessagesConcurrentSnapshots(t *testing.T) {
	m := New(Config{Now: func() time.Time { return t0 }})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 250 {
				m.JobChanged(replay.Job{ID: 1, Action: replay.ActionReplay, Status: replay.StatusRunning, CreatedAt: t0,
					Counts: replay.Counts{Completed: i*4 + g + 1}})
			}
		})
	}
	wg.Wait()
	if v, _ := value(scrape(t, m), "dlqdash_replay_messages_total", map[string]string{"action": "replay", "outcome": "completed"}); v != 1000 {
		t.Errorf("completed = %v, want 1000", v)
	}
}

func TestJobsByStatus(t *testing.T) {
	fams := scrape(t, New(Config{Jobs: fakeJobs{replay.StatusRunning: 2, replay.StatusCompleted: 5}}))
	for status, want := range map[string]float64{"queued": 0, "running": 2, "paused": 0, "cancelling": 0, "cancelled": 0, "completed": 5, "failed": 0} {
		if got, ok := value(fams, "dlqdash_replay_jobs", map[string]string{"status": status}); !ok || got != want {
			t.Errorf("replay_jobs{%s} = %v (present %v), want %v", status, got, ok, want)
		}
	}
}

func TestHTTPDurationLabels(t *testing.T) {
	m := New(Config{})
	m.ObserveRequest("GET", "GET /api/v1/messages/{id}", 200, 12*time.Millisecond)
	m.ObserveRequest("GET", "GET /api/v1/messages/{id}", 200, 40*time.Millisecond)
	m.ObserveRequest("BREW", "", 404, time.Millisecond)
	fams := scrape(t, m)
	if n, _ := value(fams, "dlqdash_http_request_duration_seconds", map[string]string{"method": "GET", "route": "GET /api/v1/messages/{id}", "code": "200"}); n != 2 {
		t.Errorf("%v observations of GET /api/v1/messages/{id}, want 2", n)
	}
	if n, _ := value(fams, "dlqdash_http_request_duration_seconds", map[string]string{"method": "other", "route": "unmatched", "code": "404"}); n != 1 {
		t.Errorf("%v observations of an unknown method on no route, want 1", n)
	}
	if f := fams["dlqdash_http_request_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("type %v, want a histogram", f.GetType())
	}
}

// docs/api.md: every metric name starts with dlqdash_, the runtime's included;
// and each Metrics has a registry of its own.
func TestNamesArePrefixedAndRegistriesSeparate(t *testing.T) {
	at := t0
	cfg := Config{Catalog: fakeCatalog{ents: []dlq.EntitySummary{{Entity: dlq.Entity{Path: "q", Kind: dlq.KindQueue}, CountsAt: &at}}}, Jobs: fakeJobs{}}
	a, b := New(cfg), New(cfg)                         // would panic on a shared registry
	processMetricsSupported := runtime.GOOS == "linux" // the process collector reads /proc
	a.CollectStatus(fakeStatus{Healthy: true, LastSuccessAt: &at})
	a.ObserveRequest("GET", "GET /{$}", 200, time.Millisecond)
	fams := scrape(t, a)
	for _, want := range []string{"dlqdash_go_goroutines", "dlqdash_process_cpu_seconds_total", "dlqdash_catalog_healthy", "dlqdash_dlq_depth", "dlqdash_replay_jobs"} {
		if _, ok := fams[want]; !ok && (want != "dlqdash_process_cpu_seconds_total" || processMetricsSupported) {
			t.Errorf("no %s", want)
		}
	}
	for name := range fams {
		if !strings.HasPrefix(name, "dlqdash_") {
			t.Errorf("metric %s lacks the dlqdash_ prefix", name)
		}
	}
	if _, ok := scrape(t, b)["dlqdash_http_request_duration_seconds"]; ok {
		t.Error("a request observed on one Metrics shows on another")
	}
}

// The example Grafana dashboard (docs/grafana-dashboard.json) queries only
// metrics that exist.
func TestGrafanaDashboardUsesOurNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	at := t0
	m := New(Config{Catalog: fakeCatalog{ents: []dlq.EntitySummary{{Entity: dlq.Entity{Path: "q", Kind: dlq.KindQueue}, CountsAt: &at}}}, Jobs: fakeJobs{}})
	m.CollectStatus(fakeStatus{Healthy: true, LastSuccessAt: &at})
	m.ObserveRequest("GET", "GET /{$}", 200, time.Millisecond)
	fams := scrape(t, m)
	name := regexp.MustCompile(`dlqdash_[a-z_]+`)
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := n
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if f, ok := fams[strings.TrimSuffix(n, suffix)]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
						base = strings.TrimSuffix(n, suffix)
					}
				}
				if _, ok := fams[base]; !ok {
					t.Errorf("panel %q queries %s, which dlqdash does not expose", p.Title, n)
				}
			}
		}
	}
	if exprs == 0 {
		t.Error("the dashboard has no queries")
	}
}

// TestDepthAndFreshnessPerNamespace: the same queue in two namespaces is one
// dlqdash_dlq_depth series (summed, its labels unchanged) and one
// dlqdash_namespace_dlq_depth series each; each namespace's health is its
// own series beside the summary.
func TestDepthAndFreshnessPerNamespace(t *testing.T) {
	at := t0
	cat := fakeCatalog{ents: []dlq.EntitySummary{
		{Namespace: "eu", Entity: dlq.Entity{Path: "orders", Kind: dlq.KindQueue, Counts: dlq.Counts{DeadLetter: 5}}, CountsAt: &at},
		{Namespace: "us", Entity: dlq.Entity{Path: "orders", Kind: dlq.KindQueue, Counts: dlq.Counts{DeadLetter: 2}}, CountsAt: &at},
	}}
	m := New(Config{Catalog: cat})
	m.CollectStatus(dlq.StatusSet{fakeStatus{Namespace: "eu", Healthy: true, LastSuccessAt: &at}, fakeStatus{Namespace: "us", Error: "frozen"}})
	fams := scrape(t, m)
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dlqdash_dlq_depth", map[string]string{"entity": "orders", "subqueue": "dead_letter"}, 7},
		{"dlqdash_namespace_dlq_depth", map[string]string{"namespace": "eu", "entity": "orders", "subqueue": "dead_letter"}, 5},
		{"dlqdash_namespace_dlq_depth", map[string]string{"namespace": "us", "entity": "orders", "subqueue": "dead_letter"}, 2},
		{"dlqdash_catalog_healthy", nil, 0},
		{"dlqdash_namespace_healthy", map[string]string{"namespace": "eu"}, 1},
		{"dlqdash_namespace_healthy", map[string]string{"namespace": "us"}, 0},
	} {
		if got, ok := value(fams, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	if n := len(fams["dlqdash_dlq_depth"].GetMetric()); n != 2 {
		t.Errorf("%d dlqdash_dlq_depth series, want 2 (orders' two subqueues)", n)
	}
}

// With a replica id every series carries it as the label replica (the
// runtime collectors' too), and dlqdash_namespace_ingesting says which
// namespaces this replica ingests.
func TestReplicaLabel(t *testing.T) {
	at := t0
	cat := fakeCatalog{ents: []dlq.EntitySummary{
		{Namespace: "eu", Entity: dlq.Entity{Path: "orders", Kind: dlq.KindQueue, Counts: dlq.Counts{DeadLetter: 5}}, CountsAt: &at},
	}}
	m := New(Config{Catalog: cat, Jobs: fakeJobs{replay.StatusRunning: 1}, Replica: "pod-a"})
	m.CollectStatus(dlq.StatusSet{fakeStatus{Namespace: "eu", Healthy: true, LastSuccessAt: &at, Replica: "pod-a"},
		fakeStatus{Namespace: "us", Healthy: true, LastSuccessAt: &at, Replica: "pod-b"}})
	m.ObserveRequest("GET", "/", 200, time.Millisecond)
	fams := scrape(t, m)
	for name, f := range fams {
		for _, s := range f.Metric {
			found := false
			for _, l := range s.Label {
				found = found || l.GetName() == "replica" && l.GetValue() == "pod-a"
			}
			if !found {
				t.Errorf("%s %v: no replica label", name, s.Label)
			}
		}
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dlqdash_namespace_ingesting", map[string]string{"namespace": "eu", "replica": "pod-a"}, 1},
		{"dlqdash_namespace_ingesting", map[string]string{"namespace": "us", "replica": "pod-a"}, 0},
		{"dlqdash_namespace_dlq_depth", map[string]string{"namespace": "eu", "entity": "orders", "subqueue": "dead_letter", "replica": "pod-a"}, 5},
	} {
		if got, ok := value(fams, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// Without one, no replica label and no ingesting series (as before).
	fams = scrape(t, New(Config{Catalog: cat}))
	if _, ok := fams["dlqdash_namespace_ingesting"]; ok {
		t.Error("dlqdash_namespace_ingesting without a replica id")
	}
	if _, ok := value(fams, "dlqdash_namespace_dlq_depth", map[string]string{"namespace": "eu", "entity": "orders", "subqueue": "dead_letter"}); !ok {
		t.Error("a series without a replica id carries extra labels")
	}
}
