package views

import (
	"strings"
	"testing"
	"time"
)

func TestHomePage(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 42, 7, 0, time.UTC)
	later := at.Add(53 * time.Second)
	tests := []struct {
		name    string
		home    Home
		want    []string
		notWant []string
	}{
		{"no namespace", Home{Mode: "serve"},
			[]string{`data-testid="connection-status"`, "No namespace connected", `data-testid="catalog-empty"`, `data-testid="entity-count">0<`},
			nil},
		{"live demo", Home{Mode: "demo", Namespace: "127.0.0.1:41234", Freshness: &Freshness{Healthy: true, LastSuccessAt: &at}},
			[]string{`data-testid="freshness">Live<`, "embedded emulator", `data-testid="namespace">127.0.0.1:41234<`, "2026-11-22 10:42:07 UTC"},
			nil},
		{"unreachable after a success", Home{Mode: "serve", Namespace: "contoso.servicebus.windows.net",
			Freshness: &Freshness{LastSuccessAt: &at, ErrorSince: &later, Error: "Service Bus unreachable"}},
			[]string{"Snapshot from 2026-11-22 10:42:07 UTC", "since 2026-11-22 10:43:00 UTC", `data-testid="freshness-error">Service Bus unreachable<`},
			[]string{">Live<"}},
		{"entities, groups and totals", Home{Mode: "serve", Freshness: &Freshness{Healthy: true},
			Entities: []EntityRow{
				{Path: "orders", Kind: "queue", Status: "Active", Active: 5, DeadLetter: 7, TransferDeadLetter: 1, Scheduled: 2, Deferred: 3},
				{Path: "payments", Kind: "topic", Scheduled: 4},
				{Path: "payments/Subscriptions/audit", Kind: "subscription", Status: "ReceiveDisabled", DeadLetter: 2},
			},
			Groups: []FailureGroup{{ID: "abc", Reason: "<img src=x onerror=alert(1)>", DescriptionPattern: "Timeout after <n> ms",
				Entities: []string{"orders", "payments/Subscriptions/audit"}, Present: 9, FirstSeenAt: at, LastSeenAt: later}}},
			[]string{`data-testid="entity-count">3<`, `data-testid="dead-letter-total">10<`, `data-testid="deferred-total">3<`,
				`data-testid="scheduled-total">6<`, `data-entity="payments/Subscriptions/audit"`, ">ReceiveDisabled<",
				`data-testid="group-count">9<`, "&lt;img src=x onerror=alert(1)&gt;", "Timeout after &lt;n&gt; ms", "orders, payments/Subscriptions/audit"},
			[]string{`data-testid="catalog-empty"`, `data-testid="groups-empty"`, "<img src=x", "<n>"}},
		{"namespace is escaped", Home{Mode: "serve", Namespace: `<script>alert(1)</script>`, Freshness: &Freshness{Healthy: true}},
			[]string{"&lt;script&gt;"},
			[]string{"<script>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := HomePage(tt.home).Render(t.Context(), &b); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			for _, w := range tt.want {
				if !strings.Contains(html, w) {
					t.Errorf("lacks %q:\n%s", w, html)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(html, w) {
					t.Errorf("contains %q:\n%s", w, html)
				}
			}
			for _, w := range []string{"<!doctype html>", `<main id="main"`, `<html lang="en">`, `rel="stylesheet" href="/static/app.`} {
				if !strings.Contains(html, w) {
					t.Errorf("layout lacks %q", w)
				}
			}
		})
	}
}

func TestErrorPage(t *testing.T) {
	var b strings.Builder
	if err := ErrorPage(ErrorView{Status: 500, Title: "Something went wrong", Message: "m", RequestID: "abc123"}).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`data-status="500"`, `data-testid="request-id">abc123<`, "Something went wrong"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("lacks %q:\n%s", w, b.String())
		}
	}
	b.Reset()
	if err := ErrorPage(ErrorView{Status: 404, Title: "Not found"}).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "request-id") {
		t.Errorf("404 page shows a request id")
	}
}

func TestDepthChart(t *testing.T) {
	since := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	var b strings.Builder
	c := DepthChart{Since: since, Until: since.Add(6 * time.Hour), Points: []int64{2, 10, 4}, Latest: 4}
	if err := DepthChartFragment(c).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, w := range []string{`id="depth-chart"`, `role="img"`, `aria-label="Dead-letter depth over the last 6 hours: 2 at the start, peak 10, 4 now."`,
		`data-testid="depth-latest">now 4 (peak 10)<`, `d="M0 120 L0.0 96.6 L200.0 96.6 L200.0 7.0 L400.0 7.0 L400.0 74.2 L600.0 74.2 L600 120 Z"`} {
		if !strings.Contains(html, w) {
			t.Errorf("chart lacks %q:\n%s", w, html)
		}
	}
	b.Reset()
	if err := DepthChartFragment(DepthChart{Since: since, Until: since.Add(time.Hour), Points: []int64{0, 0}}).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "L0.0 119.0") {
		t.Errorf("an empty series is not a flat line at the bottom:\n%s", b.String())
	}
}

func TestAgeWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                 "0s",
		42 * time.Second:             "42s",
		5 * time.Minute:              "5m",
		24 * time.Hour:               "24h",
		25*time.Hour + 7*time.Minute: "25h 7m",
		72 * time.Hour:               "3d",
		75 * time.Hour:               "3d 3h",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}
