package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
	"github.com/dlqdash/dlqdash/servicebus/credential"
)

// openCall is one call an openNamespaces test's opener received.
type openCall struct {
	connectionString, fqns string
	cred                   azcore.TokenCredential
	opts                   namespaceOptions
}

type fakeCred struct{ kind string }

func (fakeCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("fake")
}

// recordingOpener opens real (unconnected) clients for every call, and
// records the calls. failOn makes the call for that address fail.
func recordingOpener(t *testing.T, calls *[]openCall, failOn string) namespaceOpener {
	realClient := func(host string) *servicebus.Client {
		c, err := servicebus.Open(t.Context(), "Endpoint=sb://"+host+"/;SharedAccessKeyName=k;SharedAccessKey="+testKey, servicebus.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return namespaceOpener{
		open: func(_ context.Context, cs string, opts namespaceOptions) (*servicebus.Client, error) {
			*calls = append(*calls, openCall{connectionString: cs, opts: opts})
			parsed, _ := connstr.Parse(cs)
			if parsed.Host == failOn {
				return nil, errors.New("refused")
			}
			return realClient(parsed.Host), nil
		},
		openWithCredential: func(_ context.Context, fqns string, cred azcore.TokenCredential, opts namespaceOptions) (*servicebus.Client, error) {
			*calls = append(*calls, openCall{fqns: fqns, cred: cred, opts: opts})
			if fqns == failOn {
				return nil, errors.New("refused")
			}
			return realClient(fqns), nil
		},
		newCredential: func(c CredentialConfig) (azcore.TokenCredential, error) {
			if c.Kind == "broken" {
				return nil, errors.New("cannot build it")
			}
			return fakeCred{c.Kind}, nil
		},
	}
}

// Without --config, serve opens the one namespace of
// SERVICEBUS_CONNECTION_STRING as before, named after its host.
func TestOpenNamespacesWithoutConfigFile(t *testing.T) {
	cfg, err := parseConfig([]string{"serve", "--admin-endpoint", "http://127.0.0.1:5300", "--servicebus-timeout", "7s"}, env(envConnectionString, goodConnStr))
	if err != nil {
		t.Fatal(err)
	}
	var calls []openCall
	conns, err := openNamespacesWith(t.Context(), cfg, slog.New(slog.DiscardHandler), recordingOpener(t, &calls, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNamespaces(t.Context(), conns)
	if len(conns) != 1 || conns[0].Name != "contoso.servicebus.windows.net" || conns[0].Client.Namespace() != "contoso.servicebus.windows.net" {
		t.Fatalf("conns = %+v", conns)
	}
	if len(calls) != 1 || calls[0].connectionString != goodConnStr || calls[0].opts.AdminEndpoint != "http://127.0.0.1:5300" ||
		calls[0].opts.Timeout != 7*time.Second || calls[0].opts.Transport != transportAMQP || calls[0].opts.Name != "" || calls[0].opts.TLSConfig != nil || calls[0].opts.CustomEndpoint != "" {
		t.Fatalf("calls = %+v", calls)
	}
	// And the production options are today's: the admin endpoint and the
	// timeouts, nothing else.
	so := serviceBusOptions(calls[0].opts)
	want := servicebus.Timeouts{Attach: 7 * time.Second, Send: 7 * time.Second, Receive: 7 * time.Second, Settle: 7 * time.Second, Peek: 7 * time.Second, Admin: 7 * time.Second}
	if so.AdminEndpoint != "http://127.0.0.1:5300" || so.Timeouts != want {
		t.Errorf("servicebus options = %+v", so)
	}
}

func TestOpenNamespacesFromConfigFile(t *testing.T) {
	ca := testCAPEM(t)
	file := `namespaces:
  - name: prod-eu
    connection_string_env: SB_PROD_EU
    admin_endpoint: http://127.0.0.1:5300
  - name: prod-us
    fully_qualified_namespace: contoso-us.servicebus.windows.net
    credential: managed_identity
    client_id: mi-client
    transport: websockets
    custom_endpoint: https://proxy.contoso.internal:443
    tls_ca_file: /ca.pem
`
	getenv := env("SB_PROD_EU", euConnStr)
	readFile := fakeFiles(map[string]string{"/dlqdash.yaml": file, "/ca.pem": ca})
	cfg, err := parseConfig([]string{"serve", "--config", "/dlqdash.yaml", "--servicebus-timeout", "3s"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := loadConfigFile(&cfg, getenv, readFile); err != nil {
		t.Fatal(err)
	}
	var calls []openCall
	var logs bytes.Buffer
	conns, err := openNamespacesWith(t.Context(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), recordingOpener(t, &calls, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNamespaces(t.Context(), conns)
	if len(conns) != 2 || conns[0].Name != "prod-eu" || conns[1].Name != "prod-us" || conns[1].Client.Namespace() != "contoso-us.servicebus.windows.net" {
		t.Fatalf("conns = %+v", conns)
	}
	eu, us := calls[0], calls[1]
	if eu.opts.Name != "prod-eu" || us.opts.Name != "prod-us" {
		t.Errorf("names passed: %q, %q", eu.opts.Name, us.opts.Name)
	}
	if eu.connectionString != euConnStr || eu.opts.AdminEndpoint != "http://127.0.0.1:5300" || eu.opts.Timeout != 3*time.Second || eu.opts.TLSConfig != nil {
		t.Errorf("prod-eu opened with %+v", eu)
	}
	if us.fqns != "contoso-us.servicebus.windows.net" || us.cred != (fakeCred{credManagedIdentity}) || us.opts.Transport != transportWebSockets ||
		us.opts.CustomEndpoint != "https://proxy.contoso.internal:443" || us.opts.TLSConfig == nil || us.opts.TLSConfig.RootCAs == nil {
		t.Errorf("prod-us opened with %+v", us)
	}
	for _, want := range []string{`msg="namespace opened" namespace=prod-eu host=contoso-eu.servicebus.windows.net sign_in=sas transport=amqp`,
		`msg="namespace opened" namespace=prod-us host=contoso-us.servicebus.windows.net sign_in=managed_identity transport=websockets`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), testKey) {
		t.Errorf("the log holds the SAS key")
	}
}

// A namespace that cannot be opened stops the start, naming it, and the
// ones opened before it are closed.
func TestOpenNamespacesClosesOnFailure(t *testing.T) {
	for _, tc := range []struct{ name, third, want string }{
		{"open fails", "  - {name: c, fully_qualified_namespace: c.example, credential: default}\n", "namespace c (config file line 4): refused"},
		{"credential fails", "  - {name: c, fully_qualified_namespace: c.example, credential: default}\n", "namespace c (config file line 4): cannot build it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, err := parseConfigFile([]byte("namespaces:\n  - {name: a, connection_string_env: A}\n  - {name: b, connection_string_env: B}\n"+tc.third),
				env("A", "Endpoint=sb://a.example/;SharedAccessKeyName=k;SharedAccessKey=x", "B", "Endpoint=sb://b.example/;SharedAccessKeyName=k;SharedAccessKey=x"), fakeFiles(nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "credential fails" {
				fc.Namespaces[2].Credential.Kind = "broken"
			}
			var calls []openCall
			o := recordingOpener(t, &calls, "c.example")
			var opened []*servicebus.Client
			open := o.open
			o.open = func(ctx context.Context, cs string, opts namespaceOptions) (*servicebus.Client, error) {
				c, err := open(ctx, cs, opts)
				if c != nil {
					opened = append(opened, c)
				}
				return c, err
			}
			conns, err := openNamespacesWith(t.Context(), Config{Namespaces: fc.Namespaces, ServiceBusTimeout: time.Second}, slog.New(slog.DiscardHandler), o)
			if err == nil || err.Error() != tc.want || conns != nil {
				t.Fatalf("openNamespaces = %v, %v; want %q", conns, err, tc.want)
			}
			if len(opened) != 2 {
				t.Fatalf("%d opened before the failure, want 2", len(opened))
			}
			for i, c := range opened {
				if _, err := c.Entities(t.Context()); !errors.Is(err, servicebus.ErrClosed) {
					t.Errorf("namespace %d left open: Entities = %v", i, err)
				}
			}
		})
	}
}

// client_secret's secret, read from the environment or a file, is the
// one the credential is built with; every kind maps to its azidentity type.
func TestNamespaceCredentials(t *testing.T) {
	clearAzure := []string{"AZURE_TOKEN_CREDENTIALS", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE"}
	for _, k := range clearAzure {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte("sa-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := parseConfigFile([]byte(`namespaces:
  - {name: d, fully_qualified_namespace: d.example, credential: default}
  - {name: mi, fully_qualified_namespace: mi.example, credential: managed_identity, client_id: mi-client}
  - {name: wi, fully_qualified_namespace: wi.example, credential: workload_identity, client_id: wi-client, tenant_id: wi-tenant}
  - {name: sp-env, fully_qualified_namespace: e.example, credential: client_secret, tenant_id: t1, client_id: c1, client_secret_env: SP_SECRET}
  - {name: sp-file, fully_qualified_namespace: f.example, credential: client_secret, tenant_id: t2, client_id: c2, client_secret_file: /sp}
`), env("SP_SECRET", "from-env"), fakeFiles(map[string]string{"/sp": "from-file\n"}))
	if err != nil {
		t.Fatal(err)
	}
	wantSpecs := []credential.Spec{
		{Kind: credential.Default},
		{Kind: credential.ManagedIdentity, ClientID: "mi-client"},
		{Kind: credential.WorkloadIdentity, ClientID: "wi-client", TenantID: "wi-tenant"},
		{Kind: credential.ClientSecret, TenantID: "t1", ClientID: "c1", ClientSecret: "from-env"},
		{Kind: credential.ClientSecret, TenantID: "t2", ClientID: "c2", ClientSecret: "from-file"},
	}
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", tokenFile)
	for i, ns := range fc.Namespaces {
		if got := credentialSpec(ns.Credential); !reflect.DeepEqual(got, wantSpecs[i]) {
			t.Errorf("%s: spec %+v, want %+v", ns.Name, got, wantSpecs[i])
		}
		c, err := newCredential(ns.Credential)
		if err != nil {
			t.Fatalf("%s: %v", ns.Name, err)
		}
		var ok bool
		switch ns.Credential.Kind {
		case credDefault:
			_, ok = c.(*azidentity.DefaultAzureCredential)
		case credManagedIdentity:
			_, ok = c.(*azidentity.ManagedIdentityCredential)
		case credWorkloadIdentity:
			_, ok = c.(*azidentity.WorkloadIdentityCredential)
		case credClientSecret:
			_, ok = c.(*azidentity.ClientSecretCredential)
		}
		if !ok {
			t.Errorf("%s: built a %T", ns.Name, c)
		}
	}
}

func TestLoadConfigFile(t *testing.T) {
	const file = `namespaces:
  - {name: prod-eu, connection_string_env: SB}
  - {name: prod-us, connection_string_env: SB}
access:
  - {group: sre-eu, role: operator, namespaces: [prod-eu]}
  - {group: sre-eu, role: viewer, namespaces: [prod-us]}
  - {group: readers, role: operator, namespaces: [prod-us]}
`
	getenv := env("SB", goodConnStr)
	cfg, err := parseConfig([]string{"serve", "--config", "/c.yaml", "--auth", "proxy", "--trusted-proxies", "10.0.0.1",
		"--operator-groups", "sre-eu", "--viewer-groups", "readers"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	err = loadConfigFile(&cfg, getenv, fakeFiles(map[string]string{"/c.yaml": file}))
	var ue *usageError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), `config file /c.yaml: line 7: access[2]: group "readers" is a viewer by the admin, operator and viewer groups: an access rule cannot make it operator`) {
		t.Fatalf("loadConfigFile = %v", err)
	}

	fixed := strings.Replace(file, "{group: readers, role: operator", "{group: readers, role: viewer", 1)
	if err := loadConfigFile(&cfg, getenv, fakeFiles(map[string]string{"/c.yaml": fixed})); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Namespaces) != 2 || len(cfg.Access.Rules) != 3 || cfg.Access.Mapping.Operator[0] != "sre-eu" {
		t.Fatalf("cfg = %+v", cfg)
	}

	noAuth, err := parseConfig([]string{"serve", "--config", "/c.yaml"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	err = loadConfigFile(&noAuth, getenv, fakeFiles(map[string]string{"/c.yaml": fixed}))
	if err == nil || !strings.HasPrefix(err.Error(), `config file /c.yaml: line 5: access[0] limits group "sre-eu", but with --auth none there are no groups`) {
		t.Errorf("group rules with --auth none: %v", err)
	}
	tokensOnly := "namespaces:\n  - {name: prod-eu, connection_string_env: SB}\naccess:\n  - {token: ci, role: viewer, namespaces: [prod-eu]}\n"
	if err := loadConfigFile(&noAuth, getenv, fakeFiles(map[string]string{"/c.yaml": tokensOnly})); err != nil || len(noAuth.Access.Rules) != 1 {
		t.Errorf("token rules with --auth none: %v, %+v", err, noAuth.Access)
	}

	err = loadConfigFile(&Config{Command: "serve", ConfigFile: "/nope.yaml"}, getenv, fakeFiles(nil))
	if err == nil || !strings.HasPrefix(err.Error(), "cannot read the config file: open /nope.yaml: file does not exist") {
		t.Errorf("a missing file: %v", err)
	}
}

// --config replaces SERVICEBUS_CONNECTION_STRING and --admin-endpoint:
// both ways at once are refused.
func TestParseConfigWithConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  func(string) string
		want string // error; empty for none
	}{
		{"flag", []string{"serve", "--config", "/etc/dlqdash.yaml"}, env(), ""},
		{"environment", []string{"serve"}, env(envConfig, "/etc/dlqdash.yaml"), ""},
		{"with a connection string", []string{"serve", "--config", "/etc/dlqdash.yaml"}, env(envConnectionString, goodConnStr),
			"both --config (from --config) and SERVICEBUS_CONNECTION_STRING are set: the file lists every namespace; unset SERVICEBUS_CONNECTION_STRING, or name it in the file (connection_string_env: SERVICEBUS_CONNECTION_STRING)"},
		{"with an admin endpoint", []string{"serve", "--admin-endpoint", "http://127.0.0.1:5300"}, env(envConfig, "/etc/dlqdash.yaml"),
			"--admin-endpoint (from --admin-endpoint) does not apply with --config: give admin_endpoint to the namespace in the file"},
		{"demo has no --config", []string{"demo", "--config", "/x"}, env(), "unknown flag --config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, tc.env)
			if tc.want == "" {
				if err != nil || cfg.ConfigFile != "/etc/dlqdash.yaml" || cfg.ConnectionString.Raw() != "" {
					t.Fatalf("parseConfig = %+v, %v", cfg, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNamespaceTransport: serve's "reading Service Bus" line names each
// namespace's own transport: the config file's per namespace (it said
// "config file" for every one), else the flag's, amqp by default.
func TestNamespaceTransport(t *testing.T) {
	file := Config{Namespaces: []NamespaceConfig{{Name: "eu", Transport: transportAMQP}, {Name: "us", Transport: transportWebSockets}}}
	if a, b := namespaceTransport(file, 0), namespaceTransport(file, 1); a != "amqp" || b != "websockets" {
		t.Errorf("with a config file: %q, %q; want amqp, websockets", a, b)
	}
	if got := namespaceTransport(Config{}, 0); got != "amqp" {
		t.Errorf("without flag or file: %q, want amqp", got)
	}
	if got := namespaceTransport(Config{ServiceBusTransport: transportWebSockets}, 0); got != "websockets" {
		t.Errorf("with --servicebus-transport websockets: %q", got)
	}
}
