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

// BenchmarkPropertySuggestions: the property filter's keys of a list and
// one key's values (tenant: 10,000 distinct values; region: a few), over
// the million-message catalog.
//
//	go test -run '^$' -bench PropertySuggestions -benchtime 20x ./store
func BenchmarkPropertySuggestions(b *testing.B) {
	s := openBenchCatalog(b)
	ctx := context.Background()
	for _, c := range benchListCases(b, s) {
		switch c.name {
		case "all", "entity=big", "entity=small", "reason=big", "property=rare", "property=common", "q=common", "q=mid", "q=rare",
			"combo:entity+q=common", "combo:entity+property", "since+until=1day", "props:tenant+priority":
		default:
			continue
		}
		b.Run(c.name+"/keys", func(b *testing.B) {
			n := 0
			measure(b, func() error {
				ks, err := s.PropertyKeys(ctx, c.f, 50)
				n = len(ks)
				return err
			})
			b.ReportMetric(float64(n), "keys")
		})
		for _, key := range []string{"tenant", "region"} {
			b.Run(c.name+"/values="+key, func(b *testing.B) {
				n := 0
				measure(b, func() error {
					vs, err := s.PropertyValues(ctx, c.f, key, 20)
					n = len(vs)
					return err
				})
				b.ReportMetric(float64(n), "values")
			})
		}
	}
}
