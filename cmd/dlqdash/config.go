package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// Environment variables. Flags win over them; they win over defaults.
const (
	envAddr             = "DLQDASH_ADDR"
	envDB               = "DLQDASH_DB"
	envDatabaseURL      = "DLQDASH_DATABASE_URL"
	envLogLevel         = "DLQDASH_LOG_LEVEL"
	envLogFormat        = "DLQDASH_LOG_FORMAT"
	envConnectionString = "SERVICEBUS_CONNECTION_STRING"
	envEmulatorAMQPAddr = "DLQDASH_EMULATOR_AMQP_ADDR"
	envEmulatorAdmin    = "DLQDASH_EMULATOR_ADMIN_ADDR"
	envEmulatorConfig   = "DLQDASH_EMULATOR_CONFIG"
	envEmulatorKeyName  = "DLQDASH_EMULATOR_KEY_NAME"
	envEmulatorKey      = "DLQDASH_EMULATOR_KEY"
	envEmulatorSASRules = "DLQDASH_EMULATOR_SAS_RULES"
	envHealthcheckURL   = "DLQDASH_HEALTHCHECK_URL"
	envPoll             = "DLQDASH_POLL"
	envSBTimeout        = "DLQDASH_SERVICEBUS_TIMEOUT"
	envAdminEndpoint    = "DLQDASH_ADMIN_ENDPOINT"
	envSBTransport      = "DLQDASH_SERVICEBUS_TRANSPORT"
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
	defaultSBTimeout    = "10s"
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
	// ReplicaID names this process among the replicas sharing its
	// database (--replica-id; config_replica.go).
	ReplicaID string

	// demo and serve: the catalog
	Poll time.Duration // how often entity counts are read
	// ServiceBusTimeout is the deadline of each Service Bus call (send,
	// receive, settle, peek, admin read, link attach): servicebus.Timeouts.
	ServiceBusTimeout time.Duration
	Retention         time.Duration // how long messages that left the broker are kept; 0 keeps them forever
	// OrphanAfter is how long a message may stay deferred before the
	// inventory page flags it as a deferred orphan.
	OrphanAfter time.Duration
	// PoisonCap: a message lineage replayed this many times is not
	// replayed again without allow_poison.
	PoisonCap int

	// demo and serve: sign-in and roles (authconfig.go)
	Auth AuthConfig
	// demo and serve: the HTTP edge (httpconfig.go)
	HTTP HTTPConfig
	// demo and serve: alerts (config_alerts.go)
	Alerts AlertsConfig

	// serve
	ConnectionString connstr.ConnectionString
	AdminEndpoint    string // admin HTTP base URL; empty for the default
	// ServiceBusTransport is servicebus.Options.Transport: amqp or
	// websockets.
	ServiceBusTransport string
	// ConfigFile is --config: the file that lists the namespaces instead
	// of ConnectionString and AdminEndpoint (which are then empty).
	// loadConfigFile reads it into Namespaces and Access.
	ConfigFile string
	Namespaces []NamespaceConfig
	// Access is what each identity may do in each namespace: the sign-in
	// Mapping and the file's access rules (none without --config).
	Access auth.Policy

	// emulator
	Emulator EmulatorConfig

	// healthcheck
	HealthcheckURL string

	// export (DB is its database)
	Export ExportConfig

	// audit export and audit verify (DB is their database)
	AuditExport AuditExportConfig
	AuditVerify AuditVerifyConfig

	// demo, serve, token create and revoke, audit verify: the audit key
	// (auditkey.go): a file, else the key itself from DLQDASH_AUDIT_KEY,
	// else the file beside the database.
	AuditKeyFile string
	AuditKey     secret

	// token create, list and revoke (DB is their database)
	Token TokenConfig

	// store copy: DB is the catalog copied (--from), CopyTo the PostgreSQL
	// database it is copied into (--to).
	CopyTo string
}

