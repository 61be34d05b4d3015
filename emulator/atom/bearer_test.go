package atom

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// rawDo sends method path with the Authorization header auth.
func rawDo(t *testing.T, e *env, method, path, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path+"?api-version=2021-05", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestBearerTokens: an Entra-style token signed with the configured key is
// accepted as "Bearer <jwt>" and bare (as azservicebus's admin client sends
// it); another key, an expired token or another audience get 401 and reach
// nothing; SAS keeps working beside it.
func TestBearerTokens(t *testing.T) {
	key := []byte("atom-test-jwt-key-0123456789abcdef")
	e := newEnv(t, Options{JWTKey: key})
	const aud = "https://servicebus.azure.net"
	good := mintJWT(key, aud, time.Hour)
	for _, tt := range []struct {
		name string
		auth string
		want int
	}{
		{"bearer", "Bearer " + good, http.StatusOK},
		{"bearer lower-case", "bearer " + good, http.StatusOK},
		{"bare jwt", good, http.StatusOK},
		{"namespace audience", mintJWT(key, "sb://"+e.srv.Listener.Addr().String()+"/", time.Hour), http.StatusOK},
		{"other key", "Bearer " + mintJWT([]byte("another-key-0123456789abcdef01234"), aud, time.Hour), http.StatusUnauthorized},
		{"expired", "Bearer " + mintJWT(key, aud, -time.Second), http.StatusUnauthorized},
		{"other audience", "Bearer " + mintJWT(key, "https://management.azure.com", time.Hour), http.StatusUnauthorized},
		{"sas", sign(t, "https://127.0.0.1/$Resources/Queues", DefaultKeyName, DefaultKey), http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := rawDo(t, e, http.MethodGet, "/$Resources/Queues", tt.auth)
			if code != tt.want {
				t.Errorf("GET /$Resources/Queues = %d (%s), want %d", code, body, tt.want)
			}
		})
	}
	code, _ := rawDo(t, e, http.MethodPut, "/made-by-a-forged-token", "Bearer "+mintJWT([]byte("another-key-0123456789abcdef01234"), aud, time.Hour))
	if _, err := e.ns.Queue("made-by-a-forged-token"); code != http.StatusUnauthorized || err == nil {
		t.Errorf("PUT with a forged token = %d and created the queue (%v)", code, err)
	}
}
