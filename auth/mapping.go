package auth

import (
	"slices"
	"strings"
)

// Everyone in a Mapping's list matches every identified user, whatever
// their groups: "--viewer-groups '*'" makes everyone who signs in a viewer.
const Everyone = "*"

// Mapping turns an identity provider's groups (or roles, or whatever claim
// is configured) into a role: the highest role one of whose groups the
// user is in. Group names match exactly (case-sensitive: Entra ID sends
// object ids, Keycloak and Okta names).
type Mapping struct {
	Admin, Operator, Viewer []string
}

// Role is the highest role groups earn; NoRole when none matches.
func (m Mapping) Role(groups []string) Role {
	in := func(list []string) bool {
		for _, g := range list {
			if g == Everyone || slices.Contains(groups, g) {
				return true
			}
		}
		return false
	}
	switch {
	case in(m.Admin):
		return Admin
	case in(m.Operator):
		return Operator
	case in(m.Viewer):
		return Viewer
	}
	return NoRole
}

// Empty reports whether no group earns any role.
func (m Mapping) Empty() bool {
	return len(m.Admin) == 0 && len(m.Operator) == 0 && len(m.Viewer) == 0
}

// SplitList reads a comma-separated list: items trimmed, empty ones
// dropped; nil for an empty list.
func SplitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
