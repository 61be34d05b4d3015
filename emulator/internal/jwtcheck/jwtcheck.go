// Package jwtcheck checks the Entra ID style tokens (JWTs) the emulator
// accepts in place of Microsoft Entra ID: an azcore.TokenCredential asks for
// the scope https://servicebus.azure.net//.default and hands the SDK a JWT,
// which the SDK puts on $cbs with token type "jwt" (data plane) or in the
// Authorization header (admin API). Azure checks the token's issuer
// signature, audience and lifetime; the emulator, which has no identity
// provider, checks an HS256 signature against a key it is configured with,
// and the same audience and lifetime.
//
// It is the emulator's own code: it shares nothing with the signing side
// (servicebus/devcred), so that each checks the other.
package jwtcheck

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Audience is the audience of every token Entra ID issues for Service Bus.
const Audience = "https://servicebus.azure.net"

// Claims are the checked claims of a token.
type Claims struct {
	Subject  string
	Audience []string
	Expiry   time.Time
}

// ErrNoKey is returned when no key is configured: every JWT is refused.
var ErrNoKey = errors.New("the emulator has no JWT key configured (DLQDASH_EMULATOR_JWT_KEY or --jwt-key-file), so it accepts no Entra ID tokens")

// Verify checks token, a compact JWS: the algorithm is HS256 and the
// signature the HMAC-SHA256 of "header.payload" with key; exp is present
// and after now; nbf, when present, is not after now; and one audience is
// https://servicebus.azure.net (with or without a trailing slash) or names
// the namespace host itself (sb://host/, amqps://host/, https://host/; the
// port is ignored). host is the namespace host the client addressed.
func Verify(token string, key []byte, now time.Time, host string) (Claims, error) {
	if len(key) == 0 {
		return Claims{}, ErrNoKey
	}
	token = strings.TrimSpace(token)
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, errors.New("the token is not a JWT (want header.payload.signature)")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodePart(parts[0], &header); err != nil {
		return Claims{}, fmt.Errorf("the token's header: %w", err)
	}
	if header.Alg != "HS256" {
		return Claims{}, fmt.Errorf("the token is signed with %q; the emulator accepts only HS256", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return Claims{}, errors.New("the token's signature is not base64url")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return Claims{}, errors.New("the token's signature does not match the emulator's JWT key")
	}
	var payload struct {
		Sub string          `json:"sub"`
		Aud json.RawMessage `json:"aud"`
		Exp *json.Number    `json:"exp"`
		Nbf *json.Number    `json:"nbf"`
	}
	if err := decodePart(parts[1], &payload); err != nil {
		return Claims{}, fmt.Errorf("the token's claims: %w", err)
	}
	c := Claims{Subject: payload.Sub}
	if payload.Exp == nil {
		return Claims{}, errors.New("the token has no expiry (exp)")
	}
	exp, err := unixTime(*payload.Exp)
	if err != nil {
		return Claims{}, fmt.Errorf("the token's exp: %w", err)
	}
	c.Expiry = exp
	if !now.Before(exp) {
		return Claims{}, fmt.Errorf("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if payload.Nbf != nil {
		nbf, err := unixTime(*payload.Nbf)
		if err != nil {
			return Claims{}, fmt.Errorf("the token's nbf: %w", err)
		}
		if now.Before(nbf) {
			return Claims{}, fmt.Errorf("the token is not valid before %s", nbf.UTC().Format(time.RFC3339))
		}
	}
	if c.Audience, err = audiences(payload.Aud); err != nil {
		return Claims{}, err
	}
	for _, aud := range c.Audience {
		if audienceOK(aud, host) {
			return c, nil
		}
	}
	return Claims{}, fmt.Errorf("the token's audience %q is not %s (nor this namespace, sb://%s/)", c.Audience, Audience, hostOnly(host))
}

func decodePart(s string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return errors.New("not base64url")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return errors.New("not a JSON object")
	}
	return nil
}

func unixTime(n json.Number) (time.Time, error) {
	f, err := n.Float64()
	if err != nil {
		return time.Time{}, errors.New("not a number of seconds")
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), nil
}

// audiences reads aud, a string or an array of strings.
func audiences(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, errors.New("the token has no audience (aud)")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return nil, errors.New("the token's aud is neither a string nor a list of strings")
	}
	return many, nil
}

func audienceOK(aud, host string) bool {
	if strings.TrimSuffix(aud, "/") == Audience {
		return true
	}
	u, err := url.Parse(aud)
	if err != nil || host == "" {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "sb", "amqps", "amqp", "https":
	default:
		return false
	}
	if u.Path != "" && u.Path != "/" {
		return false
	}
	return strings.EqualFold(hostOnly(u.Host), hostOnly(host))
}

// hostOnly drops a port from host[:port].
func hostOnly(h string) string {
	if name, _, err := net.SplitHostPort(h); err == nil {
		return name
	}
	return strings.Trim(h, "[]")
}
