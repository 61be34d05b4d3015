// Package metrics is dlqdash's Prometheus side: one *prometheus.Registry per
// Metrics (never the default registry, no globals) and the collectors on it.
//
// What is read at scrape time comes from the catalog and the ingester
// through small interfaces: dead-letter depth per entity (Catalog), job
// counts by status (JobCounter), and the catalog's freshness
// (StatusSource). What happens between scrapes is counted from the events
// the ingester and the replay engine already emit: Publish counts newly
// cataloged messages, JobChanged turns job snapshots into per-outcome
// message counters, ObserveRequest records HTTP durations by route pattern.
// None of these blocks: each takes a short lock at most.
//
// Every metric name starts with dlqdash_ (docs/api.md), the Go runtime and
// process collectors' included. Labels are bounded: entity paths and job
// actions come from the namespace and the engine, HTTP routes are the route
// table's patterns, never request paths.
//
// The package must not import web, store or servicebus, nor serve HTTP
// itself beyond Handler: the command decides where /metrics is served.
package metrics
