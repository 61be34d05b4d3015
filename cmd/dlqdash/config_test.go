package main

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/web"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

const goodConnStr = "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   func(string) string
		check func(t *testing.T, c Config)
	}{
		{"demo defaults", []string{"demo"}, env(), func(t *testing.T, c Config) {
			want := Config{Command: "demo", Addr: "127.0.0.1:8080", DB: "./dlqdash.db", LogLevel: slog.LevelInfo, LogFormat: "text",
				Poll: time.Second, ServiceBusTimeout: 10 * time.Second, Retention: 30 * 24 * time.Hour, OrphanAfter: 24 * time.Hour, PoisonCap: 3,
				Auth:   AuthConfig{Mode: auth.ModeNone, ProxyHeaders: web.DefaultProxyHeaders, SessionIdleTimeout: 2 * time.Hour, SessionMaxAge: 12 * time.Hour},
				HTTP:   HTTPConfig{AllowedHosts: []string{"localhost", "127.0.0.1", "::1"}, MaxLiveConnections: 500, MaxLivePerActor: 50},
				Alerts: AlertsConfig{RepeatEvery: 15 * time.Minute}}
			// The default replica id is the host name and six random hex
			// digits.
			if i := strings.LastIndexByte(c.ReplicaID, '-'); i < 1 || len(c.ReplicaID)-i != 7 || !validReplicaID(c.ReplicaID) {
				t.Errorf("default replica id %q, want HOST-xxxxxx", c.ReplicaID)
			}
			c.ReplicaID = ""
			if !reflect.DeepEqual(c, want) {
				t.Errorf("got %+v, want %+v", c, want)
			}
		}},
		{"replica id from the environment", []string{"demo"}, env(envReplicaID, "pod-7.eu:a_b"), func(t *testing.T, c Config) {
			if c.ReplicaID != "pod-7.eu:a_b" {
				t.Errorf("ReplicaID = %q", c.ReplicaID)
			}
		}},
		{"replica id flag wins", []string{"serve", "--replica-id", "dlqdash-2"}, env(envConnectionString, goodConnStr, envReplicaID, "x"), func(t *testing.T, c Config) {
			if c.ReplicaID != "dlqdash-2" {
				t.Errorf("ReplicaID = %q", c.ReplicaID)
			}
		}},
		{"Service Bus timeout from the flag", []string{"serve", "--servicebus-timeout", "45s"}, env(envConnectionString, goodConnStr), func(t *testing.T, c Config) {
			if c.ServiceBusTimeout != 45*time.Second {
				t.Errorf("ServiceBusTimeout = %s, want 45s", c.ServiceBusTimeout)
			}
		}},
		{"env sets defaults", []string{"demo"}, env(envAddr, ":9090", envDB, "/data/x.db", envLogLevel, "debug", envLogFormat, "json"), func(t *testing.T, c Config) {
			if c.Addr != ":9090" || c.DB != "/data/x.db" || c.LogLevel != slog.LevelDebug || c.LogFormat != "json" {
				t.Errorf("got %+v", c)
			}
		}},
		{"DLQDASH_DATABASE_URL names PostgreSQL", []string{"demo"}, env(envDatabaseURL, "postgres://dash@db/dlqdash"), func(t *testing.T, c Config) {
			if c.DB != "postgres://dash@db/dlqdash" {
				t.Errorf("DB = %q", c.DB)
			}
		}},
		{"--db wins over DLQDASH_DATABASE_URL", []string{"export", "--db", "x.db"}, env(envDatabaseURL, "postgres://dash@db/dlqdash"), func(t *testing.T, c Config) {
			if c.DB != "x.db" {
				t.Errorf("DB = %q", c.DB)
			}
		}},
		{"flags win over env", []string{"demo", "--addr", "127.0.0.1:0", "-db=flag.db", "--log-level=warn"},
			env(envAddr, ":9090", envDB, "/data/x.db", envLogLevel, "debug"), func(t *testing.T, c Config) {
				if c.Addr != "127.0.0.1:0" || c.DB != "flag.db" || c.LogLevel != slog.LevelWarn {
					t.Errorf("got %+v", c)
				}
			}},
		{"serve with connection string", []string{"serve", "--addr", ":8080", "--allow-anonymous-admin"}, env(envConnectionString, goodConnStr), func(t *testing.T, c Config) {
			if c.Command != "serve" || c.Addr != ":8080" || c.ConnectionString.Host != "contoso.servicebus.windows.net" {
				t.Errorf("got %+v", c)
			}
			if c.ConnectionString.Raw() != goodConnStr {
				t.Errorf("raw connection string not kept")
			}
		}},
		{"catalog flags", []string{"serve", "--poll", "250ms", "--retention", "7d", "--admin-endpoint", "http://127.0.0.1:5300"},
			env(envConnectionString, goodConnStr), func(t *testing.T, c Config) {
				if c.Poll != 250*time.Millisecond || c.Retention != 7*24*time.Hour || c.AdminEndpoint != "http://127.0.0.1:5300" {
					t.Errorf("got %+v", c)
				}
			}},
		{"Service Bus transport: amqp by default, websockets from the flag or the environment", []string{"serve"}, env(envConnectionString, goodConnStr), func(t *testing.T, c Config) {
			if c.ServiceBusTransport != "amqp" {
				t.Errorf("ServiceBusTransport = %q, want amqp", c.ServiceBusTransport)
			}
			for _, args := range [][]string{{"serve", "--servicebus-transport", "websockets"}, {"serve", "--servicebus-transport=WebSockets"}} {
				if c, err := parseConfig(args, env(envConnectionString, goodConnStr)); err != nil || c.ServiceBusTransport != "websockets" {
					t.Errorf("%v: %q, %v", args, c.ServiceBusTransport, err)
				}
			}
			if c, err := parseConfig([]string{"serve"}, env(envConnectionString, goodConnStr, envSBTransport, "websockets")); err != nil || c.ServiceBusTransport != "websockets" {
				t.Errorf("from %s: %q, %v", envSBTransport, c.ServiceBusTransport, err)
			}
		}},
		{"orphan-after from the environment", []string{"serve"}, env(envConnectionString, goodConnStr, envOrphanAfter, "90m"), func(t *testing.T, c Config) {
			if c.OrphanAfter != 90*time.Minute {
				t.Errorf("OrphanAfter = %v", c.OrphanAfter)
			}
		}},
		{"catalog env, retention as a duration and forever", []string{"demo"}, env(envPoll, "5s", envRetention, "0"), func(t *testing.T, c Config) {
			if c.Poll != 5*time.Second || c.Retention != 0 {
				t.Errorf("got %+v", c)
			}
		}},
		{"metrics address flag", []string{"serve", "--metrics-addr", ":9100"}, env(envConnectionString, goodConnStr), func(t *testing.T, c Config) {
			if c.MetricsAddr != ":9100" {
				t.Errorf("MetricsAddr = %q", c.MetricsAddr)
			}
		}},
		{"metrics address from the environment", []string{"demo"}, env(envMetricsAddr, "127.0.0.1:9100"), func(t *testing.T, c Config) {
			if c.MetricsAddr != "127.0.0.1:9100" {
				t.Errorf("MetricsAddr = %q", c.MetricsAddr)
			}
		}},
		{"both on free ports", []string{"demo", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, env(), func(t *testing.T, c Config) {
			if c.MetricsAddr != "127.0.0.1:0" {
				t.Errorf("MetricsAddr = %q", c.MetricsAddr)
			}
		}},
		{"emulator defaults", []string{"emulator"}, env(), func(t *testing.T, c Config) {
			want := EmulatorConfig{AMQPAddr: "127.0.0.1:5672", AdminAddr: "127.0.0.1:5300", KeyName: "RootManageSharedAccessKey", Key: "SAS_KEY_VALUE"}
			if c.Command != "emulator" || !reflect.DeepEqual(c.Emulator, want) {
				t.Errorf("got %+v", c)
			}
		}},
		{"emulator env and flags", []string{"emulator", "--amqp-addr", ":5673", "--config", "flag.json"},
			env(envEmulatorAMQPAddr, ":1", envEmulatorAdmin, "0.0.0.0:5301", envEmulatorConfig, "env.json", envEmulatorKeyName, "ops", envEmulatorKey, "k3y"), func(t *testing.T, c Config) {
				want := EmulatorConfig{AMQPAddr: ":5673", AdminAddr: "0.0.0.0:5301", ConfigPath: "flag.json", KeyName: "ops", Key: "k3y"}
				if !reflect.DeepEqual(c.Emulator, want) {
					t.Errorf("got %+v, want %+v", c.Emulator, want)
				}
			}},
		{"healthcheck default URL follows DLQDASH_ADDR", []string{"healthcheck"}, env(envAddr, ":8080"), func(t *testing.T, c Config) {
			if c.HealthcheckURL != "http://127.0.0.1:8080/healthz" {
				t.Errorf("got %q", c.HealthcheckURL)
			}
		}},
		{"healthcheck default URL", []string{"healthcheck"}, env(), func(t *testing.T, c Config) {
			if c.HealthcheckURL != "http://127.0.0.1:8080/healthz" {
				t.Errorf("got %q", c.HealthcheckURL)
			}
		}},
		{"healthcheck on IPv6 any", []string{"healthcheck"}, env(envAddr, "[::]:8081"), func(t *testing.T, c Config) {
			if c.HealthcheckURL != "http://[::1]:8081/healthz" {
				t.Errorf("got %q", c.HealthcheckURL)
			}
		}},
		{"healthcheck URL flag", []string{"healthcheck", "--url", "http://10.0.0.1:1/healthz"}, env(), func(t *testing.T, c Config) {
			if c.HealthcheckURL != "http://10.0.0.1:1/healthz" {
				t.Errorf("got %q", c.HealthcheckURL)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.env)
			if err != nil {
				t.Fatalf("parseConfig(%q): %v", tt.args, err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  func(string) string
		want string // in the message
		hint string // command named in the help hint
	}{
		{"no command", nil, env(), "missing command", "dlqdash -h"},
		{"unknown command", []string{"replay"}, env(), `unknown command "replay"`, "dlqdash -h"},
		{"flag before command", []string{"--addr=:1", "demo"}, env(), "flag --addr given before the command", "dlqdash -h"},
		{"unknown flag", []string{"demo", "--bogus"}, env(), "unknown flag --bogus", "dlqdash demo -h"},
		{"bad address flag", []string{"demo", "--addr", "localhost"}, env(), `invalid address "localhost" from --addr`, "dlqdash demo -h"},
		{"bad address env", []string{"demo"}, env(envAddr, "8080"), `invalid address "8080" from DLQDASH_ADDR`, "dlqdash demo -h"},
		{"bad port", []string{"serve", "--addr", ":http"}, env(envConnectionString, goodConnStr), "port must be a number", "dlqdash serve -h"},
		{"port out of range", []string{"demo", "--addr", ":70000"}, env(), "port must be a number", "dlqdash demo -h"},
		{"flag without value", []string{"demo", "--addr"}, env(), "flag needs an argument", "dlqdash demo -h"},
		{"empty db", []string{"demo", "--db", " "}, env(), "empty database path from --db", "dlqdash demo -h"},
		{"two database variables", []string{"demo"}, env(envDB, "x.db", envDatabaseURL, "postgres://db/x"), "both DLQDASH_DB and DLQDASH_DATABASE_URL are set", "dlqdash demo -h"},
		{"database URL not PostgreSQL", []string{"demo"}, env(envDatabaseURL, "mysql://db/x"), "DLQDASH_DATABASE_URL must be a postgres:// or postgresql:// URL", "dlqdash demo -h"},
		{"bad log level", []string{"demo"}, env(envLogLevel, "loud"), `invalid log level "loud" from DLQDASH_LOG_LEVEL`, "dlqdash demo -h"},
		{"bad log format", []string{"demo", "--log-format", "xml"}, env(), `invalid log format "xml" from --log-format`, "dlqdash demo -h"},
		{"positional argument", []string{"serve", goodConnStr}, env(envConnectionString, goodConnStr), "takes no arguments", "dlqdash serve -h"},
		{"serve without connection string", []string{"serve"}, env(), "SERVICEBUS_CONNECTION_STRING is not set", "dlqdash serve -h"},
		{"serve with malformed connection string", []string{"serve"},
			env(envConnectionString, "Endpoint=https://contoso/;SharedAccessKeyName=k;SharedAccessKey="+testKey), "SERVICEBUS_CONNECTION_STRING has an Endpoint that is not an sb:// address", "dlqdash serve -h"},
		{"serve with key but no name", []string{"serve"},
			env(envConnectionString, "Endpoint=sb://contoso/;SharedAccessKey="+testKey), "no SharedAccessKeyName", "dlqdash serve -h"},
		{"emulator bad amqp address", []string{"emulator", "--amqp-addr", "nope"}, env(), `invalid address "nope" from --amqp-addr`, "dlqdash emulator -h"},
		{"emulator bad admin env", []string{"emulator"}, env(envEmulatorAdmin, "x:y"), `from DLQDASH_EMULATOR_ADMIN_ADDR`, "dlqdash emulator -h"},
		{"bad replica id", []string{"demo", "--replica-id", "pod a"}, env(), `invalid replica id "pod a" from --replica-id`, "dlqdash demo -h"},
		{"too long replica id", []string{"demo"}, env(envReplicaID, strings.Repeat("r", 129)), `from DLQDASH_REPLICA_ID`, "dlqdash demo -h"},
		{"bad poll", []string{"demo", "--poll", "10ms"}, env(), `invalid poll interval "10ms" from --poll`, "dlqdash demo -h"},
		{"bad poll env", []string{"demo"}, env(envPoll, "soon"), `invalid poll interval "soon" from DLQDASH_POLL`, "dlqdash demo -h"},
		{"Service Bus timeout too short", []string{"serve", "--servicebus-timeout", "100ms"}, env(envConnectionString, goodConnStr), `invalid Service Bus timeout "100ms" from --servicebus-timeout`, "dlqdash serve -h"},
		{"bad Service Bus timeout env", []string{"demo"}, env(envSBTimeout, "soon"), `invalid Service Bus timeout "soon" from DLQDASH_SERVICEBUS_TIMEOUT`, "dlqdash demo -h"},
		{"bad retention", []string{"demo", "--retention", "thirty"}, env(), `invalid retention "thirty" from --retention`, "dlqdash demo -h"},
		{"bad retention days", []string{"demo", "--retention", "-3d"}, env(), `want a number of days`, "dlqdash demo -h"},
		{"admin endpoint on demo", []string{"demo", "--admin-endpoint", "http://x"}, env(), "unknown flag --admin-endpoint", "dlqdash demo -h"},
		{"bad admin endpoint", []string{"serve", "--admin-endpoint", "127.0.0.1:5300"}, env(envConnectionString, goodConnStr), `invalid admin endpoint "127.0.0.1:5300"`, "dlqdash serve -h"},
		{"bad Service Bus transport", []string{"serve", "--servicebus-transport", "tcp"}, env(envConnectionString, goodConnStr), `invalid Service Bus transport "tcp" from --servicebus-transport: want amqp or websockets`, "dlqdash serve -h"},
		{"bad Service Bus transport env", []string{"serve"}, env(envConnectionString, goodConnStr, envSBTransport, "https"), `invalid Service Bus transport "https" from DLQDASH_SERVICEBUS_TRANSPORT`, "dlqdash serve -h"},
		{"Service Bus transport on demo", []string{"demo", "--servicebus-transport", "websockets"}, env(), "unknown flag --servicebus-transport", "dlqdash demo -h"},
		{"healthcheck bad url", []string{"healthcheck", "--url", "ftp://x/"}, env(), `invalid URL "ftp://x/"`, "dlqdash healthcheck -h"},
		{"bad metrics address", []string{"demo", "--metrics-addr", "9100"}, env(), `invalid address "9100" from --metrics-addr`, "dlqdash demo -h"},
		{"bad metrics address env", []string{"serve"}, env(envConnectionString, goodConnStr, envMetricsAddr, "metrics"), `invalid address "metrics" from DLQDASH_METRICS_ADDR`, "dlqdash serve -h"},
		{"metrics on the dashboard's address", []string{"demo", "--addr", ":8080", "--metrics-addr", ":8080"}, env(), `metrics address ":8080" from --metrics-addr is the dashboard's own (--addr)`, "dlqdash demo -h"},
		// One case for each per-command check the cases above leave out.
		{"bad orphan-after", []string{"demo", "--orphan-after", "10s"}, env(), `invalid orphan-after "10s" from --orphan-after`, "dlqdash demo -h"},
		{"bad poison cap env", []string{"serve"}, env(envConnectionString, goodConnStr, envPoisonCap, "0"), `invalid poison cap "0" from DLQDASH_POISON_CAP`, "dlqdash serve -h"},
		{"healthcheck bad dashboard address", []string{"healthcheck"}, env(envAddr, "nope"), `invalid address "nope" from DLQDASH_ADDR`, "dlqdash healthcheck -h"},
		{"token list empty db", []string{"token", "list", "--db", " "}, env(), "empty database path from --db", "dlqdash token list -h"},
		{"audit verify empty db", []string{"audit", "verify"}, env(envDB, " "), "empty database path from DLQDASH_DB", "dlqdash audit verify -h"},
		{"export empty db", []string{"export", "--db", ""}, env(), "empty database path from --db", "dlqdash export -h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, tt.env)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseConfig(%q) = %v, want a *usageError", tt.args, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if !strings.Contains(msg, "run '"+tt.hint+"'") {
				t.Errorf("error %q does not hint %q", msg, tt.hint)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is more than one line: %q", msg)
			}
			assertNoSecret(t, "error", msg)
		})
	}
}

func TestParseConfigHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"Usage:", "demo", "serve", "emulator", "healthcheck"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"help", "serve"}, []string{"dlqdash serve", "SERVICEBUS_CONNECTION_STRING"}},
		{[]string{"demo", "-h"}, []string{"--addr", "DLQDASH_ADDR", "default 127.0.0.1:8080", "--db", "DLQDASH_DB", "--log-format"}},
		{[]string{"serve", "--help"}, []string{"--addr", "SERVICEBUS_CONNECTION_STRING (required)"}},
		{[]string{"emulator", "-h"}, []string{"--amqp-addr", "default 127.0.0.1:5672", "--admin-addr", "default 127.0.0.1:5300", "--config", "DLQDASH_EMULATOR_CONFIG", "DLQDASH_EMULATOR_KEY", "MaxDeliveryCount 3"}},
		{[]string{"healthcheck", "-h"}, []string{"--url"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseConfig(tt.args, env())
			var h *helpRequest
			if !errors.As(err, &h) {
				t.Fatalf("parseConfig(%q) = %v, want help", tt.args, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(h.text, w) {
					t.Errorf("help lacks %q:\n%s", w, h.text)
				}
			}
		})
	}
}

