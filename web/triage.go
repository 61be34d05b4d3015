package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/views"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// GroupTriage changes what people say about a failure group. *store.Store
// implements it.
type GroupTriage interface {
	// UpdateGroupTriage applies c to the group with this key and returns
	// its triage before and after; an error with NotFound() when there is
	// no such group.
	UpdateGroupTriage(ctx context.Context, key string, c dlq.TriageChange) (before, after dlq.GroupTriage, err error)
}

// The longest triage values.
const (
	maxGroupName  = 120
	maxGroupOwner = 120
	maxGroupNotes = 4000
)

// groupPatch is the body of PATCH /api/v1/groups/{key}: any of the fields.
type groupPatch struct {
	Name   *string `json:"name"`
	Status *string `json:"status"`
	Owner  *string `json:"owner"`
	Notes  *string `json:"notes"`
}

// change checks the patch and returns it as a triage change.
func (p groupPatch) change() (dlq.TriageChange, error) {
	var c dlq.TriageChange
	if p.Name == nil && p.Status == nil && p.Owner == nil && p.Notes == nil {
		return c, invalidArgument("body", "give at least one of name, status, owner and notes")
	}
	var err error
	if c.Name, err = triageText("name", p.Name, maxGroupName, false); err != nil {
		return c, err
	}
	if c.Owner, err = triageText("owner", p.Owner, maxGroupOwner, false); err != nil {
		return c, err
	}
	if c.Notes, err = triageText("notes", p.Notes, maxGroupNotes, true); err != nil {
		return c, err
	}
	if p.Status != nil {
		st := dlq.GroupStatus(strings.TrimSpace(*p.Status))
		if !st.Valid() {
			return c, invalidArgument("status", "status %q is not one of new, investigating, known and resolved", *p.Status)
		}
		c.Status = &st
	}
	return c, nil
}

// triageText checks one text field: trimmed, at most max characters, no
// control characters (but line breaks in notes).
func triageText(param string, v *string, max int, multiline bool) (*string, error) {
	if v == nil {
		return nil, nil
	}
	s := strings.TrimSpace(*v)
	if multiline {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	if !utf8.ValidString(s) {
		return nil, invalidArgument(param, "%s is not valid UTF-8", param)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return nil, invalidArgument(param, "%s is %d characters long: at most %d", param, n, max)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) }) {
		return nil, invalidArgument(param, "%s holds control characters", param)
	}
	return &s, nil
}

// patchGroup answers PATCH /api/v1/groups/{key}: the group with its new
// triage.
func (s *Server) patchGroup(w http.ResponseWriter, r *http.Request) error {
	var p groupPatch
	if err := decodeBody(r, &p, MaxRequestBody); err != nil {
		return err
	}
	c, err := p.change()
	if err != nil {
		return err
	}
	cur, err := s.findGroup(r.Context(), r.PathValue("key"))
	if err != nil {
		return err
	}
	if err := s.mayTriage(r, cur); err != nil {
		return err
	}
	g, err := s.updateGroup(r.Context(), r.PathValue("key"), c)
	if err != nil {
		return err
	}
	writeJSON(w, r, http.StatusOK, apijson.NewGroup(g))
	return nil
}

// updateGroupPage answers POST /groups/{key}, the group page's form: its
// fields as they are after the edit; only those that changed are applied.
func (s *Server) updateGroupPage(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return invalidArgument("body", "the form could not be read: %v", err)
	}
	key := r.PathValue("key")
	cur, err := s.findGroup(r.Context(), key)
	if err != nil {
		return err
	}
	if err := s.mayTriage(r, cur); err != nil {
		return err
	}
	var p groupPatch
	field := func(name string, now string) *string {
		vs, ok := r.PostForm[name]
		if !ok || len(vs) == 0 || strings.TrimSpace(strings.ReplaceAll(vs[0], "\r\n", "\n")) == now {
			return nil
		}
		return &vs[0]
	}
	p.Name = field("name", cur.DisplayName())
	if p.Name != nil && strings.TrimSpace(*p.Name) == dlq.GroupName(cur.Reason, cur.DescriptionPattern) {
		empty := "" // the generated name typed back: no name given
		p.Name = &empty
	}
	p.Status = field("status", string(cur.Triage.Status))
	p.Owner = field("owner", cur.Triage.Owner)
	p.Notes = field("notes", cur.Triage.Notes)
	if p.Name != nil || p.Status != nil || p.Owner != nil || p.Notes != nil {
		c, err := p.change()
		if err != nil {
			return err
		}
		if _, err := s.updateGroup(r.Context(), key, c); err != nil {
			return err
		}
	}
	http.Redirect(w, r, views.GroupURL(key), http.StatusSeeOther)
	return nil
}

