package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// Environment variables. Flags win over them; they win over defaults.
const (
	envAddr             = "DLQDASH_ADDR"
	envDB               = "DLQDASH_DB"
	envLogLevel         = "DLQDASH_LOG_LEVEL"
	envLogFormat        = "DLQDASH_LOG_FORMAT"
	envConnectionString = "SERVICEBUS_CONNECTION_STRING"
	envEmulatorAMQPAddr = "DLQDASH_EMULATOR_AMQP_ADDR"
	envEmulatorAdmin    = "DLQDASH_EMULATOR_ADMIN_ADDR"
	envEmulatorConfig   = "DLQDASH_EMULATOR_CONFIG"
	envEmulatorKeyName  = "DLQDASH_EMULATOR_KEY_NAME"
	envEmulatorKey      = "DLQDASH_EMULATOR_KEY"
	envHealthcheckURL   = "DLQDASH_HEALTHCHECK_URL"
	envPoll             = "DLQDASH_POLL"
	envAdminEndpoint    = "DLQDASH_ADMIN_ENDPOINT"
	envRetention        = "DLQDASH_RETENTION"
	envOrphanAfter      = "DLQDASH_ORPHAN_AFTER"
	envPoisonCap        = "DLQDASH_POISON_CAP"
	envMetricsAddr      = "DLQDASH_METRICS_ADDR"
)

// Defaults. The emulator's match Microsoft's Service Bus emulator, so one
// connection string works against either.
const (
	defaultAddr         = "127.0.0.1:8080"
	defaultDB           = "./dlqdash.db"
	defaultLogLevel     = "info"
	defaultLogFormat    = "text"
	defaultEmulatorAMQP = "127.0.0.1:5672"
	defaultEmulatorAdm  = "127.0.0.1:5300"
	defaultPoll         = "1s"
	defaultRetention    = "30d"
	defaultOrphanAfter  = "24h"
	defaultPoisonCap    = "3"
)

// Config is everything a subcommand needs, parsed and checked.
type Config struct {
	Command   string // demo, serve, emulator, healthcheck, export, "audit verify", "audit export" or "token create|list|revoke"
	LogLevel  slog.Level
	LogFormat string // text or json

	// demo and serve
	Addr string // dashboard listen address
	DB   string // SQLite file
	// MetricsAddr is where GET /metrics is served on a listener of its
	// own; empty serves it on the dashboard's.
	MetricsAddr string

	// demo and serve: the catalog
	Poll      time.Duration // how often entity counts are read
	Retention time.Duration // how long messages that left the broker are kept; 0 keeps them forever
	// OrphanAfter is how long a message may stay deferred before the
	// inventory page flags it as a deferred orphan.
	OrphanAfter time.Duration
	// PoisonCap: a message lineage replayed this many times is not
	// replayed again without allow_poison.
	PoisonCap int

	// demo and serve: sign-in and roles (authconfig.go)
	Auth AuthConfig

	// serve
	ConnectionString connstr.ConnectionString
	AdminEndpoint    string // admin HTTP base URL; empty for the default

	// emulator
	Emulator EmulatorConfig

	// healthcheck
	HealthcheckURL string

	// export (DB is its database)
	Export ExportConfig

	// audit export (DB is its database; audit verify needs only DB)
	AuditExport AuditExportConfig

	// token create, list and revoke (DB is their database)
	Token TokenConfig
}

// EmulatorConfig configures `dlqdash emulator`.
type EmulatorConfig struct {
	AMQPAddr   string
	AdminAddr  string
	ConfigPath string // Config.json in the Microsoft emulator's format; empty for none

	// The SAS key clients must sign with. Only from the environment;
	// defaults to the well-known key of Microsoft's emulator.
	KeyName string
	Key     secret
}