// TestParseEmulatorSASRules: DLQDASH_EMULATOR_SAS_RULES gives the emulator
// keys with fewer rights; a malformed list is a usage error that never
// repeats a key.
func TestParseEmulatorSASRules(t *testing.T) {
	c, err := parseConfig([]string{"emulator"}, env(envEmulatorSASRules, " SendOnly:Send:c2VuZA== ; NoManage:Send,Listen:a:b;"))
	if err != nil {
		t.Fatal(err)
	}
	want := []EmulatorSASRule{
		{KeyName: "SendOnly", Rights: []string{"Send"}, Key: "c2VuZA=="},
		{KeyName: "NoManage", Rights: []string{"Send", "Listen"}, Key: "a:b"},
	}
	if !reflect.DeepEqual(c.Emulator.SASRules, want) {
		t.Errorf("rules = %+v, want %+v", c.Emulator.SASRules, want)
	}
	for name, v := range map[string]string{
		"no key":        "SendOnly:Send",
		"bad right":     "R:Read:c2VjcmV0LWtleQ==",
		"main key name": "RootManageSharedAccessKey:Send:c2VjcmV0LWtleQ==",
		"twice":         "A:Send:c2VjcmV0LWtleQ==;a:Listen:c2VjcmV0LWtleQ==",
	} {
		_, err := parseConfig([]string{"emulator"}, env(envEmulatorSASRules, v))
		var ue *usageError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "c2VjcmV0LWtleQ") {
			t.Errorf("%s: %v, want a usage error without the key", name, err)
		}
	}
}
