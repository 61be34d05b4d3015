package auth

import (
	"fmt"
	"slices"
)

// AllNamespaces in a Rule's Namespaces matches every namespace.
const AllNamespaces = "*"

// Rule limits the role of a group's members, or of an API token, in some
// namespaces: "members of sre-eu are at most operators in prod-eu". Rules
// only lower roles; the roles themselves still come from the Mapping (and a
// token's own role).
type Rule struct {
	// Group is a group as the Mapping names it, or Everyone ("*") for the
	// role everyone signed in gets from a "*" in the Mapping. Empty when
	// Token is set.
	Group string
	// Token is an API token's name. Empty when Group is set.
	Token string
	// Role is the most the subject may do in Namespaces. NoRole hides the
	// namespaces from it.
	Role Role
	// Namespaces are configured namespace names, or AllNamespaces.
	Namespaces []string
}

// Policy answers what an identity may do in one namespace. Its zero value
// has no rules: every identity has its own role everywhere.
//
// A subject (a group, "*", or a token) that no rule names keeps its role
// in every namespace. A subject that some rule names is limited to the
// namespaces its rules name: in each, to the highest role those rules give
// (and never above its role from the Mapping); in any other namespace it
// has no role. So
//
//	{group: sre-eu, role: operator, namespaces: [prod-eu]}
//	{group: sre-eu, role: viewer,   namespaces: [prod-us]}
//
// makes the operators of sre-eu operators in prod-eu, viewers in prod-us,
// and nothing in a third namespace added later, until a rule says so.
//
// A person's role in a namespace is the highest role any of their groups
// (and "*") earns there, each group limited by its own rules alone: a
// member of both sre-eu (above) and platform (unlimited admins) is an admin
// everywhere.
type Policy struct {
	Mapping Mapping
	Rules   []Rule
}

// RoleIn is what id may do in namespace. Without rules it is id.Role. The
// local user of --auth none has no groups and no rules apply to it.
func (p Policy) RoleIn(id Identity, namespace string) Role {
	if len(p.Rules) == 0 {
		return id.Role
	}
	switch id.Via {
	case ViaToken:
		if limit, limited := p.limit(func(r Rule) bool { return r.Token != "" && r.Token == id.Name }, namespace); limited {
			return min(id.Role, limit)
		}
		return id.Role
	case ViaSession, ViaProxy:
		best := NoRole
		for _, g := range append(slices.Clip(id.Groups), Everyone) {
			r := p.Mapping.GroupRole(g)
			if limit, limited := p.limit(func(rule Rule) bool { return rule.Token == "" && rule.Group == g }, namespace); limited {
				r = min(r, limit)
			}
			best = max(best, r)
		}
		// Never above the role the request was given (computed from the
		// same Mapping, so normally equal to the unlimited answer).
		return min(best, id.Role)
	}
	return id.Role
}

// limit is the highest role the rules that match give in namespace, and
// whether any rule matches at all (in any namespace).
func (p Policy) limit(match func(Rule) bool, namespace string) (Role, bool) {
	limited, best := false, NoRole
	for _, r := range p.Rules {
		if !match(r) {
			continue
		}
		limited = true
		if slices.Contains(r.Namespaces, namespace) || slices.Contains(r.Namespaces, AllNamespaces) {
			best = max(best, r.Role)
		}
	}
	return best, limited
}

// Check reports the first rule that would raise a group above its role
// from the Mapping, or name a group the Mapping gives no role: rules only
// lower roles, so such a rule is a mistake in the configuration. index is
// the rule's position in Rules. Token rules are not checked (a token's
// role is its own, known at request time).
func (p Policy) Check() (index int, err error) {
	for i, r := range p.Rules {
		if r.Token != "" {
			continue
		}
		has := p.Mapping.GroupRole(r.Group)
		switch {
		case has == NoRole:
			return i, fmt.Errorf("group %q has no role from the admin, operator or viewer groups: access rules only lower roles, so add it to one of those lists", r.Group)
		case r.Role > has:
			return i, fmt.Errorf("group %q is a %s by the admin, operator and viewer groups: an access rule cannot make it %s (rules only lower roles)", r.Group, has, r.Role)
		}
	}
	return -1, nil
}

// GroupRole is the highest role whose list names group exactly ("*" for
// the role of everyone signed in): the share of Role that this one group
// earns. Role(groups) is the highest GroupRole of groups and "*".
func (m Mapping) GroupRole(group string) Role {
	switch {
	case slices.Contains(m.Admin, group):
		return Admin
	case slices.Contains(m.Operator, group):
		return Operator
	case slices.Contains(m.Viewer, group):
		return Viewer
	}
	return NoRole
}
