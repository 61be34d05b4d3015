package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// depthCollector reads the dead-letter counts of every entity at scrape
// time: the catalog keeps the broker's counts as last read, so a scrape
// costs one small query and no broker call.
type depthCollector struct {
	catalog Catalog
}

var depthDesc = prometheus.NewDesc("dlqdash_dlq_depth",
	"Messages in an entity's dead-letter subqueue, as the broker last reported (subqueue dead_letter or transfer_dead_letter).",
	[]string{"entity", "subqueue"}, nil)

// namespaceDepthDesc is the depth per namespace: dlqdash_dlq_depth sums
// the entities of one path over the namespaces (its labels are the stable
// interface's), this one tells them apart.
var namespaceDepthDesc = prometheus.NewDesc("dlqdash_namespace_dlq_depth",
	"Messages in an entity's dead-letter subqueue in one namespace, as the broker last reported.",
	[]string{"namespace", "entity", "subqueue"}, nil)

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- namespaceDepthDesc
}

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	ents, err := c.catalog.ListEntities(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(depthDesc, err)
		return
	}
	// Two namespaces may have the same path: one series per path, summed,
	// in the order the catalog lists them.
	type depth struct{ dead, transfer int64 }
	var paths []string
	byPath := map[string]*depth{}
	for _, e := range ents {
		// A topic has no dead-letter queue of its own (its subscriptions
		// do); a deleted entity or one never read has no depth to report.
		if e.Kind == dlq.KindTopic || e.DeletedAt != nil || e.CountsAt == nil {
			continue
		}
		d := byPath[e.Path]
		if d == nil {
			d = &depth{}
			byPath[e.Path] = d
			paths = append(paths, e.Path)
		}
		d.dead += e.Counts.DeadLetter
		d.transfer += e.Counts.TransferDeadLetter
		ch <- prometheus.MustNewConstMetric(namespaceDepthDesc, prometheus.GaugeValue, float64(e.Counts.DeadLetter), e.Namespace, e.Path, string(dlq.SubQueueDeadLetter))
		ch <- prometheus.MustNewConstMetric(namespaceDepthDesc, prometheus.GaugeValue, float64(e.Counts.TransferDeadLetter), e.Namespace, e.Path, string(dlq.SubQueueTransferDeadLetter))
	}
	for _, p := range paths {
		d := byPath[p]
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(d.dead), p, string(dlq.SubQueueDeadLetter))
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(d.transfer), p, string(dlq.SubQueueTransferDeadLetter))
	}
}

// jobsCollector counts jobs by status at scrape time; every status is
// reported, 0 included, so that a panel shows a line from the start.
type jobsCollector struct {
	jobs JobCounter
}

var jobsDesc = prometheus.NewDesc("dlqdash_replay_jobs",
	"Replay and discard jobs by status.", []string{"status"}, nil)

var jobStatuses = []replay.Status{replay.StatusQueued, replay.StatusRunning, replay.StatusRetrying, replay.StatusPaused,
	replay.StatusCancelling, replay.StatusCancelled, replay.StatusCompleted, replay.StatusFailed}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	counts, err := c.jobs.CountJobs(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	for _, s := range jobStatuses {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// freshnessCollector reports the ingester's status at scrape time.
type freshnessCollector struct {
	status StatusSource
	now    func() time.Time
	// replica is this replica's id: dlqdash_namespace_ingesting compares
	// it with each namespace's ingesting replica ("" leaves it out).
	replica string
}

var (
	lastSuccessDesc = prometheus.NewDesc("dlqdash_catalog_last_success_timestamp_seconds",
		"When the catalog last read Service Bus successfully (Unix seconds); absent before the first success.", nil, nil)
	healthyDesc = prometheus.NewDesc("dlqdash_catalog_healthy",
		"1 while the catalog reads Service Bus successfully, 0 while it fails.", nil, nil)
	lagDesc = prometheus.NewDesc("dlqdash_catalog_lag_seconds",
		"Seconds since the catalog last read Service Bus successfully; absent before the first success.", nil, nil)
)

// Each namespace's own freshness (the metrics above are their summary).
var (
	namespaceHealthyDesc = prometheus.NewDesc("dlqdash_namespace_healthy",
		"1 while the catalog reads this namespace successfully, 0 while it fails.", []string{"namespace"}, nil)
	namespaceLastSuccessDesc = prometheus.NewDesc("dlqdash_namespace_last_success_timestamp_seconds",
		"When the catalog last read this namespace successfully (Unix seconds); absent before the first success.", []string{"namespace"}, nil)
	namespaceIngestingDesc = prometheus.NewDesc("dlqdash_namespace_ingesting",
		"1 while this replica ingests the namespace (holds its ingest lease), else 0: summed over the replicas, 1 per namespace.", []string{"namespace"}, nil)
)

func (c *freshnessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastSuccessDesc
	ch <- healthyDesc
	ch <- lagDesc
	ch <- namespaceHealthyDesc
	ch <- namespaceLastSuccessDesc
	if c.replica != "" {
		ch <- namespaceIngestingDesc
	}
}

// namespaces is each namespace's status: the source's own when it reads
// several (dlq.StatusSet), else its one status.
func (c *freshnessCollector) namespaces() []dlq.Status {
	if set, ok := c.status.(interface{ Namespaces() []dlq.Status }); ok {
		return set.Namespaces()
	}
	return []dlq.Status{c.status.Status()}
}

func (c *freshnessCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status.Status()
	healthy := 0.0
	if st.Healthy {
		healthy = 1
	}
	ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, healthy)
	for _, ns := range c.namespaces() {
		if ns.Namespace == "" {
			continue // a source without a name (tests)
		}
		h := 0.0
		if ns.Healthy {
			h = 1
		}
		ch <- prometheus.MustNewConstMetric(namespaceHealthyDesc, prometheus.GaugeValue, h, ns.Namespace)
		if c.replica != "" {
			ingesting := 0.0
			if ns.Replica == c.replica {
				ingesting = 1
			}
			ch <- prometheus.MustNewConstMetric(namespaceIngestingDesc, prometheus.GaugeValue, ingesting, ns.Namespace)
		}
		if ns.LastSuccessAt != nil {
			ch <- prometheus.MustNewConstMetric(namespaceLastSuccessDesc, prometheus.GaugeValue, float64(ns.LastSuccessAt.UnixMilli())/1e3, ns.Namespace)
		}
	}
	if st.LastSuccessAt == nil {
		return
	}
	at := *st.LastSuccessAt
	ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, float64(at.UnixMilli())/1e3)
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, max(0, c.now().Sub(at).Seconds()))
}
