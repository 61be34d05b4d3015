package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
)

// Roles limited to namespaces (auth.Policy, the config file's access
// rules). The route table's permission is the least role anywhere: a route
// that acts on one namespace's resource then asks for that role in the
// resource's namespace (roleIn, refuse); lists are narrowed to the
// namespaces the identity may view (scope). Without rules, scope is every
// namespace and roleIn is the identity's role: nothing changes.

// scope is the namespaces a request's identity may view: all of them
// (all), or exactly names (possibly none).
type scope struct {
	all   bool
	names []string
}

// everything is the scope of an identity no rule limits.
var everything = scope{all: true}

// has reports whether the scope includes namespace.
func (sc scope) has(namespace string) bool {
	return sc.all || slices.Contains(sc.names, namespace)
}

// key is the scope as a subscription key part ("" for all).
func (sc scope) key() string {
	if sc.all {
		return ""
	}
	k := "ns="
	for _, n := range sc.names {
		k += n + ","
	}
	return k
}

type scopeKey struct{}
type routeKey struct{}

// limited reports whether access rules apply at all.
func (s *Server) limited() bool { return len(s.access.Rules) > 0 }

// roleIn is the role of the request's identity in namespace.
func (s *Server) roleIn(ctx context.Context, namespace string) auth.Role {
	id := auth.FromContext(ctx)
	if !s.limited() {
		return id.Role
	}
	return s.access.RoleIn(id, namespace)
}

// scopeOf computes the identity's scope: every configured namespace where
// it is at least a viewer. An identity that is a viewer in every configured
// namespace has scope everything (so that rows of namespaces no longer
// configured, and of the unnamed namespace of old catalogs, stay as they
// were shown); the namespace "" of such rows is never in a limited scope.
func (s *Server) scopeOf(id auth.Identity) scope {
	if !s.limited() {
		return everything
	}
	sc := scope{names: []string{}}
	for _, ns := range s.namespaces {
		if s.access.RoleIn(id, ns).Includes(auth.Viewer) {
			sc.names = append(sc.names, ns)
		}
	}
	if len(sc.names) == len(s.namespaces) && len(s.namespaces) > 0 {
		return everything
	}
	return sc
}

// scopeFrom is the scope the request's context carries (require puts it
// there); everything when none does (no rules, or a public route).
func scopeFrom(ctx context.Context) scope {
	if sc, ok := ctx.Value(scopeKey{}).(scope); ok {
		return sc
	}
	return everything
}

// withScope adds the scope of ctx's identity, and the route, to ctx.
func (s *Server) withScope(ctx context.Context, rt route) context.Context {
	ctx = context.WithValue(ctx, routeKey{}, rt)
	if !s.limited() {
		return ctx
	}
	return context.WithValue(ctx, scopeKey{}, s.scopeOf(auth.FromContext(ctx)))
}

// need checks that the request's identity is at least role in namespace;
// doing words the action for the refusal ("replaying there", "viewing its
// messages"). A refusal is audited (as a denied entry naming the
// namespace) and returned as a 403 error.
func (s *Server) need(r *http.Request, namespace string, role auth.Role, doing string) error {
	have := s.roleIn(r.Context(), namespace)
	if have.Includes(role) {
		return nil
	}
	id := auth.FromContext(r.Context())
	rt, _ := r.Context().Value(routeKey{}).(route)
	s.auditDenied(r, rt, id, have, role, namespace)
	return &forbiddenError{have: have, need: role, namespace: namespace, doing: doing}
}

// filterScope narrows a message filter to the request's scope: a filter
// naming a namespace outside it is refused (403); one naming none is
// limited to the scope's namespaces. empty reports a scope of no
// namespace at all (nothing can match: the caller answers an empty list
// without asking the catalog).
func (s *Server) filterScope(r *http.Request, f *dlq.Filter) (empty bool, err error) {
	sc := scopeFrom(r.Context())
	if sc.all {
		return false, nil
	}
	if f.Namespace != "" {
		if !sc.has(f.Namespace) {
			return false, s.need(r, f.Namespace, auth.Viewer, "viewing its messages")
		}
		return false, nil
	}
	switch len(sc.names) {
	case 0:
		f.Namespaces = []string{} // matches nothing (a live list's new rows)
		return true, nil
	case 1:
		f.Namespace = sc.names[0]
	default:
		f.Namespaces = slices.Clone(sc.names)
	}
	return false, nil
}

