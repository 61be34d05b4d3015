package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/store"
)

// BenchmarkCountMessages: the list's count, capped at 10,001 as the pages
// and GET /api/v1/messages/count ask, over the million-message catalog;
// "walk" forces the list plan's count (a search's hits never read by id).
//
//	go test -run '^$' -bench CountMessages -benchtime 20x ./store
func BenchmarkCountMessages(b *testing.B) {
	s := openBenchCatalog(b)
	ctx := context.Background()
	for _, c := range benchListCases(b, s) {
		if strings.Contains(c.name, "deep") {
			continue
		}
		for _, how := range []string{"", "walk"} {
			if how != "" && c.f.Query == "" {
				continue
			}
			name := c.name
			if how != "" {
				name += "/" + how
			}
			b.Run(name, func(b *testing.B) {
				if how == "walk" {
					defer store.SearchDriveMaxForTest(0)()
				}
				var n int64
				measure(b, func() error {
					var err error
					n, err = s.CountMessages(ctx, c.f, 10_001)
					return err
				})
				b.ReportMetric(float64(n), "count")
			})
		}
	}
}
