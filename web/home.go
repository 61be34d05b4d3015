package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/views"
)

// homeGroups is how many failure groups the overview lists.
const homeGroups = 10

// showHome renders the overview: freshness, every entity's counts, and the
// largest failure groups, all from the catalog's counters.
func (s *Server) showHome(w http.ResponseWriter, r *http.Request) error {
	ents, err := s.catalog.ListEntities(r.Context())
	if err != nil {
		return fmt.Errorf("show home: %w", err)
	}
	groups, err := s.catalog.ListGroups(r.Context())
	if err != nil {
		return fmt.Errorf("show home: %w", err)
	}
	h := views.Home{Mode: s.mode, Namespace: s.ns, Now: time.Now()}
	if s.status != nil {
		st := s.status.Status()
		h.Freshness = &views.Freshness{Healthy: st.Healthy, LastSuccessAt: st.LastSuccessAt, ErrorSince: st.ErrorSince, Error: st.Error}
	}
	h.Entities = overviewEntities(ents)
	if s.hub != nil {
		h.Live = "page=overview"
	}
	h.Groups = topGroups(groups, homeGroups)
	chart, err := depthChart(r.Context(), s.catalog, h.Now)
	if err != nil {
		return fmt.Errorf("show home: %w", err)
	}
	h.Depth = &chart
	return s.render(w, r, views.HomePage(h))
}

// topGroups are the n groups with the most present messages, largest first.
func topGroups(groups []dlq.GroupSummary, n int) []views.GroupRow {
	var out []views.GroupRow
	for _, g := range groups {
		if g.Present == 0 {
			continue
		}
		out = append(out, views.GroupRow{ID: g.ID, Reason: g.Reason, DescriptionPattern: g.DescriptionPattern,
			Entities: g.Entities, Count: g.Present, FirstSeenAt: g.FirstSeenAt, LastSeenAt: g.LastSeenAt})
	}
	slices.SortStableFunc(out, func(a, b views.GroupRow) int { return cmp.Compare(b.Count, a.Count) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// The overview's chart: the last six hours in five-minute buckets.
const (
	depthWindow  = 6 * time.Hour
	depthBuckets = 72
)

// depthChart reads the depth series the overview (and the hub, on counts
// changes) draws.
func depthChart(ctx context.Context, c Catalog, now time.Time) (views.DepthChart, error) {
	ds, err := c.DepthSeries(ctx, now.Add(-depthWindow), now, depthBuckets)
	if err != nil {
		return views.DepthChart{}, err
	}
	return views.DepthChart{Since: ds.Since, Until: ds.Until, Points: ds.Points, Latest: ds.Latest}, nil
}
