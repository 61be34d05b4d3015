package atom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/emulator/broker"
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
func (h *handler) authorize(r *http.Request) (manage bool, err error) {
	unauthorized := func(detail string) error {
		return &httpError{http.StatusUnauthorized, detail}
	}
	hdr := strings.TrimSpace(r.Header.Get("Authorization"))
	if hdr == "" {
		return false, unauthorized("MissingToken: the request has no Authorization header; send a SharedAccessSignature token or an Entra ID bearer token")
	}
	if jwt, ok := bearerToken(hdr); ok {
		if _, err := jwtcheck.Verify(jwt, h.jwtKey, h.now(), r.Host); err != nil {
			return false, unauthorized("InvalidToken: " + err.Error())
		}
		return true, nil
	}
	const scheme = "SharedAccessSignature "
	if len(hdr) < len(scheme) || !strings.EqualFold(hdr[:len(scheme)], scheme) {
		return false, unauthorized("InvalidToken: the Authorization header is not a SharedAccessSignature token")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(hdr[len(scheme):]), "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return false, unauthorized("InvalidToken: malformed SharedAccessSignature field " + strconv.Quote(kv))
		}
		fields[strings.ToLower(k)] = v
	}
	sr, sig, se, skn := fields["sr"], fields["sig"], fields["se"], fields["skn"]
	if sr == "" || sig == "" || se == "" || skn == "" {
		return false, unauthorized("InvalidToken: the SharedAccessSignature token needs sr, sig, se and skn")
	}
	name, err := url.QueryUnescape(skn)
	keys, manage, known := h.keyFor(name)
	if err != nil || !known {
		return false, unauthorized("InvalidSignature: unknown key name " + strconv.Quote(skn))
	}
	expiry, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return false, unauthorized("InvalidToken: se must be a Unix time in seconds, got " + strconv.Quote(se))
	}
	if expiry <= h.now().Unix() {
		return false, unauthorized("ExpiredToken: the SharedAccessSignature token has expired")
	}
	got, err := url.QueryUnescape(sig)
	if err != nil {
		return false, unauthorized("InvalidSignature: the signature is not URL-encoded base64")
	}
	gotRaw, err := base64.StdEncoding.DecodeString(got)
	if err != nil {
		return false, unauthorized("InvalidSignature: the signature is not base64")
	}
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(sr + "\n" + se))
		if hmac.Equal(gotRaw, mac.Sum(nil)) {
			return manage, nil
		}
	}
	return false, unauthorized("InvalidSignature: the token signature does not match the key " + strconv.Quote(name))
}

// keyFor returns the keys of the SAS key name and whether it has the Manage
// right: the handler's own key (every right) or one of Options.Rules (its
// primary and secondary key).
func (h *handler) keyFor(name string) (keys [][]byte, manage, ok bool) {
	if name == h.keyName {
		return [][]byte{h.key}, true, true
	}
	for _, r := range h.rules {
		if r.KeyName != name {
			continue
		}
		for _, k := range []string{r.PrimaryKey, r.SecondaryKey} {
			if k != "" {
				keys = append(keys, []byte(k))
			}
		}
		return keys, slices.Contains(r.Rights, "Manage"), true
	}
	return nil, false, false
}

// withoutManage answers a request signed with a key that lacks the Manage
// right, as Azure does: writes and deletes are refused (401 "Authorization
// failed for specified action: Manage,EntityWrite." / "...EntityDelete."),
// and so are reads (401 "Manage,EntityRead claims required for this
// operation."), except that reading an entity that does not exist is the
// usual 404 (the SDK's GetQueue then returns nil, no error).
func (h *handler) withoutManage(r *http.Request) error {
	unauthorized := func(detail string) error {
		return &httpError{http.StatusUnauthorized, detail}
	}
	if op := subscriptionOperation(r); op != "" {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		return unauthorized(fmt.Sprintf("401 SubCode=40100: Unauthorized : Unauthorized access for '%s' operation on endpoint 'sb://%s/%s'.",
			op, host, strings.Trim(r.URL.Path, "/")))
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodDelete:
		return unauthorized("Authorization failed for specified action: Manage,EntityDelete.")
	default:
		return unauthorized("Authorization failed for specified action: Manage,EntityWrite.")
	}
	probe := &discardWriter{header: http.Header{}, code: http.StatusOK}
	if err := h.route(probe, r); err != nil {
		var he *httpError
		if errors.Is(err, broker.ErrNotFound) || errors.As(err, &he) && he.code == http.StatusNotFound {
			return err
		}
	}
	return unauthorized("Manage,EntityRead claims required for this operation.")
}

// subscriptionOperation names the operation of a request under
// TOPIC/Subscriptions as Azure's refusal does ('GetSubscription',
// 'EnumerateSubscriptions', 'CreateOrUpdateSubscription',
// 'DeleteSubscription'; under a subscription's Rules the same with Rule),
// or returns "" for any other path. Without Manage such requests are
// refused even when the subscription does not exist.
func subscriptionOperation(r *http.Request) string {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	at := -1
	for i := 1; i < len(segs); i++ {
		if strings.EqualFold(segs[i], "Subscriptions") {
			at = i
			break
		}
	}
	if at < 0 {
		return ""
	}
	kind, list := "Subscription", len(segs) == at+1
	if len(segs) > at+2 {
		kind, list = "Rule", len(segs) == at+3
	}
	switch {
	case list:
		return "Enumerate" + kind + "s"
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return "Get" + kind
	case r.Method == http.MethodDelete:
		return "Delete" + kind
	default:
		return "CreateOrUpdate" + kind
	}
}

// discardWriter is a ResponseWriter that keeps only the status code.
type discardWriter struct {
	header http.Header
	code   int
}

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }

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
