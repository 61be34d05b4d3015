package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/config"
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

// usageError is a bad command line: run prints it as one line and exits 2.
type usageError struct {
	msg     string
	command string // for the hint; empty for the top level
}

func (e *usageError) Error() string {
	return e.msg + "; run '" + strings.TrimSpace("dlqdash "+e.command) + " -h' for help"
}

// helpRequest is returned when -h was asked for: run prints the text to
// stdout and exits 0.
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }

type command struct {
	name    string
	summary string
	flags   func(*flagSet)
}

var commands = []command{
	{"demo", "run the dashboard against the embedded Service Bus emulator with seeded, failing traffic", dashboardFlags},
	{"serve", "run the dashboard against the namespace in " + envConnectionString, dashboardFlags},
	{"emulator", "run the Service Bus emulator alone", emulatorFlags},
	{"healthcheck", "GET a running dashboard's /healthz; exit 0 if it answers 200 (for container health checks)", healthcheckFlags},
	{"export", "write cataloged messages to stdout as JSON lines or CSV (safe while serve runs on the same database)", exportFlags},
	// Two-word commands: a group name, then the subcommand.
	{"audit verify", "check the audit trail's hash chain; exit 0 if intact, 1 naming the first entry that is not", auditVerifyFlags},
	{"audit export", "write the audit trail to stdout as JSON lines or CSV (safe while serve runs on the same database)", auditExportFlags},
	{"token create", "create an API token (Authorization: Bearer) with a role; prints it once, alone on the last line", tokenCreateFlags},
	{"token list", "list the API tokens: name, role, state, created, expires, last used", tokenListFlags},
	{"token revoke", "revoke an API token by name; it stops working at its next request", tokenRevokeFlags},
}

// subcommands lists the subcommands of a two-word command group ("audit"):
// "verify", "export"; none for other names.
func subcommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if g, sub, ok := strings.Cut(c.name, " "); ok && g == group {
			subs = append(subs, sub)
		}
	}
	return subs
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func isHelpArg(a string) bool {
	switch a {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// commandNames lists the commands for error messages: "a, b or c".
func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return orList(names)
}

// flagSet is a flag.FlagSet whose string flags default to an environment
// variable, and which remembers them for the help text.
type flagSet struct {
	fs     *flag.FlagSet
	getenv func(string) string
	specs  []flagSpec
	values map[string]*string
	bools  map[string]*bool
	// envErr is the first environment variable that could not be read
	// (boolEnv); parseConfig reports it.
	envErr string
}

type flagSpec struct {
	name, env, def, meaning string
}

func (f *flagSet) str(name, env, def, meaning string) {
	v := def
	if env != "" {
		if e := f.getenv(env); e != "" {
			v = e
		}
	}
	f.values[name] = f.fs.String(name, v, meaning)
	f.specs = append(f.specs, flagSpec{name, env, def, meaning})
}

// source names where a value came from, for error messages.
func (f *flagSet) source(name string) string {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	for _, s := range f.specs {
		if s.name == name && !set && s.env != "" && f.getenv(s.env) != "" {
			return s.env
		}
	}
	return "--" + name
}

func logFlags(f *flagSet) {
	f.str("log-level", envLogLevel, defaultLogLevel, "log level: debug, info, warn or error")
	f.str("log-format", envLogFormat, defaultLogFormat, "log format: text or json")
}

func dashboardFlags(f *flagSet) {
	f.str("addr", envAddr, defaultAddr, "address the dashboard listens on (host:port; port 0 picks a free port)")
	f.str("db", envDB, defaultDB, "SQLite database file (created if missing)")
	f.str("poll", envPoll, defaultPoll, "how often entity counts are read (a Go duration: 500ms, 1s, 5s)")
	f.str("retention", envRetention, defaultRetention, "how long messages that left Service Bus stay in the catalog (30d, 72h; 0 keeps them forever)")
	f.str("orphan-after", envOrphanAfter, defaultOrphanAfter, "how long a message may stay deferred before the inventory flags it as a deferred orphan (a Go duration: 24h, 90m)")
	f.str("poison-cap", envPoisonCap, defaultPoisonCap, "how many times a message lineage may be replayed before replays skip it as poison (unless allow_poison)")
	f.str("metrics-addr", envMetricsAddr, "", "address of a listener of its own for GET /metrics (host:port); empty serves /metrics on --addr")
	if f.fs.Name() == "dlqdash serve" {
		f.str("admin-endpoint", envAdminEndpoint, "", "admin (HTTP/ATOM) API base URL (default https://<namespace>/, or http://<endpoint host>:5300 with UseDevelopmentEmulator=true)")
	}
	authFlags(f)
	logFlags(f)
}

func emulatorFlags(f *flagSet) {
	f.str("amqp-addr", envEmulatorAMQPAddr, defaultEmulatorAMQP, "address the emulator's AMQP 1.0 endpoint listens on")
	f.str("admin-addr", envEmulatorAdmin, defaultEmulatorAdm, "address the emulator's admin HTTP endpoint listens on")
	f.str("config", envEmulatorConfig, "", "entities to create, in the Microsoft Service Bus emulator's Config.json format")
	logFlags(f)
}

func healthcheckFlags(f *flagSet) {
	f.str("url", envHealthcheckURL, "", "health URL to GET (default: /healthz on "+envAddr+", or "+defaultAddr+")")
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

func newFlagSet(c command, getenv func(string) string) *flagSet {
	fs := flag.NewFlagSet("dlqdash "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &flagSet{fs: fs, getenv: getenv, values: map[string]*string{}, bools: map[string]*bool{}}
	c.flags(f)
	return f
}

// parseRetention reads a retention: a Go duration, or a whole number of
// days ("30d"); "0" keeps messages forever.
func parseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 36500 {
			return 0, errors.New("want a number of days such as 30d, a duration such as 72h, or 0 to keep forever")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Minute {
		return 0, errors.New("want a number of days such as 30d, a duration of at least 1m such as 72h, or 0 to keep forever")
	}
	return d, nil
}

// validateAddr accepts host:port with a numeric port (0 means any free port)
// and an optional host (":8080" listens on every interface).
func validateAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("want host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("port must be a number from 0 to 65535")
	}
	if strings.ContainsAny(host, " /") {
		return errors.New("want host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	return nil
}

// healthURL is the /healthz URL of a dashboard listening on addr, reached
// from the same machine.
func healthURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}

func topHelp() string {
	var b strings.Builder
	b.WriteString("dlqdash: triage and replay Azure Service Bus dead-lettered messages.\n\n")
	b.WriteString("Usage:\n  dlqdash <command> [flags]\n\nCommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nRun 'dlqdash <command> -h' for a command's flags.\n")
	return b.String()
}

// groupHelp is the help of a two-word command group: its subcommands.
func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dlqdash %s: the %s subcommands.\n\nUsage:\n  dlqdash %s <%s> [flags]\n\nSubcommands:\n",
		group, group, group, strings.Join(subcommands(group), "|"))
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			fmt.Fprintf(&b, "  %-8s %s\n", sub, c.summary)
		}
	}
	fmt.Fprintf(&b, "\nRun 'dlqdash %s <subcommand> -h' for a subcommand's flags.\n", group)
	return b.String()
}

