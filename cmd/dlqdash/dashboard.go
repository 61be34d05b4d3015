package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/alert"
	"github.com/dlqdash/dlqdash/alert/webhook"
	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/metrics"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/web"
)

// shutdownTimeout bounds how long in-flight HTTP requests may take to finish.
const shutdownTimeout = 10 * time.Second

// dashboard is what differs between demo and serve.
type dashboard struct {
	mode      string // "demo" or "serve"
	namespace string // Service Bus host for the overview page, never a secret
	// namespaces are the configured namespaces' names, in order.
	namespaces []string

	// loops are background loops (ingester, replay engine, ...). Each runs
	// until its context is cancelled, which happens after HTTP has stopped
	// and before the store closes. A loop returning early with an error
	// shuts the whole program down.
	loops []func(context.Context) error

	// onStore, if set, runs once the store is open, to build loops that
	// need it. It may append to d.loops and set d.status.
	onStore func(ctx context.Context, st *store.Store, d *dashboard) error

	// status reports the catalog's freshness (the ingester); nil when
	// nothing reads a namespace.
	status interface{ Status() dlq.Status }
	// publish receives the catalog's change events; nil discards them.
	publish func(dlq.Change)
	// onJob receives the replay engine's job changes; nil discards them.
	onJob func(replay.Job)
	// jobs is the replay engine, set by onStore; nil when there is none.
	jobs *replay.Engine
	// audit is the keyed audit trail (auditkey.go), set before onStore.
	audit *audit.Log
	// replicas is what this replica shares with the others on its
	// database (replicas.go), set before onStore.
	replicas *replicas
}

