package auth_test

import (
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/auth"
)

func TestPolicyRoleIn(t *testing.T) {
	mapping := auth.Mapping{
		Admin:    []string{"platform"},
		Operator: []string{"sre-eu", "sre-us"},
		Viewer:   []string{"*"},
	}
	policy := auth.Policy{Mapping: mapping, Rules: []auth.Rule{
		// Operators of prod-eu are viewers of prod-us.
		{Group: "sre-eu", Role: auth.Operator, Namespaces: []string{"prod-eu"}},
		{Group: "sre-eu", Role: auth.Viewer, Namespaces: []string{"prod-us"}},
		// sre-us: viewer everywhere, operator in prod-us.
		{Group: "sre-us", Role: auth.Viewer, Namespaces: []string{auth.AllNamespaces}},
		{Group: "sre-us", Role: auth.Operator, Namespaces: []string{"prod-us"}},
		// Everyone signed in sees prod-eu only.
		{Group: auth.Everyone, Role: auth.Viewer, Namespaces: []string{"prod-eu"}},
		// The CI token may replay in staging only, and read prod-eu.
		{Token: "ci", Role: auth.Operator, Namespaces: []string{"staging"}},
		{Token: "ci", Role: auth.Viewer, Namespaces: []string{"prod-eu"}},
	}}
	person := func(via auth.Via, groups ...string) auth.Identity {
		return auth.Identity{Name: "ana", Via: via, Groups: groups, Role: mapping.Role(groups)}
	}
	tests := []struct {
		name      string
		id        auth.Identity
		namespace string
		want      auth.Role
	}{
		{"limited group in its namespace", person(auth.ViaSession, "sre-eu"), "prod-eu", auth.Operator},
		{"limited group is a viewer elsewhere", person(auth.ViaSession, "sre-eu"), "prod-us", auth.Viewer},
		{"limited group has nothing in an unnamed namespace", person(auth.ViaSession, "sre-eu"), "staging", auth.NoRole},
		{"proxy identities are limited the same way", person(auth.ViaProxy, "sre-eu"), "prod-us", auth.Viewer},
		{"star namespaces as a baseline", person(auth.ViaSession, "sre-us"), "staging", auth.Viewer},
		{"highest rule wins", person(auth.ViaSession, "sre-us"), "prod-us", auth.Operator},
		{"two limited groups: the higher in each namespace (eu)", person(auth.ViaSession, "sre-eu", "sre-us"), "prod-eu", auth.Operator},
		{"two limited groups: the higher in each namespace (us)", person(auth.ViaSession, "sre-eu", "sre-us"), "prod-us", auth.Operator},
		{"an unlimited group keeps its role everywhere", person(auth.ViaSession, "sre-eu", "platform"), "staging", auth.Admin},
		{"everyone limited by its own rules", person(auth.ViaSession, "nobody-special"), "prod-eu", auth.Viewer},
		{"everyone has nothing outside its namespaces", person(auth.ViaSession, "nobody-special"), "prod-us", auth.NoRole},
		{"a rule never raises", auth.Identity{Name: "x", Via: auth.ViaSession, Groups: []string{"sre-eu"}, Role: auth.Viewer}, "prod-eu", auth.Viewer},
		{"token in its namespace", auth.Identity{Name: "ci", Via: auth.ViaToken, Role: auth.Admin}, "staging", auth.Operator},
		{"token limited to viewer", auth.Identity{Name: "ci", Via: auth.ViaToken, Role: auth.Admin}, "prod-eu", auth.Viewer},
		{"token outside its namespaces", auth.Identity{Name: "ci", Via: auth.ViaToken, Role: auth.Admin}, "prod-us", auth.NoRole},
		{"token rule never raises", auth.Identity{Name: "ci", Via: auth.ViaToken, Role: auth.Viewer}, "staging", auth.Viewer},
		{"an unnamed token keeps its role", auth.Identity{Name: "ops", Via: auth.ViaToken, Role: auth.Operator}, "prod-us", auth.Operator},
		{"a token named like a group is not the group", auth.Identity{Name: "sre-eu", Via: auth.ViaToken, Role: auth.Admin}, "staging", auth.Admin},
		{"the local user of --auth none", auth.Local(), "prod-us", auth.Admin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.RoleIn(tt.id, tt.namespace); got != tt.want {
				t.Errorf("RoleIn(%v via %s, %q) = %s, want %s", tt.id.Groups, tt.id.Via, tt.namespace, got, tt.want)
			}
		})
	}
}

func TestPolicyWithoutRulesIsTheIdentitysRole(t *testing.T) {
	mapping := auth.Mapping{Operator: []string{"sre"}}
	for _, id := range []auth.Identity{
		{Name: "a", Via: auth.ViaSession, Groups: []string{"sre"}, Role: auth.Operator},
		{Name: "b", Via: auth.ViaProxy, Groups: []string{"other"}, Role: auth.NoRole},
		{Name: "c", Via: auth.ViaToken, Role: auth.Admin},
		auth.Local(),
	} {
		if got := (auth.Policy{Mapping: mapping}).RoleIn(id, "anything"); got != id.Role {
			t.Errorf("RoleIn(%s) = %s, want its own role %s", id.Name, got, id.Role)
		}
	}
}

// Mapping.Role is the highest GroupRole of the groups and "*": RoleIn
// without limits agrees with the role a request is given.
func TestMappingGroupRoleAgreesWithRole(t *testing.T) {
	m := auth.Mapping{Admin: []string{"a"}, Operator: []string{"o", "a"}, Viewer: []string{"*", "v"}}
	for _, groups := range [][]string{nil, {"a"}, {"o"}, {"v"}, {"x"}, {"x", "o"}, {"v", "a"}} {
		best := m.GroupRole(auth.Everyone)
		for _, g := range groups {
			best = max(best, m.GroupRole(g))
		}
		if want := m.Role(groups); best != want {
			t.Errorf("groups %v: highest GroupRole %s, Role %s", groups, best, want)
		}
	}
	if got := (auth.Mapping{Viewer: []string{"*"}}).GroupRole("sre"); got != auth.NoRole {
		t.Errorf("GroupRole of a group only * covers = %s, want none (the * share is its own)", got)
	}
}

func TestPolicyCheck(t *testing.T) {
	mapping := auth.Mapping{Operator: []string{"sre-eu"}, Viewer: []string{"readers"}}
	tests := []struct {
		name    string
		rules   []auth.Rule
		index   int
		wantErr string
	}{
		{"lowering is fine", []auth.Rule{{Group: "sre-eu", Role: auth.Viewer, Namespaces: []string{"a"}}, {Group: "sre-eu", Role: auth.Operator, Namespaces: []string{"b"}}}, -1, ""},
		{"tokens are not checked", []auth.Rule{{Token: "ci", Role: auth.Admin, Namespaces: []string{"a"}}}, -1, ""},
		{"raising is refused", []auth.Rule{{Group: "sre-eu", Role: auth.Viewer, Namespaces: []string{"a"}}, {Group: "readers", Role: auth.Operator, Namespaces: []string{"a"}}}, 1, `group "readers" is a viewer`},
		{"a group without a role", []auth.Rule{{Group: "ghosts", Role: auth.Viewer, Namespaces: []string{"a"}}}, 0, `group "ghosts" has no role`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, err := auth.Policy{Mapping: mapping, Rules: tt.rules}.Check()
			if i != tt.index || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Check() = %d, %v; want %d, %q", i, err, tt.index, tt.wantErr)
			}
		})
	}
}