func commandHelp(c command, getenv func(string) string) string {
	f := newFlagSet(c, getenv)
	var b strings.Builder
	fmt.Fprintf(&b, "dlqdash %s: %s.\n\nUsage:\n  dlqdash %s [flags]\n\nFlags (each defaults to its environment variable, then to the default shown):\n", c.name, c.summary, c.name)
	for _, s := range f.specs {
		fmt.Fprintf(&b, "  --%s\n        %s", s.name, s.meaning)
		switch {
		case s.env != "" && s.def != "":
			fmt.Fprintf(&b, "\n        env %s, default %s", s.env, s.def)
		case s.env != "":
			fmt.Fprintf(&b, "\n        env %s", s.env)
		case s.def != "":
			fmt.Fprintf(&b, "\n        default %s", s.def)
		}
		b.WriteString("\n")
	}
	if c.name == "emulator" {
		fmt.Fprintf(&b, "\nEnvironment:\n  %s, %s\n        the SAS key name and key clients must sign with (default %s and\n        %s, the well-known key of Microsoft's emulator). Only from the environment.\n",
			envEmulatorKeyName, envEmulatorKey, emulator.DefaultKeyName, emulator.DefaultKey)
		fmt.Fprintf(&b, "\nEntities:\n%s\n", indent(config.DefaultsHelp(), "  "))
		b.WriteString(faultInjectionHelp)
	}
	if c.name == "serve" {
		fmt.Fprintf(&b, "\nEnvironment:\n  %s (required)\n        the namespace's connection string, e.g.\n        %s\n        Only from the environment, never a flag; never logged.\n", envConnectionString, connstr.Shape)
	}
	if c.name == "serve" || c.name == "demo" {
		b.WriteString(authHelp)
	}
	return b.String()
}

// faultInjectionHelp ends `dlqdash emulator -h`: the admin listener's
// /$emulator/faults and /$emulator/stats endpoints
// (emulator/atom/faults.go, stats.go).
const faultInjectionHelp = `
Fault injection (admin listener; each request needs a SharedAccessSignature
Authorization header like every admin request, 204 on success):
  POST   /$emulator/faults/server-busy?entity=<path>&ops=<n>&for=<duration>
        the next n operations on the entity (send, receive attach, peek,
        receive-deferred, schedule; not settlement), and all within the span,
        fail with com.microsoft:server-busy (management: 503)
  POST   /$emulator/faults/expire-locks?entity=<path>
        every message lock held on the entity expires now
  POST   /$emulator/faults/drop-connections
        every AMQP connection is closed with amqp:connection:forced
  POST   /$emulator/faults/latency?d=<duration>
        every AMQP reply and delivery is delayed by d (0 turns it off)
  DELETE /$emulator/faults
        clears server-busy and latency
  GET    /$emulator/stats  (DELETE resets it, 204)
        operation counters as JSON, in total and per entity path as addressed
        (lower-cased): {"totals": {"peek": 12, "peeked_messages": 3000,
        "receive": 40, "send": 42, "settle": 40, "management": 15, "admin": 3,
        "management_ops": {"peek-message": 12, "renew-lock": 0, ...}},
        "entities": {"orders/$deadletterqueue": {"peek": 12, ...}}}; peek counts
        $management peek requests, peeked_messages the messages they returned
  Any SAS token generator works (the signature is HMAC-SHA256 with the key over
  "<sr>\n<se>"). With the default key, in a shell:
    sr=localhost; se=$(( $(date +%s) + 3600 ))
    sig=$(printf '%s\n%s' "$sr" "$se" | openssl dgst -sha256 -hmac SAS_KEY_VALUE -binary | base64 | sed 's/+/%2B/g;s|/|%2F|g;s/=/%3D/g')
    auth="SharedAccessSignature sr=$sr&sig=$sig&se=$se&skn=RootManageSharedAccessKey"
    curl -X POST -H "Authorization: $auth" 'http://127.0.0.1:5300/$emulator/faults/server-busy?entity=queue.1&ops=3'
    curl -X DELETE -H "Authorization: $auth" 'http://127.0.0.1:5300/$emulator/faults'
    curl -H "Authorization: $auth" 'http://127.0.0.1:5300/$emulator/stats'
`

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return strings.TrimRight(b.String(), "\n")
}
