package highlight

import (
	"context"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/internal/search"
)

// BenchmarkHighlight: what marking costs a page: a list's 50 previews,
// and bodies of JSON (a page shows and marks at most 64 KiB of one).
//
//	go test -run '^$' -bench Highlight ./internal/search/highlight
func BenchmarkHighlight(b *testing.B) {
	h, err := New()
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	q, _ := search.Parse("pending")
	previews := make([]string, 50)
	for i := range previews {
		previews[i] = strings.Repeat(`{"order":"A-1","status":"pending","note":"gift wrap"} `, 4)[:200]
	}
	body := strings.Repeat("{\n  \"sku\": \"abc\",\n  \"status\": \"pending\",\n  \"qty\": 1\n},\n", 256<<10/52)
	for _, c := range []struct {
		name  string
		texts []string
	}{{"previews50", previews}, {"body256KiB", []string{body}}, {"body64KiB", []string{body[:64<<10]}}, {"body16KiB", []string{body[:16<<10]}},
		{"body64KiB-nomatch", []string{strings.ReplaceAll(body[:64<<10], "pending", "shipped")}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Spans(context.Background(), q, c.texts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