// EmulatorSASRule is a namespace shared access rule of the emulator besides
// its main key: a key name, its rights (Manage, Send, Listen) and its key.
type EmulatorSASRule struct {
	KeyName string
	Rights  []string
	Key     secret
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
	// SASRules are further keys with fewer rights (DLQDASH_EMULATOR_SAS_RULES).
	SASRules []EmulatorSASRule

	// Namespaces from --namespace; empty serves one namespace as above.
	Namespaces []EmulatorNamespace
	// TLS: a certificate and key to serve, and/or where to write the
	// certificate clients trust (alone: a generated one). All empty: plain.
	TLSCert, TLSKey, TLSCAOut string
	// The key jwt tokens must be signed with: a file, or the key itself
	// (DLQDASH_EMULATOR_JWT_KEY). Both empty: jwt tokens are refused.
	JWTKeyFile string
	JWTKey     secret
}

// parseConfig turns the command line and environment into a Config. It is
// pure: it reads nothing but its arguments and prints nothing. Errors are
// *usageError (one line saying what to fix) or *helpRequest.
//
// It finds the command (resolveCommand), parses its flags (parseFlags), and
// hands them to the command's own parser, which checks them.
func parseConfig(args []string, getenv func(string) string) (Config, error) {
	c, flagArgs, err := resolveCommand(args, getenv)
	if err != nil {
		return Config{}, err
	}
	bad := func(format string, a ...any) error {
		return &usageError{msg: fmt.Sprintf(format, a...), command: c.name}
	}
	f, err := parseFlags(c, flagArgs, getenv, bad)
	if err != nil {
		return Config{}, err
	}

	cfg := Config{Command: c.name}
	if err := parseLogConfig(&cfg, f, bad); err != nil {
		return Config{}, err
	}
	switch c.name {
	case "demo", "serve":
		err = parseDashboardConfig(&cfg, f, getenv, bad)
	case "emulator":
		err = parseEmulatorConfig(&cfg, f, getenv, bad)
	case "healthcheck":
		err = parseHealthcheckConfig(&cfg, f, getenv, bad)
	case "export":
		if cfg.DB, err = f.db(bad); err != nil {
			return Config{}, err
		}
		if cfg.Export, err = parseExport(f, bad); err != nil {
			return Config{}, err
		}
	case "token create", "token list", "token revoke":
		err = parseTokenConfig(&cfg, f, bad)
	case "audit verify", "audit export", "audit head":
		err = parseAuditConfig(&cfg, f, bad)
	case "store copy":
		err = parseStoreCopy(&cfg, f, bad)
	}
	if err != nil {
		return Config{}, err
	}
	if p, ok := f.values["audit-key-file"]; ok {
		cfg.AuditKeyFile = strings.TrimSpace(*p)
		cfg.AuditKey = secret(strings.TrimSpace(getenv(envAuditKey)))
		if cfg.AuditKeyFile != "" && cfg.AuditKey != "" {
			return Config{}, bad("both %s and --audit-key-file are set: give the audit key one way", envAuditKey)
		}
	}
	return cfg, nil
}

