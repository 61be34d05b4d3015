package devcred

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// The scope the SDKs ask for (azservicebus internal/sbauth).
var sbScope = policy.TokenRequestOptions{Scopes: []string{"https://servicebus.azure.net//.default"}}

func TestGetToken(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, err := New(testKey, Options{Subject: "alice", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	at, err := c.GetToken(context.Background(), sbScope)
	if err != nil {
		t.Fatal(err)
	}
	if !at.ExpiresOn.Equal(now.Add(time.Hour)) {
		t.Errorf("ExpiresOn = %v, want %v", at.ExpiresOn, now.Add(time.Hour))
	}
	parts := strings.Split(at.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWS", at.Token)
	}
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		t.Errorf("signature is not HS256 over header.payload with the key")
	}
	var header map[string]string
	decode(t, parts[0], &header)
	if header["alg"] != "HS256" || header["typ"] != "JWT" {
		t.Errorf("header = %v", header)
	}
	var claims map[string]any
	decode(t, parts[1], &claims)
	for k, want := range map[string]any{
		"aud": Audience, "sub": "alice",
		"iat": float64(now.Unix()), "exp": float64(now.Add(time.Hour).Unix()),
	} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
}

func TestOptions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, err := New(testKey, Options{Audience: "https://storage.azure.com", Lifetime: -time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	at, err := c.GetToken(context.Background(), sbScope)
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	decode(t, strings.Split(at.Token, ".")[1], &claims)
	if claims["aud"] != "https://storage.azure.com" || claims["exp"] != float64(now.Unix()-60) || claims["sub"] != DefaultSubject {
		t.Errorf("claims = %v", claims)
	}
}

func TestRefusals(t *testing.T) {
	if _, err := New([]byte("short"), Options{}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short key: %v", err)
	}
	c, err := New(testKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetToken(context.Background(), policy.TokenRequestOptions{}); err == nil {
		t.Error("a token for no scope was issued")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.GetToken(ctx, sbScope); err == nil {
		t.Error("a token was issued on a cancelled context")
	}
	// The key is copied: changing the caller's slice does not change tokens.
	key := append([]byte(nil), testKey...)
	c2, _ := New(key, Options{Now: func() time.Time { return time.Unix(1, 0) }})
	a, _ := c2.GetToken(context.Background(), sbScope)
	key[0] ^= 0xff
	b, _ := c2.GetToken(context.Background(), sbScope)
	if a.Token != b.Token {
		t.Error("the credential kept a reference to the caller's key")
	}
}

func decode(t *testing.T, part string, v any) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatalf("%q is not base64url: %v", part, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s is not JSON: %v", raw, err)
	}
}
