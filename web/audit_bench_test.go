package web

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
)

// auditBenchTrail is a trail of about 100,000 entries: job 1 of 100,000
// messages (its creation names them all, then 400 replay entries of 250 and
// its completion), 16,800 small jobs of 10 messages (creation, two batches,
// completion), and sign-ins and triage changes of ten people. It is
// written once per process (through audit.Log, each append its own
// transaction, as dlqdash writes them) and copied for each benchmark.
var auditBenchTrail = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dlqdash-audit-bench-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "audit.db")
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return "", err
	}
	defer st.Close()
	l := audit.New(st)
	var appendErr error
	add := func(r audit.Record) {
		if appendErr == nil {
			_, appendErr = l.Append(ctx, r)
		}
	}
	ids := func(from, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(from + i)
		}
		return out
	}
	big := ids(1, 100_000)
	add(audit.Record{Actor: "oidc:alice", Action: audit.ActionReplayJobCreated, MessageIDs: big,
		Params: map[string]any{"job_id": "1", "namespace": "prod", "total": len(big)}})
	small := 2
	for i := 0; i < len(big); i += 250 {
		add(audit.Record{Actor: "oidc:alice", Action: audit.ActionReplay, MessageIDs: big[i : i+250],
			Params: map[string]any{"job_id": "1", "namespace": "prod", "source": "orders/$DeadLetterQueue", "destination": "orders"}})
		// The rest of the trail goes on meanwhile.
		for range 42 {
			job := strconv.Itoa(small)
			first := 100_000 + small*10
			actor := "oidc:user" + strconv.Itoa(small%10)
			add(audit.Record{Actor: actor, Action: audit.ActionReplayJobCreated, MessageIDs: ids(first, 10),
				Params: map[string]any{"job_id": job, "namespace": "prod", "total": 10}})
			add(audit.Record{Actor: actor, Action: audit.ActionReplay, MessageIDs: ids(first, 5), Params: map[string]any{"job_id": job, "namespace": "prod"}})
			add(audit.Record{Actor: actor, Action: audit.ActionReplay, MessageIDs: ids(first+5, 5), Params: map[string]any{"job_id": job, "namespace": "prod"}})
			add(audit.Record{Actor: "dlqdash", Action: audit.ActionJobCompleted, Params: map[string]any{"job_id": job, "namespace": "prod"}})
			add(audit.Record{Actor: actor, Action: audit.ActionLogin, Params: map[string]any{"via": "oidc"}})
			add(audit.Record{Actor: actor, Action: audit.ActionGroupUpdated, Params: map[string]any{"group": "g" + job, "status": map[string]string{"from": "new", "to": "known"}}})
			small++
		}
	}
	add(audit.Record{Actor: "dlqdash", Action: audit.ActionJobCompleted, Params: map[string]any{"job_id": "1", "namespace": "prod"}})
	return path, appendErr
})

// BenchmarkAuditPages times the audit page, an action's messages and the
// export over auditBenchTrail, server side: p50 and p95 per request, and
// the process's CPU time per request.
func BenchmarkAuditPages(b *testing.B) {
	path, err := auditBenchTrail()
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h := New(Config{Catalog: st, Audit: st, Mode: "serve"}).Handler()
	var n int
	if err := st.ScanAudit(context.Background(), audit.Filter{}, func(audit.Entry) error { n++; return nil }); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d audit entries", n)
	get := func(b *testing.B, target string) *countingWriter {
		w := &countingWriter{header: http.Header{}}
		r, _ := http.NewRequestWithContext(b.Context(), "GET", target, nil)
		h.ServeHTTP(w, r)
		if w.code != 0 && w.code != 200 {
			b.Fatalf("GET %s: %d", target, w.code)
		}
		return w
	}
	page := func(b *testing.B, target string) string {
		w := &bodyWriter{countingWriter: countingWriter{header: http.Header{}}}
		r, _ := http.NewRequestWithContext(b.Context(), "GET", target, nil)
		h.ServeHTTP(w, r)
		if w.code != 0 && w.code != 200 {
			b.Fatalf("GET %s: %d %.500s", target, w.code, w.body)
		}
		return string(w.body)
	}
	follow := func(b *testing.B, target string, pages int) string {
		u := target
		for range pages {
			m := nextRe.FindStringSubmatch(page(b, u))
			if m == nil {
				b.Fatalf("%s: fewer than %d pages", target, pages)
			}
			u = unescapeAmp(m[1])
		}
		return u
	}
	for _, bc := range []struct {
		name, target string
		pages        int // Next page links followed first
	}{
		{"api/entries", "/api/v1/audit", 0},
		{"api/actions", "/api/v1/audit/actions", 0},
		{"audit/first", "/audit", 0},
		{"audit/deep", "/audit", 20},
		{"audit/job-100k", "/audit?job=1", 0},
		{"audit/job-small", "/audit?job=4000", 0},
		{"audit/actor", "/audit?actor=oidc%3Auser3", 0},
		{"audit/action+namespace", "/audit?action=replay&namespace=prod", 0},
		{"audit/since", "/audit?since=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04")), 0},
		{"action-messages/first", "/audit/actions/2", 0},
		{"action-messages/deep", "/audit/actions/2", 100},
		{"action-messages/creation-deep", "/audit/actions/1", 100},
		{"export/job-100k-csv", "/api/v1/audit/export?format=csv&job=1", 0},
		{"export/all-jsonl", "/api/v1/audit/export?format=jsonl", 0},
		{"export/all-csv", "/api/v1/audit/export?format=csv", 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			target := bc.target
			if bc.pages > 0 {
				target = follow(b, target, bc.pages)
			}
			get(b, target) // warm
			var lat []time.Duration
			var bytes int64
			var peak uint64
			cpu := processCPU()
			for b.Loop() {
				start := time.Now()
				w := get(b, target)
				lat = append(lat, time.Since(start))
				bytes, peak = w.n, max(peak, w.peak)
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.95), "p95-ms")
			b.ReportMetric(float64(bytes)/1024, "KiB/op")
			if peak > 0 {
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			}
		})
	}
}

// countingWriter is a ResponseWriter that keeps nothing: it counts the
// bytes written and, every 4 MiB, samples the heap in use (the export
// must not grow with what it writes).
type countingWriter struct {
	header http.Header
	code   int
	n      int64
	next   int64
	peak   uint64
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	w.n += int64(len(p))
	if w.n >= w.next {
		w.next = w.n + 4<<20
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.peak = max(w.peak, ms.HeapInuse)
	}
	return len(p), nil
}

type bodyWriter struct {
	countingWriter
	body []byte
}

func (w *bodyWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return w.countingWriter.Write(p)
}
