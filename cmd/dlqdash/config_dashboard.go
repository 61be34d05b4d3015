package main

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

func dashboardFlags(f *flagSet) {
	f.str("addr", envAddr, defaultAddr, "address the dashboard listens on (host:port; port 0 picks a free port)")
	f.str("db", envDB, defaultDB, "SQLite database file (created if missing) or postgres:// URL (or DLQDASH_DATABASE_URL)")
	f.str("poll", envPoll, defaultPoll, "how often entity counts are read (a Go duration: 500ms, 1s, 5s)")
	f.str("servicebus-timeout", envSBTimeout, defaultSBTimeout, "deadline of each Service Bus call (send, receive beyond its wait, complete, peek, admin read, link attach); a call past it is retried like any failure (1s to 5m)")
	f.str("retention", envRetention, defaultRetention, "how long messages that left Service Bus stay in the catalog (30d, 72h; 0 keeps them forever)")
	f.str("orphan-after", envOrphanAfter, defaultOrphanAfter, "how long a message may stay deferred before the inventory flags it as a deferred orphan (a Go duration: 24h, 90m)")
	f.str("poison-cap", envPoisonCap, defaultPoisonCap, "how many times a message lineage may be replayed before replays skip it as poison (unless allow_poison)")
	f.str("metrics-addr", envMetricsAddr, "", "address of a listener of its own for GET /metrics (host:port); empty serves /metrics on --addr")
	if f.fs.Name() == "dlqdash serve" {
		f.str("admin-endpoint", envAdminEndpoint, "", "admin (HTTP/ATOM) API base URL (default https://<namespace>/, or http://<endpoint host>:5300 with UseDevelopmentEmulator=true)")
		f.str("servicebus-transport", envSBTransport, servicebus.TransportAMQP, "how to reach Service Bus: amqp (AMQP over TCP, port 5671) or websockets (AMQP over WebSockets on the HTTPS port 443, through HTTPS_PROXY, for networks that allow only HTTPS)")
		f.str("config", envConfig, "", "a YAML file listing the namespaces to watch, how to sign in to each (SAS or Entra ID) and per-namespace access rules; instead of "+envConnectionString+" and --admin-endpoint")
	}
	replicaFlag(f) // config_replica.go
	authFlags(f)
	auditKeyFlag(f)
	httpFlags(f)  // httpconfig.go
	alertFlags(f) // config_alerts.go
	logFlags(f)
}

// parseDashboardConfig reads the flags of demo and serve, and serve's
// connection string from the environment.
func parseDashboardConfig(cfg *Config, f *flagSet, getenv func(string) string, bad func(string, ...any) error) error {
	v := f.get
	var err error
	if cfg.Addr, err = f.addr("addr", bad); err != nil {
		return err
	}
	if cfg.DB, err = f.db(bad); err != nil {
		return err
	}
	if cfg.Poll, err = time.ParseDuration(v("poll")); err != nil || cfg.Poll < 100*time.Millisecond || cfg.Poll > time.Hour {
		return bad("invalid poll interval %q from %s: want a duration from 100ms to 1h, e.g. 1s", v("poll"), f.source("poll"))
	}
	if cfg.ServiceBusTimeout, err = time.ParseDuration(v("servicebus-timeout")); err != nil || cfg.ServiceBusTimeout < time.Second || cfg.ServiceBusTimeout > 5*time.Minute {
		return bad("invalid Service Bus timeout %q from %s: want a duration from 1s to 5m, e.g. 10s", v("servicebus-timeout"), f.source("servicebus-timeout"))
	}
	if cfg.Retention, err = parseRetention(v("retention")); err != nil {
		return bad("invalid retention %q from %s: %v", v("retention"), f.source("retention"), err)
	}
	if cfg.OrphanAfter, err = time.ParseDuration(v("orphan-after")); err != nil || cfg.OrphanAfter < time.Minute {
		return bad("invalid orphan-after %q from %s: want a duration of at least 1m, e.g. 24h", v("orphan-after"), f.source("orphan-after"))
	}
	if cfg.PoisonCap, err = strconv.Atoi(v("poison-cap")); err != nil || cfg.PoisonCap < 1 || cfg.PoisonCap > 1000 {
		return bad("invalid poison cap %q from %s: want a whole number from 1 to 1000", v("poison-cap"), f.source("poison-cap"))
	}
	if strings.TrimSpace(v("metrics-addr")) != "" {
		if cfg.MetricsAddr, err = f.addr("metrics-addr", bad); err != nil {
			return err
		}
		if _, port, _ := net.SplitHostPort(cfg.MetricsAddr); cfg.MetricsAddr == cfg.Addr && port != "0" {
			return bad("metrics address %q from %s is the dashboard's own (%s): give another port, or leave it empty to serve /metrics on the dashboard's listener",
				cfg.MetricsAddr, f.source("metrics-addr"), f.source("addr"))
		}
	}
	if cfg.ReplicaID, err = parseReplicaID(f, bad); err != nil {
		return err
	}
	if cfg.Auth, err = parseAuth(f, cfg.Command, cfg.Addr, getenv, bad); err != nil {
		return err
	}
	if cfg.HTTP, err = parseHTTPConfig(f, cfg.Addr, cfg.Auth, bad); err != nil {
		return err
	}
	if cfg.Alerts, err = parseAlertFlags(f, bad); err != nil {
		return err
	}
	if cfg.Command != "serve" {
		return nil
	}
	if path := strings.TrimSpace(v("config")); path != "" {
		// The file lists every namespace: a connection string or admin
		// endpoint beside it would be ambiguous (which namespace?), so
		// both ways at once are refused rather than merged.
		if strings.TrimSpace(getenv(envConnectionString)) != "" {
			return bad("both --config (from %s) and %s are set: the file lists every namespace; unset %s, or name it in the file (connection_string_env: %s)",
				f.source("config"), envConnectionString, envConnectionString, envConnectionString)
		}
		if strings.TrimSpace(v("admin-endpoint")) != "" {
			return bad("--admin-endpoint (from %s) does not apply with --config: give admin_endpoint to the namespace in the file", f.source("admin-endpoint"))
		}
		if t := strings.ToLower(strings.TrimSpace(v("servicebus-transport"))); t != "" && t != servicebus.TransportAMQP {
			return bad("--servicebus-transport (from %s) does not apply with --config: give transport: %s to the namespace in the file", f.source("servicebus-transport"), t)
		}
		cfg.ConfigFile = path
		return nil // the file is read by loadConfigFile
	}
	if a := strings.TrimSpace(v("admin-endpoint")); a != "" {
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return bad("invalid admin endpoint %q from %s: want http(s)://host[:port]", a, f.source("admin-endpoint"))
		}
		cfg.AdminEndpoint = a
	}
	switch t := strings.ToLower(strings.TrimSpace(v("servicebus-transport"))); t {
	case servicebus.TransportAMQP, servicebus.TransportWebSockets:
		cfg.ServiceBusTransport = t
	default:
		return bad("invalid Service Bus transport %q from %s: want %s or %s", v("servicebus-transport"), f.source("servicebus-transport"),
			servicebus.TransportAMQP, servicebus.TransportWebSockets)
	}
	raw := getenv(envConnectionString)
	if strings.TrimSpace(raw) == "" {
		return bad("%s is not set: serve needs the namespace's connection string (%s)", envConnectionString, connstr.Shape)
	}
	if cfg.ConnectionString, err = connstr.Parse(raw); err != nil {
		return bad("%s %v", envConnectionString, err)
	}
	return nil
}
