package main

import (
	"errors"
	"strings"
	"testing"
)

// Trusting every address as a proxy would let anyone name themselves.
func TestTrustedProxiesRefusesEveryAddress(t *testing.T) {
	for _, p := range []string{"0.0.0.0/0", "::/0", "10.0.0.1,0.0.0.0/0"} {
		_, err := parseConfig([]string{"demo", "--auth", "proxy", "--viewer-groups", "*", "--trusted-proxies", p}, env())
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "trusts every address") || !strings.Contains(err.Error(), "--trusted-proxies") {
			t.Errorf("--trusted-proxies %s: %v, want a usage error saying it trusts every address", p, err)
		}
	}
	if _, err := parseConfig([]string{"demo", "--auth", "proxy", "--viewer-groups", "*", "--trusted-proxies", "10.0.0.0/8,::1"}, env()); err != nil {
		t.Errorf("a real proxy range: %v", err)
	}
}