// updateGroup applies c, audits what changed, tells the live pages, and
// returns the group as it is now.
func (s *Server) updateGroup(ctx context.Context, key string, c dlq.TriageChange) (dlq.GroupSummary, error) {
	if s.triage == nil {
		return dlq.GroupSummary{}, notFound("this dashboard cannot change failure groups")
	}
	before, after, err := s.triage.UpdateGroupTriage(ctx, key, c)
	if err != nil {
		if catalogNotFound(err) {
			return dlq.GroupSummary{}, notFound("no failure group %q", key)
		}
		return dlq.GroupSummary{}, fmt.Errorf("update group %s: %w", key, err)
	}
	g, err := s.findGroup(ctx, key)
	if err != nil {
		return g, err
	}
	params := map[string]any{"group": key, "name": g.DisplayName()}
	changed := false
	for _, f := range []struct {
		name     string
		from, to string
	}{
		{"name", before.Name, after.Name},
		{"status", string(before.Status), string(after.Status)},
		{"owner", before.Owner, after.Owner},
		{"notes", before.Notes, after.Notes},
	} {
		if f.from != f.to {
			params[f.name] = map[string]string{"from": f.from, "to": f.to}
			changed = true
		}
	}
	if changed {
		s.record(ctx, audit.Record{Action: audit.ActionGroupUpdated, Params: params})
		if s.hub != nil {
			s.hub.Publish(dlq.Change{Kind: dlq.ChangeGroups})
		}
	}
	return g, nil
}

// mayTriage: with access rules, triaging a failure group needs operator
// in one of the namespaces it was seen in (the route asks for operator
// somewhere). g is as the identity may see it (findGroup).
func (s *Server) mayTriage(r *http.Request, g dlq.GroupSummary) error {
	if !s.limited() || len(g.Namespaces) == 0 {
		return nil
	}
	for _, n := range g.Namespaces {
		if s.roleIn(r.Context(), n.Name).Includes(auth.Operator) {
			return nil
		}
	}
	return s.need(r, g.Namespaces[0].Name, auth.Operator, "triaging its failure groups")
}

// findGroup reads one group, gone or not; 404 when there is none.
func (s *Server) findGroup(ctx context.Context, key string) (dlq.GroupSummary, error) {
	gs, err := s.readGroups(ctx, true, "", "")
	if err != nil {
		return dlq.GroupSummary{}, err
	}
	i := slices.IndexFunc(gs, func(g dlq.GroupSummary) bool { return g.ID == key })
	if i < 0 {
		return dlq.GroupSummary{}, notFound("no failure group %q", key)
	}
	return gs[i], nil
}

// showGroupPage renders GET /groups/{key}: the group's name, triage,
// counts per namespace, a link to its messages, and the chart of its dead
// letters over time (the page's parameter chart picks its range, as on the
// message list).
func (s *Server) showGroupPage(w http.ResponseWriter, r *http.Request) error {
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	v, err := q.one(chartParam)
	if err != nil {
		return err
	}
	rng, err := chartRange(v)
	if err != nil {
		return err
	}
	g, err := s.findGroup(r.Context(), r.PathValue("key"))
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			return ErrNotFound
		}
		return err
	}
	fg := failureGroups([]dlq.GroupSummary{g}, len(s.namespaces) > 1)[0]
	chart, err := s.deadLetterChart(r.Context(), dlq.Filter{Group: g.ID}, rng, time.Now(), func(i int) string { return groupChartURL(g.ID, i) })
	if err != nil {
		return err
	}
	return s.render(w, r, views.GroupPage(views.GroupDetail{Group: fg, CanEdit: s.triage != nil, Chart: chart}))
}
