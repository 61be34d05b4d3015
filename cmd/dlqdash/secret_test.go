package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// testKey is a SharedAccessKey that must never be printed.
const testKey = "c2VjcmV0LWtleS12YWx1ZQ=="

// assertNoSecret fails if s contains one of the secrets the tests use.
func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{testKey, "c2VjcmV0", "c2lnbmF0dXJl", "SAS_KEY_VALUE", "hunter2"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s output contains a secret: %s", what, s)
		}
	}
}

// TestSecretNeverPrints: every way of printing a secret (the emulator's
// key, the OIDC client secret) prints the placeholder.
func TestSecretNeverPrints(t *testing.T) {
	s := secret("hunter2")
	cfg := EmulatorConfig{KeyName: "k", Key: s}
	assertNoSecret(t, "String", s.String())
	assertNoSecret(t, "%v", fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, s))
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, "json", string(js))
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "key", s, "cfg", cfg)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "key", s)
	assertNoSecret(t, "slog", b.String())
	if !strings.Contains(b.String(), redacted) {
		t.Errorf("slog output lacks the placeholder: %s", b.String())
	}
	if string(s) != "hunter2" {
		t.Error("the value itself is lost")
	}
}
