package amqpserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/jwtcheck"
)

const (
	sasTokenType = "servicebus.windows.net:sastoken"
	jwtTokenType = "jwt"
)

// rpcResponse builds a management/CBS reply. Both spellings of the status keys are
// sent: the Go SDK reads status-code, other SDKs read statusCode. The code must be an
// AMQP int (int32): the SDK rejects long or uint.
func rpcResponse(code int32, desc string, value any) *goamqp.Message {
	return &goamqp.Message{
		Properties: &goamqp.MessageProperties{},
		ApplicationProperties: map[string]any{
			"status-code":        code,
			"status-description": desc,
			"statusCode":         code,
			"statusDescription":  desc,
		},
		Value: value,
	}
}

// handleCBS answers put-token. A SAS token is checked against the server's key; a JWT
// (an Entra ID token from a TokenCredential) against Options.JWTKey, its audience and
// expiry (package jwtcheck), and refused when no key is configured. A refused token gets
// 401, as on Azure, which the SDK surfaces as CodeUnauthorizedAccess. An audience naming
// a missing entity gets 404, which is how the SDK surfaces CodeNotFound.
func (c *conn) handleCBS(req *goamqp.Message) *goamqp.Message {
	s := c.s
	op, _ := req.ApplicationProperties["operation"].(string)
	if op != "put-token" {
		return rpcResponse(statusBadRequest, fmt.Sprintf("unsupported $cbs operation %q", op), nil)
	}
	tokenType, _ := req.ApplicationProperties["type"].(string)
	audience, _ := req.ApplicationProperties["name"].(string)
	token, _ := req.Value.(string)
	if audience == "" {
		return rpcResponse(statusBadRequest, "put-token without an audience (name)", nil)
	}
	var rights []string
	switch tokenType {
	case jwtTokenType:
		if _, err := jwtcheck.Verify(token, s.opts.JWTKey, s.opts.Now(), hostOf(audience)); err != nil {
			s.log.Info("emulator: put-token rejected", "audience", audience, "token_type", tokenType, "error", err)
			return rpcResponse(statusUnauthorized, "Unauthorized: "+err.Error(), nil)
		}
		rights = allRights
	case sasTokenType, "":
		var err error
		if rights, err = s.checkSAS(token, audience); err != nil {
			s.log.Info("emulator: put-token rejected", "audience", audience, "error", err)
			var expired expiredTokenError
			if errors.As(err, &expired) {
				// Azure's words, which the SDK's callers match on.
				return rpcResponse(statusUnauthorized, expired.Error(), nil)
			}
			return rpcResponse(statusUnauthorized, "Unauthorized: "+err.Error(), nil)
		}
	default:
		return rpcResponse(statusBadRequest, fmt.Sprintf("unsupported token type %q", tokenType), nil)
	}
	path := entityFromAudience(audience)
	if path != "" {
		if _, err := s.ns.Resolve(path); err != nil {
			status := statusNotFound
			if !errors.Is(err, broker.ErrNotFound) {
				status = brokerStatus(err)
			}
			return rpcResponse(status, fmt.Sprintf("The messaging entity '%s' could not be found.", path), nil)
		}
	}
	c.recordGrant(audience, rights)
	return rpcResponse(statusAccepted, "Accepted", nil)
}

// expiredTokenError is a SAS token past its se, described as Azure describes
// it on $cbs: "ExpiredToken: The token is expired. Expiration time:
// '2019-04-11 21:12:56Z'" (UTC).
type expiredTokenError struct{ at time.Time }

func (e expiredTokenError) Error() string {
	return "ExpiredToken: The token is expired. Expiration time: '" + e.at.UTC().Format("2006-01-02 15:04:05Z") + "'"
}

// entityFromAudience turns amqp://host:port/q1/$management into q1.
func entityFromAudience(aud string) string {
	p := stripScheme(aud)
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	} else {
		p = ""
	}
	p = strings.TrimSuffix(p, "/")
	if isMgmtAddress(p) {
		p = p[:len(p)-len(mgmtSuffix)]
	}
	return p
}

// hostOf is the host[:port] of an audience such as amqps://host:port/q1.
func hostOf(aud string) string {
	h, _, _ := strings.Cut(stripScheme(aud), "/")
	return h
}

func stripScheme(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		return s[i+3:]
	}
	return s
}

// checkSAS validates "SharedAccessSignature sr=..&sig=..&se=..&skn=..": the key name,
// the expiry, the HMAC-SHA256 over the (already lower-cased, query-escaped) sr, and that
// the token's resource covers the audience.
func (s *Server) checkSAS(token, audience string) ([]string, error) {
	const prefix = "SharedAccessSignature "
	if !strings.HasPrefix(token, prefix) {
		return nil, errors.New("token is not a SharedAccessSignature")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(token[len(prefix):], "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("malformed token field %q", kv)
		}
		fields[k] = v
	}
	sr, sig, se, skn := fields["sr"], fields["sig"], fields["se"], fields["skn"]
	if sr == "" || sig == "" || se == "" || skn == "" {
		return nil, errors.New("token lacks sr, sig, se or skn")
	}
	keys, rights, ok := s.keyFor(skn)
	if !ok {
		return nil, fmt.Errorf("unknown key name %q", skn)
	}
	exp, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad expiry %q: %w", se, err)
	}
	if exp <= s.opts.Now().Unix() {
		return nil, expiredTokenError{at: time.Unix(exp, 0)}
	}
	sigText, err := url.QueryUnescape(sig)
	if err != nil {
		return nil, fmt.Errorf("bad signature encoding: %w", err)
	}
	got, err := base64.StdEncoding.DecodeString(sigText)
	if err != nil || !signedByOne(got, sr+"\n"+se, keys) {
		return nil, errors.New("invalid signature")
	}
	resource, err := url.QueryUnescape(sr)
	if err != nil {
		return nil, fmt.Errorf("bad resource encoding: %w", err)
	}
	res := strings.TrimSuffix(strings.ToLower(stripScheme(resource)), "/")
	aud := strings.TrimSuffix(strings.ToLower(stripScheme(audience)), "/")
	if aud != res && !strings.HasPrefix(aud, res+"/") {
		return nil, fmt.Errorf("token for %q does not cover %q", resource, audience)
	}
	return rights, nil
}

// signedByOne reports whether sig is the HMAC-SHA256 of text with one of keys.
func signedByOne(sig []byte, text string, keys []string) bool {
	for _, k := range keys {
		mac := hmac.New(sha256.New, []byte(k))
		mac.Write([]byte(text))
		if hmac.Equal(sig, mac.Sum(nil)) {
			return true
		}
	}
	return false
}
