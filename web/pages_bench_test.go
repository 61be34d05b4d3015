package web

import (
	"context"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// BenchmarkPages times the dashboard's pages over a catalog of a million
// messages, server side (query and render, no network): p50 and p95 per
// request. Deep pages follow the Next page link 20 pages in.
func BenchmarkPages(b *testing.B) {
	path := storetest.Catalog(b, 1_000_000)
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h := New(Config{Catalog: st, Mode: "serve"}).Handler()
	get := func(b *testing.B, target string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(b.Context(), "GET", target, nil))
		if rec.Code != 200 {
			b.Fatalf("GET %s: %d\n%.2000s", target, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	deep := func(b *testing.B, target string) string {
		u := target
		for range 20 {
			m := nextRe.FindStringSubmatch(get(b, u))
			if m == nil {
				b.Fatalf("%s: fewer than 20 pages", target)
			}
			u, _ = url.PathUnescape(m[1])
			u = unescapeAmp(u)
		}
		return u
	}
	gs, err := st.ListGroups(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, target string
		deep         bool
	}{
		{"overview", "/", false},
		{"groups", "/groups", false},
		{"group-page", "/groups/" + url.PathEscape(gs[0].ID), false},
		{"group-page-30d", "/groups/" + url.PathEscape(gs[0].ID) + "?chart=30d", false},
		{"inventory", "/inventory", false},
		{"messages/first", "/messages", false},
		{"messages/deep", "/messages", true},
		{"messages/entity", "/messages?entity=" + url.QueryEscape(storetest.SmallEntity), false},
		{"messages/group", "/messages?group=" + url.QueryEscape(gs[0].ID), false},
		{"messages/group-deep", "/messages?group=" + url.QueryEscape(gs[0].ID), true},
		{"messages/reason+since", "/messages?reason=SqlTimeout&since=2026-11-04T00:00&until=2026-11-05T00:00", false},
		{"messages/property-rare", "/messages?property=tenant%3D" + storetest.RareTenant, false},
		{"messages/search-common", "/messages?q=" + storetest.CommonWord, false},
		{"messages/search-mid", "/messages?q=" + storetest.MidWord, false},
		{"messages/search-rare", "/messages?q=" + storetest.RareWord, false},
		// Issue 18/19: one entity with a filter (a reason, a property, a word).
		{"messages/entity+reason", "/messages?entity=" + storetest.BigEntity + "&reason=SqlTimeout", false},
		{"messages/entity+reason-rare", "/messages?entity=" + storetest.BigEntity + "&reason=GdprErasure", false},
		{"messages/entity+property", "/messages?entity=" + storetest.BigEntity + "&property=tenant%3Dtenant-0009", false},
		{"messages/entity+2properties", "/messages?entity=" + storetest.BigEntity + "&property=tenant%3Dtenant-0009&property=priority%3Dhigh", false},
		{"messages/entity+word", "/messages?entity=" + storetest.BigEntity + "&q=" + storetest.MidWord, false},
		// The counts those pages leave to the browser (GET /messages/count).
		{"count/entity+reason", "/messages/count?entity=" + storetest.BigEntity + "&reason=SqlTimeout", false},
		{"count/entity+property", "/messages/count?entity=" + storetest.BigEntity + "&property=tenant%3Dtenant-0009", false},
		{"count/entity+word", "/messages/count?entity=" + storetest.BigEntity + "&q=" + storetest.MidWord, false},
		// Issue 19's search: exact counts to 10,000 (a search's too), the
		// property picker's keys and values, a message opened from a search
		// (its body highlighted).
		{"count/search-common", "/messages/count?q=" + storetest.CommonWord, false},
		{"count/search-mid", "/messages/count?q=" + storetest.MidWord, false},
		{"count/search-rare", "/messages/count?q=" + storetest.RareWord, false},
		{"count/entity+common-word", "/messages/count?entity=email&q=" + storetest.CommonWord, false},
		{"count/all", "/messages/count", false},
		{"api-count/search-common", "/api/v1/messages/count?q=" + storetest.CommonWord, false},
		{"properties/keys", "/api/v1/messages/properties", false},
		{"properties/keys-entity", "/api/v1/messages/properties?entity=" + storetest.BigEntity, false},
		{"properties/values-tenant", "/api/v1/messages/properties?key=tenant", false},
		{"properties/keys-search-common", "/api/v1/messages/properties?q=" + storetest.CommonWord, false},
		{"properties/values-search-mid", "/api/v1/messages/properties?key=tenant&q=" + storetest.MidWord, false},
		{"properties/keys-2properties", "/api/v1/messages/properties?property=tenant%3Dtenant-0009&property=priority%3Dhigh", false},
		{"message-searched", "", false},
		{"message", "", false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			target := bc.target
			if bc.deep {
				target = deep(b, target)
			}
			if bc.name == "message" {
				m := rowIDRe.FindStringSubmatch(get(b, "/messages"))
				target = "/messages/" + m[1]
			}
			if bc.name == "message-searched" {
				m := rowIDRe.FindStringSubmatch(get(b, "/messages?q="+storetest.CommonWord))
				target = "/messages/" + m[1] + "?q=" + storetest.CommonWord
				if !strings.Contains(get(b, target), "<mark") {
					b.Fatal("the searched message's page marks nothing")
				}
			}
			get(b, target) // warm
			var lat []time.Duration
			cpu := processCPU()
			for b.Loop() {
				start := time.Now()
				get(b, target)
				lat = append(lat, time.Since(start))
			}
			// The process's CPU time per request (getrusage): unlike the
			// percentiles it does not grow when other work shares the
			// machine.
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.95), "p95-ms")
		})
	}
}

func unescapeAmp(s string) string {
	out := []byte{}
	for i := 0; i < len(s); i++ {
		if s[i] == '&' && i+4 < len(s)+0 && s[i:min(len(s), i+5)] == "&amp;" {
			out = append(out, '&')
			i += 4
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}
