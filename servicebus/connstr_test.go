package servicebus

import (
	"context"
	"strings"
	"testing"
)

// TestOpenConnectionStringErrors: Open reports what is wrong with a
// connection string (connstr.Parse's tests cover every case), and never the
// string or its secrets.
func TestOpenConnectionStringErrors(t *testing.T) {
	const key = "c2VjcmV0LWtleS12YWx1ZQ=="
	for _, tt := range []struct{ in, want string }{
		{"", "connection string is empty"},
		{"SharedAccessKeyName=Root;SharedAccessKey=" + key, "connection string has no Endpoint"},
		{"Endpoint=https://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key, "connection string has an Endpoint that is not an sb:// address"},
		{"Endpoint=sb://user:" + key + "@ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key, "user information"},
		{"Endpoint=sb://ns/;SharedAccessKey=" + key, "connection string has SharedAccessKey but no SharedAccessKeyName"},
		{"Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=" + key + ";UseDevelopmentEmulator=" + key, "UseDevelopmentEmulator"},
	} {
		_, err := Open(context.Background(), tt.in, Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q): error %v, want one containing %q", tt.in, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("Open's error shows the key: %v", err)
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
