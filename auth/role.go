package auth

import (
	"fmt"
	"strings"
)

// Role is what an identity may do. Each role includes the ones before it:
// an operator can do everything a viewer can, an admin everything.
type Role int

const (
	// NoRole: signed in (or named by a proxy) but mapped to no role. Such
	// an identity may read nothing.
	NoRole Role = iota
	// Viewer reads everything (message bodies may be hidden from viewers).
	Viewer
	// Operator replays and discards, and pauses, resumes and cancels jobs.
	Operator
	// Admin edits and replays single messages and manages tokens.
	Admin
)

var roleNames = [...]string{NoRole: "none", Viewer: "viewer", Operator: "operator", Admin: "admin"}

// String is the role's name: viewer, operator, admin, or none.
func (r Role) String() string {
	if r < NoRole || int(r) >= len(roleNames) {
		return fmt.Sprintf("Role(%d)", int(r))
	}
	return roleNames[r]
}

// Includes reports whether r may do what need requires.
func (r Role) Includes(need Role) bool { return r >= need }

// ParseRole reads viewer, operator or admin (any case, spaces trimmed).
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "viewer":
		return Viewer, nil
	case "operator":
		return Operator, nil
	case "admin":
		return Admin, nil
	}
	return NoRole, fmt.Errorf("unknown role %q: want viewer, operator or admin", s)
}

// MarshalText writes the role's name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
