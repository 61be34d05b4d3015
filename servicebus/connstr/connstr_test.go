package connstr

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// The tables are the union of the two parsers' tables this package replaced
// (cmd/dlqdash and servicebus each had one).

const (
	testKey = "c2VjcmV0LWtleS12YWx1ZQ=="
	testSAS = "SharedAccessSignature sr=sb%3a%2f%2fx&sig=c2lnbmF0dXJl&se=1&skn=k"
	// testSig is a signature whose escaped and unescaped forms differ.
	testSig = "abcDEF123%2B%2F%3D"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      ConnectionString // compared on exported fields
		namespace string
	}{
		{"azure key", "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey,
			ConnectionString{Host: "contoso.servicebus.windows.net", KeyName: "RootManageSharedAccessKey"}, "contoso.servicebus.windows.net"},
		{"microsoft emulator", "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;",
			ConnectionString{Host: "localhost", KeyName: "RootManageSharedAccessKey", UseDevelopmentEmulator: true}, "localhost"},
		{"emulator on another port", "Endpoint=sb://127.0.0.1:5673;SharedAccessKeyName=Root;SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true",
			ConnectionString{Host: "127.0.0.1", Port: 5673, KeyName: "Root", UseDevelopmentEmulator: true}, "127.0.0.1:5673"},
		{"port and entity path", "Endpoint=sb://127.0.0.1:5672/;SharedAccessKeyName=k;SharedAccessKey=" + testKey + ";EntityPath=orders",
			ConnectionString{Host: "127.0.0.1", Port: 5672, KeyName: "k", EntityPath: "orders"}, "127.0.0.1:5672"},
		{"entity path without port", "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + testKey + ";EntityPath=orders",
			ConnectionString{Host: "ns", KeyName: "Root", EntityPath: "orders"}, "ns"},
		{"signature", "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessSignature=" + testSAS,
			ConnectionString{Host: "contoso.servicebus.windows.net"}, "contoso.servicebus.windows.net"},
		{"signature with an escaped sig", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=ns&sig=" + testSig + "&se=1&skn=Root",
			ConnectionString{Host: "ns.servicebus.windows.net"}, "ns.servicebus.windows.net"},
		{"lower-case keys and a trailing separator", "endpoint=sb://ns.servicebus.windows.net;sharedaccesskeyname=Root;sharedaccesskey=" + testKey + ";",
			ConnectionString{Host: "ns.servicebus.windows.net", KeyName: "Root"}, "ns.servicebus.windows.net"},
		{"keys are case-insensitive, spaces trimmed, unknown keys ignored", " endpoint = sb://h ; sharedaccesskeyname=k; SHAREDACCESSKEY=" + testKey + "; TransportType=Amqp ;usedevelopmentemulator=False",
			ConnectionString{Host: "h", KeyName: "k"}, "h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got.Host != tt.want.Host || got.Port != tt.want.Port || got.KeyName != tt.want.KeyName ||
				got.EntityPath != tt.want.EntityPath || got.UseDevelopmentEmulator != tt.want.UseDevelopmentEmulator {
				t.Errorf("got %+v, want %+v", fields(got), fields(tt.want))
			}
			if got.Namespace() != tt.namespace {
				t.Errorf("Namespace() = %q, want %q", got.Namespace(), tt.namespace)
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
			assertNoSecret(t, "Redact", got.Redact("x "+tt.in+" y"))
		})
	}
}

// TestRedactSignatureAlone: the sig= part of a signature, escaped or not,
// is redacted where it is quoted without the rest.
func TestRedactSignatureAlone(t *testing.T) {
	c, err := Parse("Endpoint=sb://ns/;SharedAccessSignature=SharedAccessSignature sr=ns&sig=" + testSig + "&se=1&skn=Root")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"bad sig " + testSig, "bad sig abcDEF123+/="} {
		if got := c.Redact(in); got != "bad sig "+redacted {
			t.Errorf("Redact(%q) = %q", in, got)
		}
	}
	// Short values are left alone rather than blanking stray substrings.
	short, err := Parse("Endpoint=sb://ns/;SharedAccessKeyName=k;SharedAccessKey=abc")
	if err != nil {
		t.Fatal(err)
	}
	if got := short.Redact("abcdef"); got != "abcdef" {
		t.Errorf("Redact with a 3-character key = %q", got)
	}
}

func fields(c ConnectionString) string {
	return fmt.Sprintf("host=%s port=%d key_name=%s entity=%s emulator=%v", c.Host, c.Port, c.KeyName, c.EntityPath, c.UseDevelopmentEmulator)
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{testKey, "c2VjcmV0", "c2lnbmF0dXJl", testSig, "abcDEF123+/=", "SAS_KEY_VALUE", "hunter2"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s output contains a secret: %s", what, s)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "  ", "is empty"},
		{"nothing at all", "", "is empty"},
		{"no equals", "Endpoint=sb://h;hunter2;SharedAccessKeyName=k", "part 2 has no '='"},
		{"garbage at the end", "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + testKey + ";garbage", "no '='"},
		{"no endpoint", "SharedAccessKeyName=k;SharedAccessKey=hunter2", "has no Endpoint"},
		{"http endpoint", "Endpoint=https://h/;SharedAccessKeyName=k;SharedAccessKey=hunter2", "not an sb:// address"},
		{"endpoint without host", "Endpoint=sb://;SharedAccessKeyName=k;SharedAccessKey=hunter2", "without a host"},
		{"endpoint with user info", "Endpoint=sb://k:hunter2@h/;SharedAccessKeyName=k;SharedAccessKey=hunter2", "user information"},
		{"endpoint with the key as user info", "Endpoint=sb://user:" + testKey + "@ns/;SharedAccessKeyName=Root;SharedAccessKey=" + testKey, "user information"},
		{"endpoint with path", "Endpoint=sb://h/orders;SharedAccessKeyName=k;SharedAccessKey=hunter2", "path or query"},
		{"bad port", "Endpoint=sb://h:99999;SharedAccessKeyName=k;SharedAccessKey=hunter2", "port"},
		{"port zero", "Endpoint=sb://ns:0/;SharedAccessKeyName=Root;SharedAccessKey=" + testKey, "port"},
		{"key without name", "Endpoint=sb://h;SharedAccessKey=hunter2", "no SharedAccessKeyName"},
		{"name without key", "Endpoint=sb://h;SharedAccessKeyName=k", "no SharedAccessKey"},
		{"no credentials", "Endpoint=sb://h", "no credentials"},
		{"key and signature", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=hunter2;SharedAccessSignature=hunter2", "both"},
		{"empty key", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=", "empty SharedAccessKey"},
		{"duplicate key", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=hunter2;SharedAccessKey=hunter2", "more than once"},
		{"bad emulator flag", "Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=hunter2;UseDevelopmentEmulator=hunter2", "neither true nor false"},
		{"emulator flag holding the key", "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=" + testKey, "UseDevelopmentEmulator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.in)
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
