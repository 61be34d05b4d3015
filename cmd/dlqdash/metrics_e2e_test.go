package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics GETs url and parses it with Prometheus's own text parser.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// sample returns the value of the series of name whose labels include
// want (a histogram's value is its count); ok is false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	for _, m := range fams[name].GetMetric() {
		match := true
		for _, l := range m.Label {
			if w, in := want[l.GetName()]; in && w != l.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestServeMetrics is /metrics end to end with the real program: `dlqdash
// emulator`, dead letters through the real SDK, `dlqdash serve` against
// it, a discard job through the API; the scrape is parsed as Prometheus
// would parse it.
func TestServeMetrics(t *testing.T) {
	const n = 3
	conn, adminAddr := startTestEmulator(t, "")
	deadLetterN(t, conn, "queue.1", n)

	t.Run("on the dashboard's listener", func(t *testing.T) {
		s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "m.db"), "--poll", "100ms",
			"--admin-endpoint", "http://" + adminAddr}, env(envConnectionString, conn))
		defer s.stop(t)
		url := "http://" + s.addr + "/metrics"
		depth := map[string]string{"entity": "queue.1", "subqueue": "dead_letter"}

		var fams map[string]*dto.MetricFamily
		// The depth is read from the catalog, the freshness from the
		// ingester's memory, which it updates just after its write: wait
		// for both.
		waitFor(t, "the depth of queue.1 and a healthy catalog on /metrics", func() bool {
			fams = scrapeMetrics(t, url)
			v, _ := sample(fams, "dlqdash_dlq_depth", depth)
			h, _ := sample(fams, "dlqdash_catalog_healthy", nil)
			return v == n && h == 1
		})
		if v, _ := sample(fams, "dlqdash_catalog_healthy", nil); v != 1 {
			t.Errorf("catalog_healthy = %v, want 1", v)
		}
		if v, ok := sample(fams, "dlqdash_catalog_lag_seconds", nil); !ok || v < 0 || v > 60 {
			t.Errorf("catalog_lag_seconds = %v (present %v)", v, ok)
		}
		if v, _ := sample(fams, "dlqdash_catalog_last_success_timestamp_seconds", nil); time.Since(time.Unix(int64(v), 0)) > time.Minute {
			t.Errorf("catalog_last_success_timestamp_seconds = %v, not recent", v)
		}
		waitFor(t, "the cataloged messages to be counted", func() bool {
			v, _ := sample(scrapeMetrics(t, url), "dlqdash_messages_cataloged_total", nil)
			return v >= n
		})

		// Requests with ids and unknown paths: labelled by pattern only.
		var list struct {
			Messages []struct {
				ID string `json:"id"`
			} `json:"messages"`
		}
		if code := callAPI(t, s.addr, "GET", "/api/v1/messages?entity=queue.1", nil, &list); code != 200 || len(list.Messages) != n {
			t.Fatalf("message list = %d with %d messages", code, len(list.Messages))
		}
		id := list.Messages[0].ID
		if code := callAPI(t, s.addr, "GET", "/api/v1/messages/"+id, nil, nil); code != 200 {
			t.Fatalf("message %s = %d", id, code)
		}
		if code, _ := get(t, "http://"+s.addr+"/no/such/page-4242"); code != 404 {
			t.Fatalf("unknown page = %d", code)
		}

		// A discard job: its messages count by action and outcome.
		var job struct {
			ID string `json:"id"`
		}
		if code := callAPI(t, s.addr, "POST", "/api/v1/jobs", map[string]any{"action": "discard", "ids": []string{id}, "reason": "metrics test"}, &job); code != 201 {
			t.Fatalf("create job = %d", code)
		}
		waitFor(t, "the discard to be counted and its job completed", func() bool {
			fams = scrapeMetrics(t, url)
			v, _ := sample(fams, "dlqdash_replay_messages_total", map[string]string{"action": "discard", "outcome": "completed"})
			jobs, _ := sample(fams, "dlqdash_replay_jobs", map[string]string{"status": "completed"})
			return v == 1 && jobs == 1
		})
		if v, _ := sample(fams, "dlqdash_replay_messages_total", map[string]string{"action": "replay", "outcome": "completed"}); v != 0 {
			t.Errorf("replay_messages_total{replay,completed} = %v, want 0", v)
		}
		waitFor(t, "the depth to drop after the discard", func() bool {
			fams = scrapeMetrics(t, url)
			v, _ := sample(fams, "dlqdash_dlq_depth", depth)
			return v == n-1
		})

		const hist = "dlqdash_http_request_duration_seconds"
		for _, route := range []string{"GET /api/v1/messages", "GET /api/v1/messages/{id}", "POST /api/v1/jobs", "GET /metrics", "/"} {
			if c, ok := sample(fams, hist, map[string]string{"route": route}); !ok || c < 1 {
				t.Errorf("no %s series for route %q", hist, route)
			}
		}
		if c, _ := sample(fams, hist, map[string]string{"method": "GET", "route": "GET /api/v1/messages", "code": "200"}); c < 1 {
			t.Errorf("no GET /api/v1/messages 200 observation")
		}
		for _, m := range fams[hist].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "route" && (strings.Contains(l.GetValue(), "/"+id) || strings.Contains(l.GetValue(), "4242") || strings.Contains(l.GetValue(), "?")) {
					t.Errorf("route label %q is a raw path", l.GetValue())
				}
			}
		}
		for name := range fams {
			if !strings.HasPrefix(name, "dlqdash_") {
				t.Errorf("metric %s lacks the dlqdash_ prefix", name)
			}
		}
	})

	t.Run("on a listener of its own", func(t *testing.T) {
		s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "m2.db"),
			"--poll", "100ms", "--admin-endpoint", "http://" + adminAddr}, env(envConnectionString, conn))
		maddr := logAddr(s.stderr.String(), "metrics listening")
		if maddr == "" || maddr == s.addr {
			t.Fatalf("metrics listening on %q, dashboard on %q", maddr, s.addr)
		}
		waitFor(t, "the catalog to be healthy on the metrics listener", func() bool {
			v, _ := sample(scrapeMetrics(t, "http://"+maddr+"/metrics"), "dlqdash_catalog_healthy", nil)
			return v == 1
		})
		if code, body := get(t, "http://"+s.addr+"/metrics"); code != 404 || strings.Contains(body, "dlqdash_") {
			t.Errorf("the dashboard's /metrics = %d, want 404", code)
		}
		if code, _ := get(t, "http://"+maddr+"/"); code != 404 {
			t.Errorf("the metrics listener serves / with %d, want only /metrics", code)
		}
		// The dashboard's requests are still measured.
		if code, _ := get(t, "http://"+s.addr+"/healthz"); code != 200 {
			t.Fatalf("healthz = %d", code)
		}
		if c, _ := sample(scrapeMetrics(t, "http://"+maddr+"/metrics"), "dlqdash_http_request_duration_seconds", map[string]string{"route": "GET /healthz"}); c < 1 {
			t.Error("the dashboard's requests are not measured when metrics have their own listener")
		}
		if code := s.stop(t); code != 0 {
			t.Fatalf("exit %d:\n%s", code, s.stderr.String())
		}
		if code, _ := getNoFail(t, "http://"+maddr+"/metrics"); code != 0 {
			t.Errorf("the metrics listener still answers after shutdown")
		}
	})
}

// getNoFail is get for an address that may be closed: 0 when it is.
func getNoFail(t *testing.T, url string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// deadLetterN sends n messages to queue and dead-letters them through the
// real SDK.
func deadLetterN(t *testing.T, conn, queue string, n int) {
	t.Helper()
	ctx := t.Context()
	client := testClient(t, conn)
	s, err := client.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := range n {
		id := fmt.Sprintf("metrics-%d", i)
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(`{"n":1}`), MessageID: &id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, err := client.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	deadLetterFrom(t, r, n, "MetricsTest", "")
}
