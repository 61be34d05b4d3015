package servicebus

import (
	"context"
	"strings"
	"testing"
)

func TestParseConnString(t *testing.T) {
	const key = "c2VjcmV0LWtleS12YWx1ZQ=="
	const sig = "abcDEF123%2B%2F%3D"
	for _, tt := range []struct {
		in        string
		namespace string
		emulator  bool
		err       string // substring; "" means valid
	}{
		{in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=" + key, namespace: "ns.servicebus.windows.net"},
		{in: "endpoint=sb://ns.servicebus.windows.net;sharedaccesskeyname=Root;sharedaccesskey=" + key + ";", namespace: "ns.servicebus.windows.net"},
		{in: "Endpoint=sb://localhost;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true;", namespace: "localhost", emulator: true},
		{in: "Endpoint=sb://127.0.0.1:5673;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true", namespace: "127.0.0.1:5673", emulator: true},
		{in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=ns&sig=" + sig + "&se=1&skn=Root", namespace: "ns.servicebus.windows.net"},
		{in: "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";EntityPath=orders", namespace: "ns"},
		{in: "", err: "no Endpoint"},
		{in: "SharedAccessKeyName=Root;SharedAccessKey=" + key, err: "no Endpoint"},
		{in: "Endpoint=https://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key, err: "not an sb://"},
		{in: "Endpoint=sb://user:" + key + "@ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key, err: "not an sb://"},
		{in: "Endpoint=sb://ns:0/;SharedAccessKeyName=Root;SharedAccessKey=" + key, err: "port"},
		{in: "Endpoint=sb://ns/;SharedAccessKey=" + key, err: "without SharedAccessKeyName"},
		{in: "Endpoint=sb://ns/;SharedAccessKeyName=Root", err: "without SharedAccessKey"},
		{in: "Endpoint=sb://ns/", err: "no credentials"},
		{in: "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";SharedAccessSignature=x", err: "both"},
		{in: "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";UseDevelopmentEmulator=" + key, err: "UseDevelopmentEmulator"},
		{in: "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";garbage", err: "no '='"},
	} {
		c, err := parseConnString(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parse %q: error %v, want one about %q", tt.in, err, tt.err)
			}
			if err != nil && (strings.Contains(err.Error(), key) || strings.Contains(err.Error(), sig)) {
				t.Errorf("parse error shows a secret: %v", err)
			}
			// Open reports the same errors, and never the string.
			if _, err := Open(context.Background(), tt.in, Options{}); err == nil || strings.Contains(err.Error(), key) {
				t.Errorf("Open(%q): %v", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parse %q: %v", tt.in, err)
			continue
		}
		if c.namespace() != tt.namespace || c.emulator != tt.emulator {
			t.Errorf("parse %q: namespace %q emulator %v, want %q %v", tt.in, c.namespace(), c.emulator, tt.namespace, tt.emulator)
		}
		if got := c.redact("x " + tt.in + " y"); strings.Contains(got, key) || strings.Contains(got, sig) {
			t.Errorf("redact left a secret: %s", got)
		}
	}
}

func TestOpenAdminEndpoint(t *testing.T) {
	const key = ";SharedAccessKeyName=Root;SharedAccessKey=c2VjcmV0"
	for _, tt := range []struct {
		conn, endpoint string
		want           string // adminBase; "" means Open fails
	}{
		{"Endpoint=sb://ns.servicebus.windows.net/" + key, "", "https://ns.servicebus.windows.net/"},
		{"Endpoint=sb://localhost" + key + ";UseDevelopmentEmulator=true", "", "http://localhost:5300/"},
		{"Endpoint=sb://10.0.0.5:5673" + key + ";UseDevelopmentEmulator=true", "", "http://10.0.0.5:5300/"},
		{"Endpoint=sb://localhost" + key + ";UseDevelopmentEmulator=true", "http://127.0.0.1:9999", "http://127.0.0.1:9999/"},
		{"Endpoint=sb://ns.servicebus.windows.net/" + key, "https://proxy.example:8443/", "https://proxy.example:8443/"},
		{"Endpoint=sb://ns/" + key, "ftp://x", ""},
		{"Endpoint=sb://ns/" + key, "http://x/admin", ""},
		{"Endpoint=sb://ns/" + key, "127.0.0.1:5300", ""},
	} {
		c, err := Open(context.Background(), tt.conn, Options{AdminEndpoint: tt.endpoint})
		if tt.want == "" {
			if err == nil {
				t.Errorf("Open(%q, AdminEndpoint %q) succeeded", tt.conn, tt.endpoint)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q, AdminEndpoint %q): %v", tt.conn, tt.endpoint, err)
			continue
		}
		if c.adminBase != tt.want {
			t.Errorf("Open(%q, AdminEndpoint %q): admin at %q, want %q", tt.conn, tt.endpoint, c.adminBase, tt.want)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close of an unused client: %v", err)
		}
	}
}
