package atom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/emulator/internal/jwtcheck"
)

// authorize checks the SharedAccessSignature token in the Authorization
// header: "SharedAccessSignature sr=<resource>&sig=<signature>&se=<expiry>&skn=<key name>".
// The signature is HMAC-SHA256 with the key over sr + "\n" + se, sr exactly
// as it appears in the token (clients sign their escaped form). The resource
// is not compared with the request URL: the SDK signs the https URL of the
// real namespace, which a local transport rewrites.
//
// An Entra ID token (JWT) is accepted too, as "Bearer <jwt>" or bare (the
// admin client of azservicebus sends the token it got from its
// TokenCredential without a scheme): it is checked like a jwt token on $cbs
// (package jwtcheck: HS256 with Options.JWTKey, audience, expiry), the
// request's Host standing for the namespace host.
func (h *handler) authorize(r *http.Request) error {
	unauthorized := func(detail string) error {
		return &httpError{http.StatusUnauthorized, detail}
	}
	hdr := strings.TrimSpace(r.Header.Get("Authorization"))
	if hdr == "" {
		return unauthorized("MissingToken: the request has no Authorization header; send a SharedAccessSignature token or an Entra ID bearer token")
	}
	if jwt, ok := bearerToken(hdr); ok {
		if _, err := jwtcheck.Verify(jwt, h.jwtKey, h.now(), r.Host); err != nil {
			return unauthorized("InvalidToken: " + err.Error())
		}
		return nil
	}
	const scheme = "SharedAccessSignature "
	if len(hdr) < len(scheme) || !strings.EqualFold(hdr[:len(scheme)], scheme) {
		return unauthorized("InvalidToken: the Authorization header is not a SharedAccessSignature token")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(hdr[len(scheme):]), "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return unauthorized("InvalidToken: malformed SharedAccessSignature field " + strconv.Quote(kv))
		}
		fields[strings.ToLower(k)] = v
	}
	sr, sig, se, skn := fields["sr"], fields["sig"], fields["se"], fields["skn"]
	if sr == "" || sig == "" || se == "" || skn == "" {
		return unauthorized("InvalidToken: the SharedAccessSignature token needs sr, sig, se and skn")
	}
	name, err := url.QueryUnescape(skn)
	if err != nil || name != h.keyName {
		return unauthorized("InvalidSignature: unknown key name " + strconv.Quote(skn))
	}
	expiry, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return unauthorized("InvalidToken: se must be a Unix time in seconds, got " + strconv.Quote(se))
	}
	if expiry <= h.now().Unix() {
		return unauthorized("ExpiredToken: the SharedAccessSignature token has expired")
	}
	got, err := url.QueryUnescape(sig)
	if err != nil {
		return unauthorized("InvalidSignature: the signature is not URL-encoded base64")
	}
	gotRaw, err := base64.StdEncoding.DecodeString(got)
	if err != nil {
		return unauthorized("InvalidSignature: the signature is not base64")
	}
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte(sr + "\n" + se))
	if !hmac.Equal(gotRaw, mac.Sum(nil)) {
		return unauthorized("InvalidSignature: the token signature does not match the key " + strconv.Quote(h.keyName))
	}
	return nil
}

// bearerToken returns the JWT of "Bearer <jwt>" or of a bare JWT (three
// base64url parts, the first a JSON object: "eyJ...").
func bearerToken(hdr string) (string, bool) {
	const scheme = "Bearer "
	if len(hdr) > len(scheme) && strings.EqualFold(hdr[:len(scheme)], scheme) {
		return strings.TrimSpace(hdr[len(scheme):]), true
	}
	if strings.HasPrefix(hdr, "eyJ") && strings.Count(hdr, ".") == 2 && !strings.ContainsAny(hdr, " &=") {
		return hdr, true
	}
	return "", false
}
