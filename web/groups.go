package web

import (
	"net/http"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/views"
)

// listGroupsPage renders GET /groups: every failure group, the largest
// first, from the catalog's counters. include_gone=true also lists groups
// whose messages have all left the broker.
func (s *Server) listGroupsPage(w http.ResponseWriter, r *http.Request) error {
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	withGone, err := q.boolean("include_gone")
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	gs, err := s.readGroups(r.Context(), withGone, "", "")
	if err != nil {
		return err
	}
	return s.render(w, r, views.GroupsPage(views.Groups{Groups: failureGroups(gs, len(s.namespaces) > 1), IncludeGone: withGone,
		ShowNamespaces: len(s.namespaces) > 1}))
}

// failureGroups are the groups as the pages show them.
func failureGroups(gs []dlq.GroupSummary, showNamespaces bool) []views.FailureGroup {
	out := make([]views.FailureGroup, 0, len(gs))
	for _, g := range gs {
		ents := make([]string, len(g.Entities))
		for i, e := range g.Entities {
			ents[i] = text(e)
		}
		out = append(out, views.FailureGroup{ID: g.ID, Reason: text(g.Reason), DescriptionPattern: text(g.DescriptionPattern),
			Name: text(g.DisplayName()), GeneratedName: text(dlq.GroupName(g.Reason, g.DescriptionPattern)),
			Status: string(g.Triage.State()), Owner: text(g.Triage.Owner), Notes: g.Triage.Notes,
			StatusChangedAt: g.Triage.StatusChangedAt, ReopenedAt: g.Triage.ReopenedAt,
			Entities: ents, Present: g.Present, Total: g.Total, FirstSeenAt: g.FirstSeenAt, LastSeenAt: g.LastSeenAt,
			Namespaces: namespaceCounts(g.Namespaces), ShowNamespaces: showNamespaces})
	}
	return out
}

// namespaceCounts are a group's per-namespace counts as the pages show them.
func namespaceCounts(ns []dlq.NamespaceCount) []views.NamespaceCount {
	out := make([]views.NamespaceCount, len(ns))
	for i, n := range ns {
		out[i] = views.NamespaceCount{Name: text(n.Name), Present: n.Present, Total: n.Total}
	}
	return out
}
