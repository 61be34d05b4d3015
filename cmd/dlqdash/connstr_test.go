package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const (
	testKey = "c2VjcmV0LWtleS12YWx1ZQ=="
	testSAS = "SharedAccessSignature sr=sb%3a%2f%2fx&sig=c2lnbmF0dXJl&se=1&skn=k"
)

func TestParseConnectionString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ConnectionString // compared on exported fields
	}{
		{"azure key", "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey,
			ConnectionString{Host: "contoso.servicebus.windows.net", KeyName: "RootManageSharedAccessKey"}},
		{"microsoft emulator", "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;",
			ConnectionString{Host: "localhost", KeyName: "RootManageSharedAccessKey", UseDevelopmentEmulator: true}},
		{"port and entity path", "Endpoint=sb://127.0.0.1:5672/;SharedAccessKeyName=k;SharedAccessKey=" + testKey + ";EntityPath=orders",
			ConnectionString{Host: "127.0.0.1", Port: 5672, KeyName: "k", EntityPath: "orders"}},
		{"signature", "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessSignature=" + testSAS,
			ConnectionString{Host: "contoso.servicebus.windows.net"}},
		{"keys are case-insensitive, spaces trimmed, unknown keys ignored", " endpoint = sb://h ; sharedaccesskeyname=k; SHAREDACCESSKEY=" + testKey + "; TransportType=Amqp ;usedevelopmentemulator=False",
			ConnectionString{Host: "h", KeyName: "k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConnectionString(tt.in)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got.Host != tt.want.Host || got.Port != tt.want.Port || got.KeyName != tt.want.KeyName ||
				got.EntityPath != tt.want.EntityPath || got.UseDevelopmentEmulator != tt.want.UseDevelopmentEmulator {
				t.Errorf("got %+v, want %+v", fields(got), fields(tt.want))
			}
			if got.Raw() != tt.in {
				t.Errorf("Raw() does not return the input")
			}
			assertNoSecret(t, "String", got.String())
			assertNoSecret(t, "%v", fmt.Sprintf("%v", got))
			assertNoSecret(t, "%+v", fmt.Sprintf("%+v", got))
			assertNoSecret(t, "%#v", fmt.Sprintf("%#v", got))
			var b strings.Builder
			slog.New(slog.NewTextHandler(&b, nil)).Info("x", "cs", got)
			slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "cs", got)
			assertNoSecret(t, "slog", b.String())
		})
	}
}

func fields(c ConnectionString) string {
	return fmt.Sprintf("host=%s port=%d key_name=%s entity=%s emulator=%v", c.Host, c.Port, c.KeyName, c.EntityPath, c.UseDevelopmentEmulator)
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{testKey, "c2VjcmV0", "c2lnbmF0dXJl", "SAS_KEY_VALUE", "hunter2"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s output contains a secret: %s", what, s)
		}
	}
}

func TestParseConnectionStringErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "  ", "is empty"},
		{"no equals", "Endpoint=sb://h;hunter2;SharedAccessKeyName=k", "part 2 has no '='"},
		{"no endpoint", "SharedAccessKeyName=k;SharedAccessKey=hunter2", "has no Endpoint"},
		{"http endpoint", "Endpoint=https://h/;SharedAccessKeyName=k;SharedAccessKey=hunter2", "not an sb:// address"},
		{"endpoint without host", "Endpoint=sb://;SharedAccessKeyName=k;SharedAccessKey=hunter2", "without a host"},
		{"endpoint with user info", "Endpoint=sb://k:hunter2@h/;SharedAccessKeyName=k;SharedAccessKey=hunter2", "user information"},
		{"endpoint with path", "Endpoint=sb://h/orders;SharedAccessKeyName=k;SharedAccessKey=hunter2", "path or query"},
		{"bad port", "Endpoint=sb://h:99999;SharedAccessKeyName=k;SharedAccessKey=hunter2", "port"},
		{"key without name", "Endpoint=sb://h;SharedAccessKey=hunter2", "no SharedAccessKeyName"},
		{"name without key", "Endpoint=sb://h;SharedAccessKeyName=k", "no SharedAccessKey"},
		{"no credentials", "Endpoint=sb://h", "no credentials"},
		{"key and signature", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=hunter2;SharedAccessSignature=hunter2", "both"},
		{"empty key", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=", "empty SharedAccessKey"},
		{"duplicate key", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=hunter2;SharedAccessKey=hunter2", "more than once"},
		{"bad emulator flag", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=hunter2;UseDevelopmentEmulator=hunter2", "neither true nor false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConnectionString(tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			assertNoSecret(t, "error", err.Error())
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error has more than one line: %q", err)
			}
		})
	}
}
