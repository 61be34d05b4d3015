package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// Catalog reads the catalog's entities with their broker counts as last
// read. *store.Store implements it.
type Catalog interface {
	ListEntities(ctx context.Context) ([]dlq.EntitySummary, error)
}

// JobCounter counts replay jobs by status. *store.Store implements it.
type JobCounter interface {
	CountJobs(ctx context.Context) (map[replay.Status]int, error)
}

// StatusSource reports the catalog's freshness. *dlq.Ingester implements it.
type StatusSource interface {
	Status() dlq.Status
}

// Config is what New needs. Every field is optional: a nil source leaves
// its metrics out.
type Config struct {
	Catalog Catalog    // dlqdash_dlq_depth
	Jobs    JobCounter // dlqdash_replay_jobs
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Replica, when set, is this replica's id (--replica-id): every
	// series carries it as the label replica, so that the series of
	// replicas sharing one database stay apart however they are scraped,
	// and dlqdash_namespace_ingesting says which replica ingests.
	Replica string
}

// ScrapeTimeout bounds the catalog reads of one scrape.
const ScrapeTimeout = 5 * time.Second

// Metrics owns a registry and the collectors on it.
type Metrics struct {
	reg *prometheus.Registry
	// on is where collectors are registered: reg, adding the replica
	// label when there is one.
	on      prometheus.Registerer
	replica string

	logger *slog.Logger
	now    func() time.Time
	// start is when this process began counting, truncated to the
	// millisecond like the jobs' CreatedAt: jobs created before it were
	// counted by an earlier process.
	start time.Time

	cataloged    prometheus.Counter
	jobMessages  *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	auth         authMetrics // auth.go

	mu sync.Mutex
	// jobs holds the highest counts seen per job id. Jobs are created by
	// people, so it grows by one small entry per job; finished jobs stay so
	// that a late snapshot is not mistaken for a new job.
	jobs map[int64]replay.Counts
}

// New builds the registry with the Go runtime and process collectors, the
// event counters and the scrape-time collectors cfg has sources for.
func New(cfg Config) *Metrics {
	m := &Metrics{
		reg:    prometheus.NewRegistry(),
		logger: cfg.Logger,
		now:    cfg.Now,
		jobs:   map[int64]replay.Counts{},
	}
	m.on, m.replica = m.reg, cfg.Replica
	if cfg.Replica != "" {
		m.on = prometheus.WrapRegistererWith(prometheus.Labels{"replica": cfg.Replica}, m.reg)
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.start = m.now().Truncate(time.Millisecond)

	// The standard runtime metrics, under our prefix like every name we
	// expose (go_goroutines becomes dlqdash_go_goroutines).
	prometheus.WrapRegistererWithPrefix("dlqdash_", m.on).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	m.cataloged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlqdash_messages_cataloged_total",
		Help: "Messages the catalog saw for the first time.",
	})
	m.jobMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlqdash_replay_messages_total",
		Help: "Messages replay and discard jobs finished, by job action and outcome (completed, failed, skipped).",
	}, []string{"action", "outcome"})
	for _, a := range []replay.Action{replay.ActionReplay, replay.ActionDiscard} {
		for _, o := range outcomes {
			m.jobMessages.WithLabelValues(string(a), o)
		}
	}
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dlqdash_http_request_duration_seconds",
		Help:    "How long the dashboard took to answer, by method, route pattern and status code.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route", "code"})
	m.on.MustRegister(m.cataloged, m.jobMessages, m.httpDuration)
	m.auth = newAuthMetrics(m.on)

	if cfg.Catalog != nil {
		m.on.MustRegister(&depthCollector{catalog: cfg.Catalog})
	}
	if cfg.Jobs != nil {
		m.on.MustRegister(&jobsCollector{jobs: cfg.Jobs})
	}
	return m
}

// CollectStatus adds the catalog freshness metrics, read from s at scrape
// time. It exists apart from Config because the ingester is built after the
// hooks that feed Publish, which it needs; call it once.
func (m *Metrics) CollectStatus(s StatusSource) {
	m.on.MustRegister(&freshnessCollector{status: s, now: m.now, replica: m.replica})
}

// Handler serves the registry in the Prometheus exposition format. A
// collector that fails (the catalog unreadable) is logged and left out; the
// rest is still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Publish counts the catalog's changes; it is a dlq.Config.Publish hook and
// never blocks.
func (m *Metrics) Publish(c dlq.Change) {
	if c.Kind == dlq.ChangeNew {
		m.cataloged.Add(float64(len(c.IDs)))
	}
}

// outcomes are the finished item states counted per job.
var outcomes = []string{string(replay.ItemCompleted), string(replay.ItemFailed), string(replay.ItemSkipped)}

// JobChanged turns a job snapshot into counter increments; it is a
// replay.Config.OnChange hook and never blocks (a short lock, no I/O).
//
// Snapshots come from several goroutines (the job's runner, a person's
// pause or cancel), so one may be older than the last seen: counts only
// grow, and each counter advances by how far a snapshot goes beyond the
// highest seen. A job first seen that an earlier process created (adopted
// after a restart, or resumed) starts from its snapshot: what it did before
// was counted then, and the restart reset the counters anyway.
func (m *Metrics) JobChanged(j replay.Job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, seen := m.jobs[j.ID]
	if !seen && j.CreatedAt.Before(m.start) {
		m.jobs[j.ID] = j.Counts
		return
	}
	add := func(outcome string, was, now int) int {
		if now > was {
			m.jobMessages.WithLabelValues(string(j.Action), outcome).Add(float64(now - was))
			return now
		}
		return was
	}
	last.Completed = add(outcomes[0], last.Completed, j.Counts.Completed)
	last.Failed = add(outcomes[1], last.Failed, j.Counts.Failed)
	last.Skipped = add(outcomes[2], last.Skipped, j.Counts.Skipped)
	m.jobs[j.ID] = last
}

// ObserveRequest records one HTTP request. route is the route table's
// pattern that matched ("GET /api/v1/messages/{id}"), or "" when none did;
// it must never be the request's path, whose values are unbounded.
func (m *Metrics) ObserveRequest(method, route string, code int, elapsed time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.httpDuration.WithLabelValues(knownMethod(method), route, strconv.Itoa(code)).Observe(elapsed.Seconds())
}

// knownMethod keeps the method label bounded: a client may send any token.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}