// serveDashboard is the lifecycle of demo and serve, top to bottom: open the
// store, build the server, listen, serve until ctx ends or something fails,
// then stop HTTP, then the background loops, then the store.
func serveDashboard(ctx context.Context, cfg Config, logger *slog.Logger, d dashboard) (err error) {
	st, err := store.Open(ctx, cfg.DB, store.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer func() {
		// Last: nothing may use the store after this.
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close database: %w", cerr))
		}
	}()
	d.replicas = openReplicas(st, cfg.ReplicaID, logger)
	// The hub exists before the ingester that publishes to it; it runs as
	// a loop, and the server closes its websockets when HTTP shuts down.
	// Other replicas' changes wake it (Remote); its own tell them.
	hub := web.NewHub(web.HubConfig{Catalog: st, JobItems: st, Outcomes: st, Logger: logger.With("component", "live"), Mode: d.mode, Namespace: d.namespace,
		Namespaces: d.namespaces, Statuses: func() []dlq.Status { return namespaceStatuses(d.status) }, MaxConnections: cfg.HTTP.MaxLiveConnections, MaxPerActor: cfg.HTTP.MaxLivePerActor,
		Remote: d.replicas.remote(), Published: d.replicas.changed()})
	// Metrics count the same events the hub shows, so they exist before
	// onStore builds the ingester and the engine that emit them; depth and
	// jobs are read from the store at scrape time.
	m := metrics.New(metrics.Config{Catalog: st, Jobs: st, Logger: logger.With("component", "metrics"), Replica: cfg.ReplicaID})
	if d.audit, err = openAuditLog(ctx, cfg, st, logAuditKeyCreated(logger)); err != nil {
		return err
	}
	// The alert loop is woken by the same events; it never slows them
	// (config_alerts.go, package alert). Links without --public-url point
	// at the listen address, known once listening.
	var listenURL string
	alerter := alert.New(alert.Config{Store: st, Poster: webhook.New(nil), Audit: d.audit, Logger: logger.With("component", "alerts"),
		Webhooks: cfg.Alerts.Webhooks, PublicURL: cfg.Alerts.PublicURL, RepeatEvery: cfg.Alerts.RepeatEvery,
		FallbackURL: func() string { return listenURL }})
	d.publish = fanOut(hub.Publish, m.Publish, alerter.CatalogChanged)
	d.onJob = fanOut(hub.PublishJob, m.JobChanged, alerter.JobChanged, d.replicas.jobChanged)
	d.loops = append(d.loops, hub.Run, alerter.Run)
	d.loops = append(d.loops, d.replicas.loops()...)
	d.loops = append(d.loops, logAuditHeads(st, logger, auditHeadEvery))
	if d.onStore != nil {
		if err := d.onStore(ctx, st, &d); err != nil {
			return err
		}
	}
	if d.status != nil {
		m.CollectStatus(d.status)
	}

	cfgWeb := web.Config{Logger: logger, Catalog: st, Status: d.status, Mode: d.mode, Namespace: d.namespace, OrphanAfter: cfg.OrphanAfter, Audit: st, Hub: hub,
		Metrics: m, Namespaces: d.namespaces, Replica: cfg.ReplicaID}
	if d.jobs != nil {
		cfgWeb.Jobs = d.jobs
	}
	cfgWeb.AllowedHosts = cfg.HTTP.AllowedHosts
	cfgWeb.Access = cfg.Access // roles limited to namespaces (--config's access rules)
	if err := withSignIn(ctx, cfg, st, logger, &cfgWeb); err != nil {
		return err
	}
	cfgWeb.AuditLog = d.audit
	cfgWeb.Alerts = &alert.Admin{Store: st, Config: cfg.Alerts.Webhooks, PublicURL: cfg.Alerts.PublicURL}
	cfgWeb.PublicURL = cfg.Alerts.PublicURL
	var metricsSrv *http.Server
	if cfg.MetricsAddr == "" {
		cfgWeb.MetricsHandler = m.Handler()
	} else {
		metricsSrv = newMetricsServer(m, logger)
	}
	srv := web.New(cfgWeb)

	// Listen before serving so that port 0 works and the address logged is
	// the real one.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var metricsLn net.Listener
	if metricsSrv != nil {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen for metrics: %w", err)
		}
		logger.Info("metrics listening", "addr", metricsLn.Addr().String(), "url", "http://"+metricsLn.Addr().String()+"/metrics")
	}
	listenURL = "http://" + ln.Addr().String()
	logger.Info("dashboard listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/", "db", st.Path(), "mode", d.mode, "replica", cfg.ReplicaID)

	// failed receives the first error of the servers or a loop.
	failed := make(chan error, 2+len(d.loops))
	var httpDone sync.WaitGroup
	httpDone.Go(func() {
		if err := srv.Serve(ln); err != nil {
			failed <- fmt.Errorf("http server: %w", err)
		}
	})
	if metricsSrv != nil {
		httpDone.Go(func() {
			if err := metricsSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("metrics server: %w", err)
			}
		})
	}

	// Loops get their own context: they must outlive the HTTP shutdown so
	// that requests still in flight can use them.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	var loopsDone sync.WaitGroup
	for _, loop := range d.loops {
		loopsDone.Go(func() {
			if err := loop(loopCtx); err != nil && !errors.Is(err, context.Canceled) {
				failed <- err
			}
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "reason", context.Cause(ctx).Error())
	case runErr = <-failed:
		logger.Info("shutting down after a failure")
	}

	// 1. HTTP: stop accepting, let requests in flight finish.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
	}
	if metricsSrv != nil {
		if err := metricsSrv.Shutdown(shutdownCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("metrics shutdown: %w", err), metricsSrv.Close())
		}
	}
	httpDone.Wait()

	// 2. Background loops.
	stopLoops()
	loopsDone.Wait()

	// 3. The store, in the deferred Close above.
	logger.Info("stopped")
	return runErr
}

// namespaceStatuses is each namespace's status from the dashboard's status
// source (set by onStore, after the hub is built): a dlq.StatusSet's, or
// the one.
func namespaceStatuses(src interface{ Status() dlq.Status }) []dlq.Status {
	switch s := src.(type) {
	case nil:
		return nil
	case dlq.StatusSet:
		return s.Namespaces()
	default:
		return []dlq.Status{s.Status()}
	}
}
