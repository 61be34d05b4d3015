package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// startQueueEmulator runs `dlqdash emulator` with one queue and puts one
// dead letter in it, through the real SDK.
func startQueueEmulator(t *testing.T, queue string) (conn, adminAddr string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"ns","Queues":[{"Name":"`+queue+`"}]}],"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, adminAddr = startTestEmulator(t, cfg)
	client := testClient(t, conn)
	s, err := client.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(t.Context(), &azservicebus.Message{Body: []byte("from " + queue)}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close(t.Context())
	r, err := client.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	deadLetterFrom(t, r, 1, "Broken", "")
	return conn, adminAddr
}

// TestServeConfigFileTwoNamespaces runs the real program: dlqdash serve
// --config with two SAS namespaces, two `dlqdash emulator`s, opens both
// (each logged as "namespace opened" with its name, host and sign-in) and
// catalogs the first one's dead letter.
func TestServeConfigFileTwoNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two emulators and dlqdash serve")
	}
	connEU, adminEU := startQueueEmulator(t, "orders-eu")
	connUS, adminUS := startQueueEmulator(t, "orders-us")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "dlqdash.yaml")
	if err := os.WriteFile(cfgFile, []byte(`# two regions of one team
namespaces:
  - name: prod-eu
    connection_string_env: SB_PROD_EU
    admin_endpoint: http://`+adminEU+`
  - name: prod-us
    connection_string_env: SB_PROD_US
    admin_endpoint: http://`+adminUS+`
access:
  - {token: ci, role: viewer, namespaces: [prod-us]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, []string{"serve", "--config", cfgFile, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "dlqdash.db"), "--poll", "100ms"},
		"SB_PROD_EU="+connEU, "SB_PROD_US="+connUS, envConnectionString+"=")
	defer c.kill()

	type opened struct{ Msg, Namespace, Host, SignIn, Transport string }
	var got []opened
	for line := range strings.Lines(c.stderr.String()) {
		var rec struct {
			Msg, Namespace, Host, Transport string
			SignIn                          string `json:"sign_in"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "namespace opened" {
			got = append(got, opened{rec.Msg, rec.Namespace, rec.Host, rec.SignIn, rec.Transport})
		}
	}
	hostOf := func(conn string) string {
		cs, err := connstr.Parse(conn)
		if err != nil {
			t.Fatal(err)
		}
		return cs.Namespace()
	}
	want := []opened{
		{"namespace opened", "prod-eu", hostOf(connEU), "sas", "amqp"},
		{"namespace opened", "prod-us", hostOf(connUS), "sas", "amqp"},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("namespace opened records = %+v, want %+v\n%s", got, want, c.stderr.String())
	}
	if strings.Contains(c.stderr.String(), "SharedAccessKey=") {
		t.Errorf("the log holds a connection string")
	}
	waitFor(t, "the catalog of prod-eu's dead letter", func() bool {
		var out struct{ Messages []json.RawMessage }
		c.api(t, "GET", "/api/v1/messages?entity=orders-eu", nil, &out)
		return len(out.Messages) == 1
	})
}

// A bad configuration file stops serve before it starts: exit 2, one line
// naming the file, the line and the key.
func TestServeConfigFileRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	misspelt := write("misspelt.yaml", "namespaces:\n  - name: prod-eu\n    connection_string_env: SB_PROD_EU\n  - name: prod-us\n    conection_string_env: SB_PROD_US\n")
	secretIn := write("secret.yaml", "namespaces:\n  - name: prod-eu\n    connection_string: "+goodConnStr+"\n")
	good := write("good.yaml", "namespaces:\n  - name: prod-eu\n    connection_string_env: SB_PROD_EU\n")
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown key", []string{"--config", misspelt}, []string{"SB_PROD_EU=" + goodConnStr},
			"dlqdash: config file " + misspelt + `: line 5: unknown key "conection_string_env" in namespaces[1] (did you mean "connection_string_env"?); run 'dlqdash serve -h' for help`},
		{"a secret in the file", []string{"--config", secretIn}, nil,
			"dlqdash: config file " + secretIn + `: line 3: key "connection_string" in namespaces[0] would put a secret in the file: name an environment variable with connection_string_env or a file with connection_string_file instead; run 'dlqdash serve -h' for help`},
		{"unset variable", nil, []string{envConfig + "=" + good},
			"dlqdash: config file " + good + ": line 3: connection_string_env in namespaces[0] (prod-eu): the environment variable SB_PROD_EU is not set (or empty): it should hold the connection string; run 'dlqdash serve -h' for help"},
		{"with SERVICEBUS_CONNECTION_STRING", []string{"--config", good}, []string{"SB_PROD_EU=" + goodConnStr, envConnectionString + "=" + goodConnStr},
			"dlqdash: both --config (from --config) and SERVICEBUS_CONNECTION_STRING are set"},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil,
			"dlqdash: cannot read the config file: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "never.db")}, tt.args...)...)
			cmd.Env = append(append(os.Environ(), childEnv+"=1", envConnectionString+"=", "SB_PROD_EU=", envConfig+"="), tt.env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitUsage {
				t.Fatalf("exit = %v, want %d; output:\n%s", err, exitUsage, out)
			}
			if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("output\n got %q\nwant %q", got, tt.want)
			}
			if strings.Contains(string(out), testKey) {
				t.Errorf("the output holds the SAS key")
			}
			if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
				t.Errorf("the database was created: serve started")
			}
		})
	}
}