// resolveCommand finds the command args name (one word, or a group and a
// subcommand: "audit verify") and returns it with the arguments left for its
// flags. A request for help anywhere before the flags is a *helpRequest.
func resolveCommand(args []string, getenv func(string) string) (command, []string, error) {
	if len(args) == 0 {
		return command{}, nil, &usageError{msg: "missing command: want one of " + commandNames()}
	}
	name := args[0]
	if isHelpArg(name) {
		if len(args) > 1 {
			topic := args[1]
			if subs := subcommands(topic); len(subs) > 0 {
				if len(args) < 3 {
					return command{}, nil, &helpRequest{groupHelp(topic)}
				}
				topic += " " + args[2]
			}
			if c, ok := lookupCommand(topic); ok {
				return command{}, nil, &helpRequest{commandHelp(c, getenv)}
			}
		}
		return command{}, nil, &helpRequest{topHelp()}
	}
	if subs := subcommands(name); len(subs) > 0 {
		// A two-word command: "audit verify --db FILE".
		want := "want dlqdash " + name + " <" + strings.Join(subs, "|") + "> [flags]"
		switch {
		case len(args) < 2:
			return command{}, nil, &usageError{msg: "missing " + name + " subcommand: " + want, command: name}
		case isHelpArg(args[1]):
			return command{}, nil, &helpRequest{groupHelp(name)}
		case strings.HasPrefix(args[1], "-"):
			return command{}, nil, &usageError{msg: fmt.Sprintf("flag %s given before the %s subcommand: %s", strings.SplitN(args[1], "=", 2)[0], name, want), command: name}
		}
		if _, ok := lookupCommand(name + " " + args[1]); !ok {
			return command{}, nil, &usageError{msg: fmt.Sprintf("unknown %s subcommand %q: want %s", name, args[1], orList(subs)), command: name}
		}
		name, args = name+" "+args[1], args[1:]
	}
	c, ok := lookupCommand(name)
	if !ok {
		if strings.HasPrefix(name, "-") {
			return command{}, nil, &usageError{msg: fmt.Sprintf("flag %s given before the command: want dlqdash <command> [flags]", strings.SplitN(name, "=", 2)[0])}
		}
		return command{}, nil, &usageError{msg: fmt.Sprintf("unknown command %q: want one of %s", name, commandNames())}
	}
	return c, args[1:], nil
}

// parseFlags parses the command's flags (each defaulting to its environment
// variable). Commands take flags only: a stray argument is refused without
// being echoed, since a pasted connection string would land there.
func parseFlags(c command, args []string, getenv func(string) string, bad func(string, ...any) error) (*flagSet, error) {
	f := newFlagSet(c, getenv)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &helpRequest{commandHelp(c, getenv)}
		}
		// The flag package's messages name the flag, never its value.
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
			msg = "unknown flag --" + strings.TrimLeft(name, "-")
		}
		return nil, bad("%s", msg)
	}
	if f.envErr != "" {
		return nil, bad("%s", f.envErr)
	}
	if n := f.fs.NArg(); n > 0 {
		// Not echoed: a pasted connection string would land here.
		return nil, bad("%s takes no arguments, got %d (secrets such as the connection string go in %s)", c.name, n, envConnectionString)
	}
	return f, nil
}

// parseLogConfig reads the log flags of the commands that have them.
func parseLogConfig(cfg *Config, f *flagSet, bad func(string, ...any) error) error {
	if _, ok := f.values["log-level"]; !ok {
		return nil
	}
	v := f.get
	if err := cfg.LogLevel.UnmarshalText([]byte(v("log-level"))); err != nil {
		return bad("invalid log level %q from %s: want debug, info, warn or error", v("log-level"), f.source("log-level"))
	}
	switch cfg.LogFormat = strings.ToLower(v("log-format")); cfg.LogFormat {
	case "text", "json":
	default:
		return bad("invalid log format %q from %s: want text or json", v("log-format"), f.source("log-format"))
	}
	return nil
}

// parseTokenConfig reads the flags of token create, list and revoke (DB is
// their database).
func parseTokenConfig(cfg *Config, f *flagSet, bad func(string, ...any) error) error {
	var err error
	if cfg.DB, err = f.db(bad); err != nil {
		return err
	}
	cfg.Token, err = parseToken(cfg.Command, f, bad)
	return err
}

// parseAuditConfig reads the flags of audit verify and audit export (DB is
// their database; verify needs nothing else).
func parseAuditConfig(cfg *Config, f *flagSet, bad func(string, ...any) error) error {
	var err error
	if cfg.DB, err = f.db(bad); err != nil {
		return err
	}
	switch cfg.Command {
	case "audit export":
		cfg.AuditExport, err = parseAuditExport(f, bad)
	case "audit verify":
		cfg.AuditVerify, err = parseAuditVerify(f, bad)
	}
	return err
}
