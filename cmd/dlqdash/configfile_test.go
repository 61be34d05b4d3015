package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

// fakeFiles is a readFile over a map; a missing name fails like os.ReadFile.
func fakeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		s, ok := files[name]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return []byte(s), nil
	}
}

// testCAPEM is a self-signed certificate in PEM.
func testCAPEM(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

const euConnStr = "Endpoint=sb://contoso-eu.servicebus.windows.net/;SharedAccessKeyName=Listen;SharedAccessKey=" + testKey

func TestParseConfigFile(t *testing.T) {
	ca := testCAPEM(t)
	getenv := env("SB_PROD_EU", euConnStr, "SP_SECRET", "s3cr3t-from-env", "EMU_KEY", "emulator-key-from-env")
	readFile := fakeFiles(map[string]string{
		"/run/secrets/sb-staging": "  " + goodConnStr + "\n",
		"/run/secrets/sp":         "s3cr3t-from-file\n",
		"/run/secrets/emu":        "emulator-key-from-file",
		"/etc/dlqdash/ca.pem":     ca,
	})
	tests := []struct {
		name  string
		file  string
		check func(t *testing.T, fc FileConfig)
	}{
		{"the issue's example", `
namespaces:
  - name: prod-eu                       # shown in the UI, the API and the audit
    connection_string_env: SB_PROD_EU   # SAS, read from this environment variable
    admin_endpoint: http://127.0.0.1:5300
  - name: prod-us
    fully_qualified_namespace: contoso-us.servicebus.windows.net
    credential: default
    transport: websockets
`, func(t *testing.T, fc FileConfig) {
			if len(fc.Namespaces) != 2 {
				t.Fatalf("got %d namespaces, want 2", len(fc.Namespaces))
			}
			eu, us := fc.Namespaces[0], fc.Namespaces[1]
			if eu.Name != "prod-eu" || eu.Line != 3 || eu.ConnectionString.Raw() != euConnStr || eu.Host() != "contoso-eu.servicebus.windows.net" ||
				eu.AdminEndpoint != "http://127.0.0.1:5300" || eu.Transport != transportAMQP || eu.Credential.Kind != "" {
				t.Errorf("prod-eu = %+v", eu)
			}
			if us.Name != "prod-us" || us.Line != 6 || us.FullyQualifiedNamespace != "contoso-us.servicebus.windows.net" || us.Host() != us.FullyQualifiedNamespace ||
				us.Credential.Kind != credDefault || us.Transport != transportWebSockets || us.ConnectionString.Raw() != "" {
				t.Errorf("prod-us = %+v", us)
			}
		}},
		{"connection string from a file, trimmed", `
namespaces:
  - name: staging
    connection_string_file: /run/secrets/sb-staging
`, func(t *testing.T, fc FileConfig) {
			if got := fc.Namespaces[0].ConnectionString.Raw(); got != goodConnStr {
				t.Errorf("connection string = %q", got)
			}
		}},
		{"every credential kind and key", `
namespaces:
  - name: mi
    fully_qualified_namespace: a.servicebus.windows.net
    credential: managed_identity
    client_id: 11111111-1111-1111-1111-111111111111
  - name: mi-system
    fully_qualified_namespace: b.servicebus.windows.net
    credential: managed_identity
  - name: wi
    fully_qualified_namespace: c.servicebus.windows.net
    credential: workload_identity
    client_id: 22222222-2222-2222-2222-222222222222
    tenant_id: 33333333-3333-3333-3333-333333333333
  - name: sp.env
    fully_qualified_namespace: d.servicebus.windows.net
    credential: client_secret
    tenant_id: contoso.onmicrosoft.com
    client_id: 44444444-4444-4444-4444-444444444444
    client_secret_env: SP_SECRET
  - name: sp_file
    fully_qualified_namespace: e.servicebus.windows.net
    credential: client_secret
    tenant_id: t
    client_id: c
    client_secret_file: /run/secrets/sp
  - name: emu1
    fully_qualified_namespace: localhost:5671
    credential: emulator
    signing_key_env: EMU_KEY
    custom_endpoint: 127.0.0.1:15671
    tls_ca_file: /etc/dlqdash/ca.pem
    admin_endpoint: https://127.0.0.1:15300
    transport: amqp
  - name: 2-emu
    fully_qualified_namespace: localhost
    credential: emulator
    signing_key_file: /run/secrets/emu
    custom_endpoint: https://127.0.0.1:15443
    transport: websockets
`, func(t *testing.T, fc FileConfig) {
			want := []CredentialConfig{
				{Kind: credManagedIdentity, ClientID: "11111111-1111-1111-1111-111111111111"},
				{Kind: credManagedIdentity},
				{Kind: credWorkloadIdentity, ClientID: "22222222-2222-2222-2222-222222222222", TenantID: "33333333-3333-3333-3333-333333333333"},
				{Kind: credClientSecret, TenantID: "contoso.onmicrosoft.com", ClientID: "44444444-4444-4444-4444-444444444444", ClientSecret: "s3cr3t-from-env"},
				{Kind: credClientSecret, TenantID: "t", ClientID: "c", ClientSecret: "s3cr3t-from-file"},
				{Kind: credEmulator, SigningKey: "emulator-key-from-env"},
				{Kind: credEmulator, SigningKey: "emulator-key-from-file"},
			}
			if len(fc.Namespaces) != len(want) {
				t.Fatalf("got %d namespaces", len(fc.Namespaces))
			}
			for i, w := range want {
				if got := fc.Namespaces[i].Credential; !reflect.DeepEqual(got, w) {
					t.Errorf("namespaces[%d] credential = %#v, want %#v", i, got, w)
				}
			}
			emu := fc.Namespaces[5]
			if emu.CustomEndpoint != "127.0.0.1:15671" || emu.TLSCAFile != "/etc/dlqdash/ca.pem" || string(emu.TLSCA) != ca ||
				emu.AdminEndpoint != "https://127.0.0.1:15300" || emu.FullyQualifiedNamespace != "localhost:5671" {
				t.Errorf("emu1 = %+v", emu)
			}
			if ws := fc.Namespaces[6]; ws.CustomEndpoint != "https://127.0.0.1:15443" || ws.Transport != transportWebSockets {
				t.Errorf("2-emu = %+v", ws)
			}
		}},
		{"access rules", `
namespaces:
  - {name: prod-eu, connection_string_env: SB_PROD_EU}
  - {name: prod-us, fully_qualified_namespace: us.servicebus.windows.net, credential: default}
access:
  - {group: sre-eu, role: operator, namespaces: [prod-eu]}
  - group: sre-eu
    role: viewer
    namespaces:
      - prod-us
  - {group: "*", role: none, namespaces: prod-us}
  - {token: ci, role: Admin, namespaces: ["*"]}
`, func(t *testing.T, fc FileConfig) {
			want := []AccessRule{
				{Rule: auth.Rule{Group: "sre-eu", Role: auth.Operator, Namespaces: []string{"prod-eu"}}, Line: 6},
				{Rule: auth.Rule{Group: "sre-eu", Role: auth.Viewer, Namespaces: []string{"prod-us"}}, Line: 7},
				{Rule: auth.Rule{Group: "*", Role: auth.NoRole, Namespaces: []string{"prod-us"}}, Line: 11},
				{Rule: auth.Rule{Token: "ci", Role: auth.Admin, Namespaces: []string{"*"}}, Line: 12},
			}
			if !reflect.DeepEqual(fc.Access, want) {
				t.Errorf("access = %+v\nwant %+v", fc.Access, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc, err := parseConfigFile([]byte(tt.file), getenv, readFile)
			if err != nil {
				t.Fatalf("parseConfigFile: %v", err)
			}
			tt.check(t, fc)
		})
	}
}

func TestParseConfigFileErrors(t *testing.T) {
	getenv := env("SB_PROD_EU", euConnStr, "SB_BAD", "Endpoint=http://x/;SharedAccessKeyName=a;SharedAccessKey=b", "SP_SECRET", "x")
	readFile := fakeFiles(map[string]string{"/empty": "\n", "/key.pem": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "/junk": "hello"})
	const eu = "  - name: prod-eu\n    connection_string_env: SB_PROD_EU\n"
	const us = "  - name: prod-us\n    fully_qualified_namespace: us.servicebus.windows.net\n"
	tests := []struct {
		name string
		file string
		want string // the whole error
	}{
		{"the brief's misspelt key", "namespaces:\n" + eu + "  - name: prod-us\n    conection_string_env: SB_PROD_EU\n",
			`line 5: unknown key "conection_string_env" in namespaces[1] (did you mean "connection_string_env"?)`},
		{"unknown key without a near one", "namespaces:\n" + eu + "    colour: blue\n", `line 4: unknown key "colour" in namespaces[0]`},
		{"unknown top-level key", "namespace:\n" + eu, `line 1: unknown key "namespace" in the file (did you mean "namespaces"?)`},
		{"empty file", "", "the file is empty: it needs a namespaces: list"},
		{"comments only", "# nothing\n", "the file is empty: it needs a namespaces: list"},
		{"not YAML", "namespaces:\n\t- name: a\n", "not valid YAML: line 2: found character that cannot start any token"},
		{"two documents", "namespaces:\n" + eu + "---\nnamespaces: []\n", "line 4: a second YAML document: the configuration is one document"},
		{"not a mapping", "- a\n- b\n", "line 1: the file must be a mapping with namespaces: (and optionally access:)"},
		{"no namespaces", "access: []\n", "line 1: the file has no namespaces: list"},
		{"empty namespaces", "namespaces: []\n", "line 1: namespaces must be a list with at least one namespace (- name: ...)"},
		{"entry not a mapping", "namespaces:\n  - prod-eu\n", "line 2: namespaces[0] must be a mapping of keys (key: value)"},
		{"no name", "namespaces:\n  - connection_string_env: SB_PROD_EU\n", "line 2: namespaces[0] has no name"},
		{"empty name", "namespaces:\n  - name:\n    connection_string_env: SB_PROD_EU\n", "line 2: name in namespaces[0] is empty"},
		{"bad name", "namespaces:\n  - name: Prod EU\n    connection_string_env: SB_PROD_EU\n",
			`line 2: name in namespaces[0]: "Prod EU" is not a valid name: want lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63`},
		{"name starting with a dash", "namespaces:\n  - name: -eu\n    connection_string_env: SB_PROD_EU\n", `line 2: name in namespaces[0]: "-eu" is not a valid name`},
		{"name too long", "namespaces:\n  - name: " + strings.Repeat("a", 64) + "\n    connection_string_env: SB_PROD_EU\n", `line 2: name in namespaces[0]: "` + strings.Repeat("a", 64) + `" is not a valid name`},
		{"name is a list", "namespaces:\n  - name: [a]\n", "line 2: name in namespaces[0] must be a single value, not a list or mapping"},
		{"duplicate names", "namespaces:\n" + eu + eu, `line 4: name "prod-eu" in namespaces[1] is already the name of namespaces[0] (line 2): names must be unique`},
		{"duplicate key", "namespaces:\n" + eu + "    name: other\n", `line 4: key "name" given twice in namespaces[0] (first on line 2)`},
		{"no source", "namespaces:\n  - name: prod-eu\n    transport: amqp\n",
			"line 2: namespaces[0] (prod-eu) needs connection_string_env or connection_string_file (a SAS connection string), or fully_qualified_namespace and credential (Entra ID)"},
		{"two sources", "namespaces:\n" + eu + "    fully_qualified_namespace: x.servicebus.windows.net\n",
			"line 4: connection_string_env and fully_qualified_namespace are both in namespaces[0] (prod-eu): give one"},
		{"env and file", "namespaces:\n" + eu + "    connection_string_file: /x\n",
			"line 4: connection_string_env and connection_string_file are both in namespaces[0] (prod-eu): give one"},
		{"connection string unset", "namespaces:\n  - name: a\n    connection_string_env: SB_NOPE\n",
			"line 3: connection_string_env in namespaces[0] (a): the environment variable SB_NOPE is not set (or empty): it should hold the connection string"},
		{"connection string bad", "namespaces:\n  - name: a\n    connection_string_env: SB_BAD\n",
			"line 3: connection_string_env in namespaces[0] (a): the connection string has an Endpoint that is not an sb:// address; want Endpoint=sb://<namespace>.servicebus.windows.net/"},
		{"connection string file missing", "namespaces:\n  - name: a\n    connection_string_file: /nope\n",
			"line 3: connection_string_file in namespaces[0] (a): open /nope: file does not exist"},
		{"connection string file empty", "namespaces:\n  - name: a\n    connection_string_file: /empty\n",
			"line 3: connection_string_file in namespaces[0] (a): the file /empty is empty: it should hold the connection string"},
		{"credential with a connection string", "namespaces:\n" + eu + "    credential: default\n",
			"line 4: credential in namespaces[0] (prod-eu): applies only with fully_qualified_namespace: a connection string signs in with its own SAS key"},
		{"client_id with a connection string", "namespaces:\n" + eu + "    client_id: x\n", "line 4: client_id in namespaces[0] (prod-eu): applies only with fully_qualified_namespace"},
		{"fqns with a scheme", "namespaces:\n  - name: a\n    fully_qualified_namespace: sb://x.servicebus.windows.net/\n    credential: default\n",
			`line 3: fully_qualified_namespace in namespaces[0] (a): "sb://x.servicebus.windows.net/" is not a host name: want host or host:port only, no scheme or path, e.g. contoso.servicebus.windows.net`},
		{"no credential", "namespaces:\n" + us,
			"line 3: namespaces[0] (prod-us) has fully_qualified_namespace but no credential: want credential: default, managed_identity, workload_identity, client_secret or emulator"},
		{"unknown credential", "namespaces:\n" + us + "    credential: az_cli\n",
			`line 4: credential in namespaces[0] (prod-us): "az_cli" is not a credential: want default, managed_identity, workload_identity, client_secret or emulator`},
		{"client_id for default", "namespaces:\n" + us + "    credential: default\n    client_id: x\n",
			"line 5: client_id in namespaces[0] (prod-us): does not apply to credential default (it reads AZURE_CLIENT_ID, AZURE_TENANT_ID and the like from the environment)"},
		{"tenant_id for managed identity", "namespaces:\n" + us + "    credential: managed_identity\n    tenant_id: x\n",
			"line 5: tenant_id in namespaces[0] (prod-us): does not apply to credential managed_identity"},
		{"signing key for client secret", "namespaces:\n" + us + "    credential: client_secret\n    tenant_id: t\n    client_id: c\n    signing_key_env: SP_SECRET\n",
			"line 7: signing_key_env in namespaces[0] (prod-us): does not apply to credential client_secret"},
		{"client secret without tenant", "namespaces:\n" + us + "    credential: client_secret\n    client_id: c\n    client_secret_env: SP_SECRET\n",
			"line 4: credential in namespaces[0] (prod-us): client_secret needs tenant_id"},
		{"client secret without client id", "namespaces:\n" + us + "    credential: client_secret\n    tenant_id: t\n    client_secret_env: SP_SECRET\n",
			"line 4: credential in namespaces[0] (prod-us): client_secret needs client_id"},
		{"client secret without the secret", "namespaces:\n" + us + "    credential: client_secret\n    tenant_id: t\n    client_id: c\n",
			"line 4: credential in namespaces[0] (prod-us): client_secret needs client_secret_env (an environment variable) or client_secret_file (a file) holding the secret"},
		{"client secret both ways", "namespaces:\n" + us + "    credential: client_secret\n    tenant_id: t\n    client_id: c\n    client_secret_env: SP_SECRET\n    client_secret_file: /x\n",
			"line 8: client_secret_env and client_secret_file are both in namespaces[0] (prod-us): give one"},
		{"client secret env unset", "namespaces:\n" + us + "    credential: client_secret\n    tenant_id: t\n    client_id: c\n    client_secret_env: SP_NOPE\n",
			"line 7: client_secret_env in namespaces[0] (prod-us): the environment variable SP_NOPE is not set (or empty): it should hold the client secret"},
		{"emulator without a key", "namespaces:\n" + us + "    credential: emulator\n",
			"line 4: credential in namespaces[0] (prod-us): emulator needs signing_key_env (an environment variable) or signing_key_file (a file) holding the emulator's signing key"},
		{"emulator key file missing", "namespaces:\n" + us + "    credential: emulator\n    signing_key_file: /nope\n",
			"line 5: signing_key_file in namespaces[0] (prod-us): open /nope: file does not exist"},
		{"bad transport", "namespaces:\n" + eu + "    transport: http\n",
			`line 4: transport in namespaces[0] (prod-eu): "http" is not a transport: want amqp (port 5671) or websockets (port 443)`},
		{"custom endpoint of another scheme", "namespaces:\n" + eu + "    custom_endpoint: ftp://proxy:21\n",
			`line 4: custom_endpoint in namespaces[0] (prod-eu): "ftp://proxy:21" is not an endpoint: want host[:port] or amqps://, https:// or http://host[:port], e.g. sb-private.contoso.internal:5671`},
		{"custom endpoint with a path", "namespaces:\n" + eu + "    custom_endpoint: https://proxy/x\n", `line 4: custom_endpoint in namespaces[0] (prod-eu): "https://proxy/x" is not an endpoint`},
		{"tls ca missing", "namespaces:\n" + eu + "    tls_ca_file: /nope.pem\n", "line 4: tls_ca_file in namespaces[0] (prod-eu): open /nope.pem: file does not exist"},
		{"tls ca is a key", "namespaces:\n" + eu + "    tls_ca_file: /key.pem\n",
			"line 4: tls_ca_file in namespaces[0] (prod-eu): /key.pem holds a PRIVATE KEY block: want PEM certificates only (never a private key)"},
		{"tls ca is junk", "namespaces:\n" + eu + "    tls_ca_file: /junk\n",
			"line 4: tls_ca_file in namespaces[0] (prod-eu): /junk holds no PEM certificate (-----BEGIN CERTIFICATE-----)"},
		{"bad admin endpoint", "namespaces:\n" + eu + "    admin_endpoint: 127.0.0.1:5300\n",
			`line 4: admin_endpoint in namespaces[0] (prod-eu): "127.0.0.1:5300" is not a base URL: want http(s)://host[:port]`},
		{"access not a list", "namespaces:\n" + eu + "access: {group: a}\n", "line 4: access must be a list of rules (- group: ..., role: ..., namespaces: [...])"},
		{"access unknown key", "namespaces:\n" + eu + "access:\n  - {groups: a, role: viewer, namespaces: [prod-eu]}\n",
			`line 5: unknown key "groups" in access[0] (did you mean "group"?)`},
		{"access without subject", "namespaces:\n" + eu + "access:\n  - {role: viewer, namespaces: [prod-eu]}\n",
			"line 5: access[0] needs group (a group as --admin-groups, --operator-groups and --viewer-groups name it, or *) or token (an API token's name)"},
		{"access group and token", "namespaces:\n" + eu + "access:\n  - group: a\n    token: b\n    role: viewer\n    namespaces: [prod-eu]\n",
			"line 6: group and token are both in access[0]: give one"},
		{"access without role", "namespaces:\n" + eu + "access:\n  - {group: a, namespaces: [prod-eu]}\n", "line 5: access[0] has no role: want viewer, operator, admin or none"},
		{"access bad role", "namespaces:\n" + eu + "access:\n  - group: a\n    role: owner\n    namespaces: [prod-eu]\n",
			`line 6: role in access[0]: "owner" is not a role: want viewer, operator, admin or none`},
		{"access without namespaces", "namespaces:\n" + eu + "access:\n  - {group: a, role: viewer}\n",
			`line 5: access[0] has no namespaces: want a list of namespace names, or ["*"] for all`},
		{"access empty namespaces", "namespaces:\n" + eu + "access:\n  - group: a\n    role: viewer\n    namespaces: []\n",
			`line 7: namespaces in access[0]: is empty: want namespace names, or ["*"] for all`},
		{"access unknown namespace", "namespaces:\n" + eu + "access:\n  - group: a\n    role: viewer\n    namespaces:\n      - prod-eu\n      - prod-xx\n",
			`line 9: namespaces in access[0]: no namespace "prod-xx" in the namespaces list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfigFile([]byte(tt.file), getenv, readFile)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// Secrets never live in the file, and one pasted where a name or path
// belongs is refused without being echoed.
func TestParseConfigFileRefusesSecrets(t *testing.T) {
	const sasKey = "c2VjcmV0LWtleS1uZXZlci1lY2hvZWQ="
	pasted := "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + sasKey
	tests := []struct {
		name, file, want string
	}{
		{"connection_string", "namespaces:\n  - name: a\n    connection_string: " + pasted + "\n",
			`line 3: key "connection_string" in namespaces[0] would put a secret in the file: name an environment variable with connection_string_env or a file with connection_string_file instead`},
		{"client_secret", "namespaces:\n  - name: a\n    fully_qualified_namespace: x\n    credential: client_secret\n    client_secret: " + sasKey + "\n",
			`line 5: key "client_secret" in namespaces[0] would put a secret in the file: name an environment variable with client_secret_env or a file with client_secret_file instead`},
		{"signing_key", "namespaces:\n  - name: a\n    signing_key: " + sasKey + "\n",
			`line 3: key "signing_key" in namespaces[0] would put a secret in the file: name an environment variable with signing_key_env or a file with signing_key_file instead`},
		{"shared_access_key", "namespaces:\n  - name: a\n    shared_access_key: " + sasKey + "\n",
			`line 3: key "shared_access_key" in namespaces[0] would put a secret in the file: name an environment variable with connection_string_env`},
		{"a connection string in _env", "namespaces:\n  - name: a\n    connection_string_env: \"" + pasted + "\"\n",
			"line 3: connection_string_env in namespaces[0] (a): want the name of an environment variable (letters, digits and _) that holds the connection string, not the connection string itself"},
		{"a connection string in _file", "namespaces:\n  - name: a\n    connection_string_file: \"" + pasted + "\"\n",
			"line 3: connection_string_file in namespaces[0] (a): want the path of a file that holds the connection string, not the connection string itself"},
		{"a secret in client_secret_env", "namespaces:\n  - name: a\n    fully_qualified_namespace: x\n    credential: client_secret\n    tenant_id: t\n    client_id: c\n    client_secret_env: " + sasKey + "\n",
			"line 7: client_secret_env in namespaces[0] (a): want the name of an environment variable (letters, digits and _) that holds the client secret, not the client secret itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfigFile([]byte(tt.file), env(), fakeFiles(nil))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant %q", err, tt.want)
			}
			if strings.Contains(err.Error(), sasKey) {
				t.Errorf("the error echoes the secret: %v", err)
			}
		})
	}
}

// Secrets read from the environment or a file never print.
func TestConfigFileSecretsDoNotPrint(t *testing.T) {
	fc, err := parseConfigFile([]byte("namespaces:\n  - name: a\n    fully_qualified_namespace: x\n    credential: client_secret\n    tenant_id: t\n    client_id: c\n    client_secret_env: S\n"),
		env("S", "hunter2-very-secret"), fakeFiles(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%v", fc), fmt.Sprintf("%+v", fc), fmt.Sprintf("%#v", fc)} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("a printed FileConfig holds the secret: %s", s)
		}
	}
	if string(fc.Namespaces[0].Credential.ClientSecret) != "hunter2-very-secret" {
		t.Errorf("the secret was not read")
	}
}

// FuzzParseConfigFile: any file is refused or read without a panic, and a
// secret from the environment or a file never reaches an error.
func FuzzParseConfigFile(f *testing.F) {
	for _, seed := range []string{
		"namespaces:\n  - name: a\n    connection_string_env: SB\n",
		"namespaces:\n  - {name: b, fully_qualified_namespace: x, credential: client_secret, tenant_id: t, client_id: c, client_secret_env: SP}\naccess:\n  - {group: g, role: viewer, namespaces: [b]}\n",
		"namespaces:\n  - name: c\n    connection_string_file: /f\n    tls_ca_file: /f\n",
		"namespaces: &a [*a]\n",
		"- x\n",
		"",
	} {
		f.Add(seed)
	}
	const planted = "PLANTED-SECRET-VALUE"
	getenv := func(string) string {
		return "Endpoint=sb://" + planted + ".example/;SharedAccessKeyName=k;SharedAccessKey=" + planted
	}
	readFile := func(string) ([]byte, error) { return []byte(planted + "\n"), nil }
	f.Fuzz(func(t *testing.T, data string) {
		_, err := parseConfigFile([]byte(data), getenv, readFile)
		if err != nil && strings.Contains(err.Error(), planted) && !strings.Contains(data, planted) {
			t.Fatalf("the error holds a secret: %v", err)
		}
	})
}
