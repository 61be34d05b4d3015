package web

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/views"
)

// seriesSource is a catalog that counts a group's or an entity's dead
// letters over time (the store does).
type seriesSource interface {
	DeadLetterSeries(ctx context.Context, q dlq.SeriesQuery) (dlq.CountSeries, error)
}

// chartParam is the message list's query parameter for the dead-letter
// chart's range (24h, 7d or 30d; 24h when absent). It is the page's, not
// the filter's: the API does not take it.
const chartParam = "chart"

// chartRange reads the chart's range: its index in views.ChartRanges.
func chartRange(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	for i, r := range views.ChartRanges {
		if r.Param == v {
			return i, nil
		}
	}
	return 0, invalidArgument(chartParam, "unknown chart range %q: want 24h, 7d or 30d", v)
}

// deadLetterChart is the chart of the dead letters of f's group or entity
// (nil when f names neither, or the catalog cannot count them) over the
// range rng, ending with the bucket that holds now. Its bars link to the
// list of their slice of time, its ranges to rangeURL of each range (nil:
// the list with that range).
func (s *Server) deadLetterChart(ctx context.Context, f dlq.Filter, rng int, now time.Time, rangeURL func(rng int) string) (*views.DeadLetterChartData, error) {
	src, ok := s.catalog.(seriesSource)
	if !ok || (f.Group == "" && f.Entity == "") {
		return nil, nil
	}
	r := views.ChartRanges[rng]
	width := r.Span / time.Duration(r.Buckets)
	until := now.UTC().Truncate(width).Add(width)
	since := until.Add(-r.Span)
	cs, ok, err := scopedSeries(ctx, src, dlq.SeriesQuery{Namespace: f.Namespace, Entity: f.Entity, Group: f.Group,
		Since: since, Until: until, Buckets: r.Buckets})
	if err != nil {
		return nil, fmt.Errorf("dead-letter chart: %w", err)
	}
	if !ok {
		return nil, nil // no namespace the reader may view
	}
	subject := chartSubject(f, "")
	if f.Group != "" {
		// The group by its reason (the groups table is small).
		gs, err := s.catalog.ListGroups(ctx)
		if err != nil {
			return nil, fmt.Errorf("dead-letter chart: %w", err)
		}
		for _, g := range gs {
			if g.ID == f.Group {
				subject = chartSubject(f, g.Reason)
			}
		}
	}
	c := &views.DeadLetterChartData{Subject: subject, Since: cs.Since, Until: cs.Until, Width: cs.Width, Counts: cs.Counts}
	for _, j := range cs.Jobs {
		c.Jobs = append(c.Jobs, views.ChartJob{ID: j.ID, Action: j.Action, Status: j.Status, At: j.At})
	}
	// The bars link to the list of their slice: the filter without its
	// own times, with the slice's; the ranges keep the filter whole.
	for i := range cs.Counts {
		p := f.Encode()
		from := cs.Since.Add(time.Duration(i) * cs.Width)
		p.Set("since", from.Format(time.RFC3339))
		p.Set("until", from.Add(cs.Width).Format(time.RFC3339))
		p.Set("include_gone", "true")
		if rng != 0 {
			p.Set(chartParam, r.Param)
		}
		c.BarURLs = append(c.BarURLs, "/messages?"+p.Encode())
	}
	if rangeURL == nil {
		rangeURL = func(i int) string {
			p := f.Encode()
			if i != 0 {
				p.Set(chartParam, views.ChartRanges[i].Param)
			}
			return listURL(p)
		}
	}
	for i, o := range views.ChartRanges {
		c.Ranges = append(c.Ranges, views.ChartRange{Label: o.Label, URL: rangeURL(i), Current: i == rng})
	}
	return c, nil
}

// scopedSeries is q's series over the namespaces ctx's reader may view
// (access rules): a series per namespace of the scope, summed, when q names
// none; ok is false when the scope holds none of q's.
func scopedSeries(ctx context.Context, src seriesSource, q dlq.SeriesQuery) (cs dlq.CountSeries, ok bool, err error) {
	sc := scopeFrom(ctx)
	if sc.all {
		cs, err = src.DeadLetterSeries(ctx, q)
		return cs, err == nil, err
	}
	names := sc.names
	if q.Namespace != "" {
		names = nil
		if sc.has(q.Namespace) {
			names = []string{q.Namespace}
		}
	}
	for i, ns := range names {
		q.Namespace = ns
		one, err := src.DeadLetterSeries(ctx, q)
		if err != nil {
			return cs, false, err
		}
		if i == 0 {
			cs = one
			continue
		}
		for b := range min(len(cs.Counts), len(one.Counts)) {
			cs.Counts[b] += one.Counts[b]
		}
		cs.Jobs = append(cs.Jobs, one.Jobs...)
	}
	slices.SortStableFunc(cs.Jobs, func(a, b dlq.SeriesJob) int { return a.At.Compare(b.At) })
	return cs, len(names) > 0, nil
}

// groupChartURL is a failure group's page with the chart's range rng.
func groupChartURL(key string, rng int) string {
	u := views.GroupURL(key)
	if rng != 0 {
		u += "?" + url.Values{chartParam: {views.ChartRanges[rng].Param}}.Encode()
	}
	return u
}

func listURL(p url.Values) string {
	if len(p) == 0 {
		return "/messages"
	}
	return "/messages?" + p.Encode()
}

// chartSubject names what a chart counts; reason is the group's, if known.
func chartSubject(f dlq.Filter, reason string) string {
	group := "this failure group"
	if reason != "" {
		group = "the failure group “" + text(reason) + "”"
	}
	switch {
	case f.Group != "" && f.Entity != "":
		return group + " in " + text(f.Entity)
	case f.Group != "":
		return group
	}
	return text(f.Entity)
}
