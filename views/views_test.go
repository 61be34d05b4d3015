package views

import (
	"strings"
	"testing"
)

func TestHomePage(t *testing.T) {
	tests := []struct {
		name    string
		home    Home
		want    []string
		notWant []string
	}{
		{"demo, empty", Home{Mode: "demo", Namespace: "127.0.0.1:41234"},
			[]string{`data-testid="connection-status"`, "emulator is running at", `data-testid="namespace">127.0.0.1:41234<`, `data-testid="catalog-empty"`, `data-testid="entity-count">0<`},
			nil},
		{"serve, namespace named but not connected", Home{Mode: "serve", Namespace: "contoso.servicebus.windows.net"},
			[]string{"No namespace connected yet", `data-testid="namespace">contoso.servicebus.windows.net<`},
			nil},
		{"connected with entities", Home{Mode: "serve", Connected: true, Entities: 3},
			[]string{`data-testid="entity-count">3<`},
			[]string{`data-testid="connection-status"`, `data-testid="catalog-empty"`}},
		{"namespace is escaped", Home{Mode: "serve", Namespace: `<script>alert(1)</script>`},
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
