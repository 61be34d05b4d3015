package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// BenchmarkDeadLetterSeries: the group and entity charts over the million
// message catalog (which spans 30 days from storetest.Start), for the
// largest group and the busiest entity, at each range the pages offer.
//
//	go test -run '^$' -bench DeadLetterSeries -benchtime 20x ./store
func BenchmarkDeadLetterSeries(b *testing.B) {
	s := openBenchCatalog(b)
	ctx := context.Background()
	gs, err := s.ListGroups(ctx)
	if err != nil {
		b.Fatal(err)
	}
	largest := gs[0]
	for _, g := range gs {
		if g.Total > largest.Total {
			largest = g
		}
	}
	busiest := struct{ Path string }{"orders"} // the generator's heaviest entity
	b.Logf("largest group %s (%d messages), busiest entity %s", largest.ID, largest.Total, busiest.Path)
	until := storetest.Start.Add(storetest.Span)
	for _, r := range []struct {
		name    string
		span    time.Duration
		buckets int
	}{{"24h", 24 * time.Hour, 48}, {"7d", 7 * 24 * time.Hour, 56}, {"30d", 30 * 24 * time.Hour, 60}} {
		for _, c := range []struct {
			name string
			q    dlq.SeriesQuery
		}{{"group", dlq.SeriesQuery{Group: largest.ID}}, {"entity", dlq.SeriesQuery{Entity: busiest.Path}}} {
			q := c.q
			q.Since, q.Until, q.Buckets = until.Add(-r.span), until, r.buckets
			b.Run(c.name+"-"+r.name, func(b *testing.B) {
				var total int64
				measure(b, func() error {
					sr, err := s.DeadLetterSeries(ctx, q)
					total = 0
					for _, n := range sr.Counts {
						total += n
					}
					return err
				})
				b.ReportMetric(float64(total), "rows")
			})
		}
	}
}
