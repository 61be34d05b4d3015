package jwtcheck

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// mint signs claims with key under the header alg, as a compact JWS.
func mint(t *testing.T, alg string, key []byte, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	p, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	valid := func() map[string]any {
		return map[string]any{"aud": Audience, "sub": "tester", "iat": now.Unix() - 10, "exp": now.Unix() + 3600}
	}
	with := func(k string, v any) map[string]any {
		c := valid()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	const host = "127.0.0.1:5671"
	for _, tt := range []struct {
		name    string
		token   string
		key     []byte
		wantErr string // "" accepts
	}{
		{"valid", mint(t, "HS256", key, valid()), key, ""},
		{"audience with slash", mint(t, "HS256", key, with("aud", Audience+"/")), key, ""},
		{"audience list", mint(t, "HS256", key, with("aud", []string{"other", Audience})), key, ""},
		{"namespace audience sb://", mint(t, "HS256", key, with("aud", "sb://127.0.0.1/")), key, ""},
		{"namespace audience amqps:// with port", mint(t, "HS256", key, with("aud", "amqps://127.0.0.1:5671")), key, ""},
		{"other namespace", mint(t, "HS256", key, with("aud", "sb://other.servicebus.windows.net/")), key, "audience"},
		{"entity path audience", mint(t, "HS256", key, with("aud", "sb://127.0.0.1/q1")), key, "audience"},
		{"wrong audience", mint(t, "HS256", key, with("aud", "https://storage.azure.com")), key, "audience"},
		{"no audience", mint(t, "HS256", key, with("aud", nil)), key, "no audience"},
		{"expired", mint(t, "HS256", key, with("exp", now.Unix()-1)), key, "expired"},
		{"expires now", mint(t, "HS256", key, with("exp", now.Unix())), key, "expired"},
		{"no expiry", mint(t, "HS256", key, with("exp", nil)), key, "no expiry"},
		{"not yet valid", mint(t, "HS256", key, with("nbf", now.Unix()+60)), key, "not valid before"},
		{"valid nbf", mint(t, "HS256", key, with("nbf", now.Unix()-60)), key, ""},
		{"wrong key", mint(t, "HS256", []byte("another key entirely"), valid()), key, "signature does not match"},
		{"alg none", strings.TrimSuffix(mint(t, "none", key, valid()), "x"), key, "only HS256"},
		{"RS256", mint(t, "RS256", key, valid()), key, "only HS256"},
		{"no key configured", mint(t, "HS256", key, valid()), nil, "no JWT key"},
		{"not a jwt", "SharedAccessSignature sr=x&sig=y&se=1&skn=k", key, "not a JWT"},
		{"garbage header", "!!.e30.AAAA", key, "header"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Verify(tt.token, tt.key, now, host)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want accepted", err)
				}
				if c.Subject != "tester" || !c.Expiry.Equal(now.Add(time.Hour)) {
					t.Errorf("claims = %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Verify = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
	if _, err := Verify(mint(t, "HS256", key, valid()), nil, now, host); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v, want ErrNoKey", err)
	}
	// A payload changed after signing is refused.
	tok := mint(t, "HS256", key, valid())
	parts := strings.Split(tok, ".")
	forged, _ := json.Marshal(with("sub", "admin"))
	parts[1] = base64.RawURLEncoding.EncodeToString(forged)
	if _, err := Verify(strings.Join(parts, "."), key, now, host); err == nil {
		t.Error("a token whose claims were changed after signing was accepted")
	}
}
