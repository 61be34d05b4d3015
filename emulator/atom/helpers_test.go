package atom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

func policyRetry() policy.RetryOptions { return policy.RetryOptions{MaxRetries: -1} }

// assertJSONEqual compares values through their JSON form, which follows
// pointers and shows a readable difference.
func assertJSONEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// sign builds a SharedAccessSignature header the way Service Bus clients do:
// sr is the lower-case query-escaped resource URL, signed as written.
func sign(t *testing.T, resource, keyName, key string) string {
	t.Helper()
	sr := strings.ToLower(url.QueryEscape(resource))
	se := fmt.Sprint(time.Now().Add(time.Hour).Unix())
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, keyName)
}

func TestTimeText(t *testing.T) {
	for _, tt := range []struct {
		in   time.Time
		want string
	}{
		{time.Time{}, "0001-01-01T00:00:00"},
		{time.Unix(0, 0), "0001-01-01T00:00:00"},
		{time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600)), "2026-01-02T02:04:05.1234567Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05Z"},
	} {
		if got := timeText(tt.in); got != tt.want {
			t.Errorf("timeText(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// mintJWT signs an HS256 token for aud expiring in ttl.
func mintJWT(key []byte, aud string, ttl time.Duration) string {
	enc := base64.RawURLEncoding
	p, _ := json.Marshal(map[string]any{"aud": aud, "sub": "atom-test", "exp": time.Now().Add(ttl).Unix()})
	signing := enc.EncodeToString([]byte(`{"alg":"HS256"}`)) + "." + enc.EncodeToString(p)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}
