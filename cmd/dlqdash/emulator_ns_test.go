package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/devcred"
)

func TestParseEmulatorNamespacesTLSAndJWT(t *testing.T) {
	c, err := parseConfig([]string{"emulator", "--namespace", "prod-eu", "--namespace", "name=prod-us,amqp=127.0.0.1:6000,config=us.json",
		"--tls-ca-out", "ca.pem", "--jwt-key-file", "key"}, env())
	if err != nil {
		t.Fatal(err)
	}
	want := []EmulatorNamespace{
		{Name: "prod-eu", AMQPAddr: "127.0.0.1:5672", AdminAddr: "127.0.0.1:5300"},
		{Name: "prod-us", AMQPAddr: "127.0.0.1:6000", AdminAddr: "127.0.0.1:5301", ConfigPath: "us.json"},
	}
	if !reflect.DeepEqual(c.Emulator.Namespaces, want) {
		t.Errorf("Namespaces = %+v, want %+v", c.Emulator.Namespaces, want)
	}
	if c.Emulator.TLSCAOut != "ca.pem" || c.Emulator.TLSCert != "" || c.Emulator.JWTKeyFile != "key" {
		t.Errorf("TLS and JWT = %+v", c.Emulator)
	}

	// The environment's list, replaced by the flags; free ports stay free.
	c, err = parseConfig([]string{"emulator", "--amqp-addr", "127.0.0.1:0"}, env(envEmulatorNamespaces, "a; b,admin=127.0.0.1:0", envEmulatorJWTKey, strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Emulator.Namespaces) != 2 || c.Emulator.Namespaces[1].AMQPAddr != "127.0.0.1:0" || c.Emulator.Namespaces[1].AdminAddr != "127.0.0.1:0" ||
		c.Emulator.Namespaces[0].AdminAddr != "127.0.0.1:5300" || string(c.Emulator.JWTKey) != strings.Repeat("k", 32) {
		t.Errorf("from the environment: %+v", c.Emulator)
	}
	c, err = parseConfig([]string{"emulator", "--namespace", "c"}, env(envEmulatorNamespaces, "a;b"))
	if err != nil || len(c.Emulator.Namespaces) != 1 || c.Emulator.Namespaces[0].Name != "c" {
		t.Errorf("--namespace over the environment: %+v, %v", c.Emulator.Namespaces, err)
	}

	for _, tt := range []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"bad name", []string{"emulator", "--namespace", "prod eu"}, env(), "DNS label"},
		{"unknown key", []string{"emulator", "--namespace", "a,port=1"}, env(), `unknown key "port"`},
		{"bare second part", []string{"emulator", "--namespace", "a,b"}, env(), "not key=value"},
		{"bad address", []string{"emulator", "--namespace", "a,amqp=nope"}, env(), "amqp: want host:port"},
		{"twice", []string{"emulator", "--namespace", "a", "--namespace", "A"}, env(), "given twice"},
		{"cert without key", []string{"emulator", "--tls-cert", "c.pem"}, env(), "both --tls-cert and --tls-key"},
		{"two jwt keys", []string{"emulator", "--jwt-key-file", "k"}, env(envEmulatorJWTKey, strings.Repeat("k", 32)), "not both"},
		{"short jwt key", []string{"emulator"}, env(envEmulatorJWTKey, "short"), "at least 32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, tt.env)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseConfig(%q) = %v, want a usage error about %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestRunEmulatorNamespacesOverTLSWithJWT: `dlqdash emulator` with two
// namespaces, a generated certificate written out and a JWT key file
// prints a line per namespace and logs each one's admin URL; a servicebus
// client signed in with devcred and trusting the written certificate
// reaches each namespace on both planes (entities and counts over HTTPS, a
// peek over AMQPS), and a wrong key is refused naming the namespace.
func TestRunEmulatorNamespacesOverTLSWithJWT(t *testing.T) {
	dir := t.TempDir()
	keyFile, caFile := filepath.Join(dir, "jwt.key"), filepath.Join(dir, "ca.pem")
	key := []byte("cmd-test-jwt-key-0123456789abcdefghij")
	if err := os.WriteFile(keyFile, append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--namespace", "prod-eu", "--namespace", "prod-us", "--tls-ca-out", caFile, "--jwt-key-file", keyFile, "--log-format", "json"}, env(), stdout, stderr)
	}()
	waitFor(t, "two connection strings on stdout", func() bool {
		select {
		case code := <-done:
			t.Fatalf("emulator exited early with %d:\n%s", code, stderr.String())
		default:
		}
		return strings.Count(stdout.String(), "\n") == 2
	})
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	endpoints := map[string]string{}
	for _, l := range lines {
		name, cs, _ := strings.Cut(l, " ")
		if strings.Contains(cs, "UseDevelopmentEmulator") || !strings.HasPrefix(cs, "Endpoint=sb://localhost:") {
			t.Errorf("namespace %s: connection string %q (over TLS it has no emulator flag)", name, cs)
		}
		host, _, _ := strings.Cut(strings.TrimPrefix(cs, "Endpoint=sb://"), ";")
		endpoints[name] = host
	}
	if len(endpoints) != 2 || endpoints["prod-eu"] == "" || endpoints["prod-us"] == "" {
		t.Fatalf("stdout %q", stdout.String())
	}
	admins := map[string]string{}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, `"msg":"emulator ready"`) {
			for _, n := range []string{"prod-eu", "prod-us"} {
				if strings.Contains(l, `"namespace":"`+n+`"`) {
					_, after, _ := strings.Cut(l, `"admin_url":"`)
					admins[n], _, _ = strings.Cut(after, `"`)
				}
			}
		}
	}
	if !strings.HasPrefix(admins["prod-us"], "https://") || admins["prod-eu"] == admins["prod-us"] {
		t.Fatalf("admin URLs %v from\n%s", admins, stderr.String())
	}

	cred, err := devcred.New(key, devcred.Options{})
	if err != nil {
		t.Fatal(err)
	}
	open := func(name string) *servicebus.Client {
		c, err := servicebus.OpenWithCredential(ctx, endpoints[name], cred, servicebus.Options{
			Name: name, AdminEndpoint: admins[name], TLSCAFile: caFile, Retry: servicebus.Retry{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	us, eu := open("prod-us"), open("prod-eu")
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	entsUS, err := us.Entities(cctx)
	if err != nil || len(entsUS) == 0 {
		t.Fatalf("prod-us entities over TLS with devcred: %v, %v", entsUS, err)
	}
	queue := ""
	for _, e := range entsUS {
		if e.Kind == dlq.KindQueue {
			queue = e.Path
			break
		}
	}
	if _, err := us.Peek(cctx, queue, dlq.SubQueueDeadLetter, 0, 10); err != nil {
		t.Fatalf("prod-us peek of %s over AMQPS with devcred: %v", queue, err)
	}
	if _, err := eu.Entities(cctx); err != nil {
		t.Fatalf("prod-eu entities: %v", err)
	}

	// A wrong key is refused with the namespace's name.
	wrong, _ := devcred.New([]byte("not-the-emulator-key-0123456789abcdef"), devcred.Options{})
	bad, err := servicebus.OpenWithCredential(ctx, endpoints["prod-eu"], wrong, servicebus.Options{
		Name: "prod-eu", AdminEndpoint: admins["prod-eu"], TLSCAFile: caFile, Retry: servicebus.Retry{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close(context.Background())
	if _, err := bad.Entities(cctx); !errors.Is(err, dlq.ErrUnauthorized) || !strings.Contains(err.Error(), "refused the credential for prod-eu") {
		t.Errorf("wrong key: %v", err)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("emulator did not stop")
	}
}
