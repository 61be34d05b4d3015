package web

import (
	"context"
	"fmt"
	"net/http"
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
	groups, err := s.readGroups(r.Context(), false, "", "")
	if err != nil {
		return fmt.Errorf("show home: %w", err)
	}
	h := views.Home{Mode: s.mode, Namespace: s.ns, Now: time.Now()}
	sc := scopeFrom(r.Context())
	ents = scopeEntities(sc, ents)
	if s.status != nil {
		st := s.status.Status()
		if !sc.all {
			st = dlq.Summarize(scopeStatuses(sc, s.namespaceStatuses()))
		}
		h.Freshness = &views.Freshness{Healthy: st.Healthy, LastSuccessAt: st.LastSuccessAt, ErrorSince: st.ErrorSince, Error: st.Error}
	}
	h.Entities = overviewEntities(ents, len(s.namespaces) > 1)
	if len(s.namespaces) > 1 {
		h.Namespaces = namespaceHealth(scopeNames(sc, s.namespaces), s.namespaceStatuses(), ents)
	}
	if s.hub != nil {
		h.Live = views.LiveOverview.Param()
	}
	// ListGroups gives the largest first; the overview shows the head.
	h.Groups = failureGroups(groups, len(s.namespaces) > 1)
	h.Groups = h.Groups[:min(len(h.Groups), homeGroups)]
	if !sc.all {
		// The depth series is the whole catalog's: not shown to an
		// identity that may not view every namespace.
		return s.render(w, r, views.HomePage(h))
	}
	chart, err := depthChart(r.Context(), s.catalog, h.Now)
	if err != nil {
		return fmt.Errorf("show home: %w", err)
	}
	h.Depth = &chart
	return s.render(w, r, views.HomePage(h))
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

// namespaceHealth is each configured namespace's health and counts, for the
// overview.
func namespaceHealth(names []string, statuses []dlq.Status, ents []dlq.EntitySummary) []views.NamespaceHealth {
	out := make([]views.NamespaceHealth, len(names))
	for i, name := range names {
		n := views.NamespaceHealth{Name: name}
		for _, st := range statuses {
			if st.Namespace == name {
				n.Freshness = views.Freshness{Healthy: st.Healthy, LastSuccessAt: st.LastSuccessAt, ErrorSince: st.ErrorSince, Error: st.Error}
			}
		}
		for _, e := range ents {
			if e.Namespace == name && e.DeletedAt == nil {
				n.Entities++
				n.DeadLetters += e.Counts.DeadLetter + e.Counts.TransferDeadLetter
			}
		}
		out[i] = n
	}
	return out
}