// namespaceParam checks a list's namespace parameter against the scope:
// naming a namespace the identity may not view is a 403.
func (s *Server) namespaceParam(r *http.Request, namespace string) error {
	if namespace == "" || scopeFrom(r.Context()).has(namespace) {
		return nil
	}
	return s.need(r, namespace, auth.Viewer, "viewing it")
}

// canSeeBodiesIn reports whether the request's identity may read the
// bodies of namespace's messages.
func (s *Server) canSeeBodiesIn(ctx context.Context, namespace string) bool {
	return s.roleIn(ctx, namespace).Includes(s.role(bodies))
}

// sendAllowed is the replay engine's hook (replay.Request.Allow) for a
// request of r: role in every namespace the selection's messages are in,
// and in the destination namespace when the copies go to another.
func (s *Server) sendAllowed(r *http.Request, role auth.Role, doing string) func(sources []string, destination string) error {
	return func(sources []string, destination string) error {
		for _, ns := range sources {
			if err := s.need(r, ns, role, doing); err != nil {
				return err
			}
		}
		if destination != "" && !slices.Contains(sources, destination) {
			return s.need(r, destination, role, doing+" into it")
		}
		return nil
	}
}

// sendableNamespaces are the configured namespaces where the request's
// identity is an operator: the replay form's destination choices.
func (s *Server) sendableNamespaces(r *http.Request) []string {
	if !s.limited() {
		return s.namespaces
	}
	var out []string
	for _, ns := range s.namespaces {
		if s.roleIn(r.Context(), ns).Includes(auth.Operator) {
			out = append(out, ns)
		}
	}
	return out
}

// everyNamespace serves h only to identities that may view every
// namespace (access rules): what it answers covers them all (the metrics).
func (s *Server) everyNamespace(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := scopeFrom(r.Context()); !sc.all {
			for _, ns := range s.namespaces {
				if !sc.has(ns) {
					s.serveAPIError(w, r, s.need(r, ns, auth.Viewer, "reading the metrics (they cover every namespace)"))
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// forbiddenIn is the words of a refusal in one namespace.
func forbiddenIn(have, need auth.Role, namespace, doing string) string {
	ns := namespace
	if ns == "" {
		ns = "the unnamed namespace"
	}
	if have == auth.NoRole {
		return fmt.Sprintf("you have no role in %s; %s needs %s", ns, doing, need)
	}
	return fmt.Sprintf("you are %s in %s; %s needs %s", article(have), ns, doing, need)
}

// scopeEntities keeps the entities of the scope's namespaces.
func scopeEntities(sc scope, ents []dlq.EntitySummary) []dlq.EntitySummary {
	if sc.all {
		return ents
	}
	return slices.DeleteFunc(slices.Clone(ents), func(e dlq.EntitySummary) bool { return !sc.has(e.Namespace) })
}

// scopeGroups keeps what the scope may see of each failure group: its
// counts in the scope's namespaces (Present and Total are their sums), and
// only the groups seen in one of them.
func scopeGroups(sc scope, gs []dlq.GroupSummary) []dlq.GroupSummary {
	if sc.all {
		return gs
	}
	out := make([]dlq.GroupSummary, 0, len(gs))
	for _, g := range gs {
		var counts []dlq.NamespaceCount
		var present, total int64
		visible := map[string]bool{}
		for _, n := range g.Namespaces {
			if sc.has(n.Name) {
				counts = append(counts, n)
				present += n.Present
				total += n.Total
				for _, p := range n.Entities {
					visible[p] = true
				}
			}
		}
		if len(counts) == 0 {
			continue
		}
		g.Namespaces, g.Present, g.Total = counts, present, total
		// Only the entities of the namespaces it may see, in the
		// catalog's order.
		g.Entities = slices.DeleteFunc(slices.Clone(g.Entities), func(p string) bool { return !visible[p] })
		out = append(out, g)
	}
	// Largest first, as the catalog lists them.
	slices.SortStableFunc(out, func(a, b dlq.GroupSummary) int {
		switch {
		case a.Present > b.Present:
			return -1
		case a.Present < b.Present:
			return 1
		}
		return 0
	})
	return out
}

// scopeStatuses keeps the statuses of the scope's namespaces.
func scopeStatuses(sc scope, sts []dlq.Status) []dlq.Status {
	if sc.all {
		return sts
	}
	return slices.DeleteFunc(slices.Clone(sts), func(st dlq.Status) bool { return !sc.has(st.Namespace) })
}

// scopeNames keeps the names of the scope's namespaces.
func scopeNames(sc scope, names []string) []string {
	if sc.all {
		return names
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !sc.has(n) })
}
