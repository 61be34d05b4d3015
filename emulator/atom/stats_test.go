package atom

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// get sends a GET, signed unless signed is false, and returns the response
// and its body.
func (e *faultEnv) get(t *testing.T, path string, signed bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if signed {
		req.Header.Set("Authorization", sign(t, "http://"+req.URL.Host+req.URL.Path, DefaultKeyName, DefaultKey))
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// getStats reads GET /$emulator/stats.
func (e *faultEnv) getStats(t *testing.T) broker.Stats {
	t.Helper()
	resp, body := e.get(t, "/$emulator/stats", true)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /$emulator/stats = %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var st broker.Stats
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("stats body %s: %v", body, err)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(body, &raw); err != nil || raw["totals"] == nil || raw["entities"] == nil {
		t.Fatalf("stats body %s: want totals and entities", body)
	}
	return st
}

func TestStatsEndpoint(t *testing.T) {
	e := newFaultEnv(t, nil)
	// AMQP-side operations are counted by the server on the same namespace.
	e.ns.CountOp(broker.OpPeek, "q1/$DeadLetterQueue", 1)
	e.ns.CountOp(broker.OpPeekedMessages, "q1/$DeadLetterQueue", 40)
	e.ns.CountManagement("q1/$DeadLetterQueue", "com.microsoft:peek-message")

	for _, r := range []struct {
		path   string
		signed bool
		code   int
	}{
		{"/q1", true, http.StatusOK},
		{"/T1/Subscriptions/S1/Rules", true, http.StatusOK},
		{"/$Resources/Queues", true, http.StatusOK},
		{"/q1", false, http.StatusUnauthorized}, // still a request
	} {
		if resp, _ := e.get(t, r.path, r.signed); resp.StatusCode != r.code {
			t.Fatalf("GET %s = %d, want %d", r.path, resp.StatusCode, r.code)
		}
	}
	e.mustNoContent(t, http.MethodPost, "/$emulator/faults/expire-locks?entity=q1")

	st := e.getStats(t)
	if st.Totals.Admin != 4 || st.Totals.Peek != 1 || st.Totals.PeekedMessages != 40 || st.Totals.ManagementOps.PeekMessage != 1 {
		t.Errorf("totals %+v", st.Totals)
	}
	if o := st.Entities["q1"]; o.Admin != 2 {
		t.Errorf("q1 %+v", o)
	}
	if o := st.Entities["t1/subscriptions/s1"]; o.Admin != 1 {
		t.Errorf("t1/subscriptions/s1 %+v", o)
	}
	if o := st.Entities["q1/$deadletterqueue"]; o.Peek != 1 || o.PeekedMessages != 40 || o.Management != 1 {
		t.Errorf("q1/$deadletterqueue %+v", o)
	}
	// Reading the statistics does not count.
	if again := e.getStats(t); again.Totals.Admin != 4 {
		t.Errorf("admin count after reading the stats: %d", again.Totals.Admin)
	}

	if code, _ := e.do(t, http.MethodGet, "/$emulator/stats", "none"); code != http.StatusUnauthorized {
		t.Errorf("unsigned GET = %d, want 401", code)
	}
	if code, _ := e.do(t, http.MethodPost, "/$emulator/stats", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", code)
	}
	if code, detail := e.do(t, http.MethodGet, "/$emulator/stats?entity=q1", ""); code != http.StatusBadRequest {
		t.Errorf("GET with a parameter = %d %s, want 400", code, detail)
	}
	e.mustNoContent(t, http.MethodDelete, "/$EMULATOR/Stats")
	if st := e.getStats(t); st.Totals != (broker.OpCounts{}) || len(st.Entities) != 0 {
		t.Errorf("after DELETE: %+v", st)
	}
}