// parseConfig turns the command line and environment into a Config. It is
// pure: it reads nothing but its arguments and prints nothing. Errors are
// *usageError (one line saying what to fix) or *helpRequest.
func parseConfig(args []string, getenv func(string) string) (Config, error) {
	if len(args) == 0 {
		return Config{}, &usageError{msg: "missing command: want one of " + commandNames()}
	}
	name := args[0]
	if isHelpArg(name) {
		if len(args) > 1 {
			topic := args[1]
			if subs := subcommands(topic); len(subs) > 0 {
				if len(args) < 3 {
					return Config{}, &helpRequest{groupHelp(topic)}
				}
				topic += " " + args[2]
			}
			if c, ok := lookupCommand(topic); ok {
				return Config{}, &helpRequest{commandHelp(c, getenv)}
			}
		}
		return Config{}, &helpRequest{topHelp()}
	}
	if subs := subcommands(name); len(subs) > 0 {
		// A two-word command: "audit verify --db FILE".
		want := "want dlqdash " + name + " <" + strings.Join(subs, "|") + "> [flags]"
		switch {
		case len(args) < 2:
			return Config{}, &usageError{msg: "missing " + name + " subcommand: " + want, command: name}
		case isHelpArg(args[1]):
			return Config{}, &helpRequest{groupHelp(name)}
		case strings.HasPrefix(args[1], "-"):
			return Config{}, &usageError{msg: fmt.Sprintf("flag %s given before the %s subcommand: %s", strings.SplitN(args[1], "=", 2)[0], name, want), command: name}
		}
		if _, ok := lookupCommand(name + " " + args[1]); !ok {
			return Config{}, &usageError{msg: fmt.Sprintf("unknown %s subcommand %q: want %s", name, args[1], orList(subs)), command: name}
		}
		name, args = name+" "+args[1], args[1:]
	}
	c, ok := lookupCommand(name)
	if !ok {
		if strings.HasPrefix(name, "-") {
			return Config{}, &usageError{msg: fmt.Sprintf("flag %s given before the command: want dlqdash <command> [flags]", strings.SplitN(name, "=", 2)[0])}
		}
		return Config{}, &usageError{msg: fmt.Sprintf("unknown command %q: want one of %s", name, commandNames())}
	}
	bad := func(format string, a ...any) error {
		return &usageError{msg: fmt.Sprintf(format, a...), command: c.name}
	}

	f := newFlagSet(c, getenv)
	if err := f.fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, &helpRequest{commandHelp(c, getenv)}
		}
		// The flag package's messages name the flag, never its value.
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
			msg = "unknown flag --" + strings.TrimLeft(name, "-")
		}
		return Config{}, bad("%s", msg)
	}
	if f.envErr != "" {
		return Config{}, bad("%s", f.envErr)
	}
	if n := f.fs.NArg(); n > 0 {
		// Not echoed: a pasted connection string would land here.
		return Config{}, bad("%s takes no arguments, got %d (secrets such as the connection string go in %s)", c.name, n, envConnectionString)
	}

	cfg := Config{Command: c.name}
	v := func(name string) string { return *f.values[name] }

	if _, ok := f.values["log-level"]; ok {
		if err := cfg.LogLevel.UnmarshalText([]byte(v("log-level"))); err != nil {
			return Config{}, bad("invalid log level %q from %s: want debug, info, warn or error", v("log-level"), f.source("log-level"))
		}
		switch cfg.LogFormat = strings.ToLower(v("log-format")); cfg.LogFormat {
		case "text", "json":
		default:
			return Config{}, bad("invalid log format %q from %s: want text or json", v("log-format"), f.source("log-format"))
		}
	}

	checkAddr := func(name string) (string, error) {
		a := v(name)
		if err := validateAddr(a); err != nil {
			return "", bad("invalid address %q from %s: %v", a, f.source(name), err)
		}
		return a, nil
	}
	var err error
	switch c.name {
	case "demo", "serve":
		if cfg.Addr, err = checkAddr("addr"); err != nil {
			return Config{}, err
		}
		if cfg.DB = strings.TrimSpace(v("db")); cfg.DB == "" {
			return Config{}, bad("empty database path from %s", f.source("db"))
		}
		if cfg.Poll, err = time.ParseDuration(v("poll")); err != nil || cfg.Poll < 100*time.Millisecond || cfg.Poll > time.Hour {
			return Config{}, bad("invalid poll interval %q from %s: want a duration from 100ms to 1h, e.g. 1s", v("poll"), f.source("poll"))
		}
		if cfg.Retention, err = parseRetention(v("retention")); err != nil {
			return Config{}, bad("invalid retention %q from %s: %v", v("retention"), f.source("retention"), err)
		}
		if cfg.OrphanAfter, err = time.ParseDuration(v("orphan-after")); err != nil || cfg.OrphanAfter < time.Minute {
			return Config{}, bad("invalid orphan-after %q from %s: want a duration of at least 1m, e.g. 24h", v("orphan-after"), f.source("orphan-after"))
		}
		if cfg.PoisonCap, err = strconv.Atoi(v("poison-cap")); err != nil || cfg.PoisonCap < 1 || cfg.PoisonCap > 1000 {
			return Config{}, bad("invalid poison cap %q from %s: want a whole number from 1 to 1000", v("poison-cap"), f.source("poison-cap"))
		}
		if strings.TrimSpace(v("metrics-addr")) != "" {
			if cfg.MetricsAddr, err = checkAddr("metrics-addr"); err != nil {
				return Config{}, err
			}
			if _, port, _ := net.SplitHostPort(cfg.MetricsAddr); cfg.MetricsAddr == cfg.Addr && port != "0" {
				return Config{}, bad("metrics address %q from %s is the dashboard's own (%s): give another port, or leave it empty to serve /metrics on the dashboard's listener",
					cfg.MetricsAddr, f.source("metrics-addr"), f.source("addr"))
			}
		}
		if cfg.Auth, err = parseAuth(f, c.name, cfg.Addr, getenv, bad); err != nil {
			return Config{}, err
		}
		if c.name == "serve" {
			if a := strings.TrimSpace(v("admin-endpoint")); a != "" {
				u, err := url.Parse(a)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
					return Config{}, bad("invalid admin endpoint %q from %s: want http(s)://host[:port]", a, f.source("admin-endpoint"))
				}
				cfg.AdminEndpoint = a
			}
		}
	case "emulator":
		if cfg.Emulator.AMQPAddr, err = checkAddr("amqp-addr"); err != nil {
			return Config{}, err
		}
		if cfg.Emulator.AdminAddr, err = checkAddr("admin-addr"); err != nil {
			return Config{}, err
		}
		cfg.Emulator.ConfigPath = v("config")
		cfg.Emulator.KeyName = cmp.Or(strings.TrimSpace(getenv(envEmulatorKeyName)), emulator.DefaultKeyName)
		cfg.Emulator.Key = secret(cmp.Or(getenv(envEmulatorKey), emulator.DefaultKey))
	case "healthcheck":
		u := v("url")
		if u == "" {
			addr := getenv(envAddr)
			if addr == "" {
				addr = defaultAddr
			}
			if err := validateAddr(addr); err != nil {
				return Config{}, bad("invalid address %q from %s: %v", addr, envAddr, err)
			}
			u = healthURL(addr)
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return Config{}, bad("invalid URL %q from %s: want http://host:port/healthz", u, f.source("url"))
		}
		cfg.HealthcheckURL = u
	case "export":
		if cfg.DB = strings.TrimSpace(v("db")); cfg.DB == "" {
			return Config{}, bad("empty database path from %s", f.source("db"))
		}
		if cfg.Export, err = parseExport(f, bad); err != nil {
			return Config{}, err
		}
	case "token create", "token list", "token revoke":
		if cfg.DB = strings.TrimSpace(v("db")); cfg.DB == "" {
			return Config{}, bad("empty database path from %s", f.source("db"))
		}
		if cfg.Token, err = parseToken(c.name, f, bad); err != nil {
			return Config{}, err
		}
	case "audit verify", "audit export":
		if cfg.DB = strings.TrimSpace(v("db")); cfg.DB == "" {
			return Config{}, bad("empty database path from %s", f.source("db"))
		}
		if c.name == "audit export" {
			if cfg.AuditExport, err = parseAuditExport(f, bad); err != nil {
				return Config{}, err
			}
		}
	}

	if c.name == "serve" {
		raw := getenv(envConnectionString)
		if strings.TrimSpace(raw) == "" {
			return Config{}, bad("%s is not set: serve needs the namespace's connection string (%s)", envConnectionString, connstr.Shape)
		}
		cs, err := connstr.Parse(raw)
		if err != nil {
			return Config{}, bad("%s %v", envConnectionString, err)
		}
		cfg.ConnectionString = cs
	}
	return cfg, nil
}
