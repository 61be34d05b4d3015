package dlq

import (
	"strings"
	"time"
	"unicode/utf8"
)

// GroupStatus is where a failure group is in triage.
type GroupStatus string

// The statuses. A group starts new; a resolved group that receives new dead
// letters goes back to new.
const (
	StatusNew           GroupStatus = "new"
	StatusInvestigating GroupStatus = "investigating"
	StatusKnown         GroupStatus = "known"
	StatusResolved      GroupStatus = "resolved"
)

// GroupStatuses are the statuses in the order a group usually moves through
// them.
var GroupStatuses = []GroupStatus{StatusNew, StatusInvestigating, StatusKnown, StatusResolved}

// Valid reports whether s is one of the statuses.
func (s GroupStatus) Valid() bool {
	switch s {
	case StatusNew, StatusInvestigating, StatusKnown, StatusResolved:
		return true
	}
	return false
}

// Silent reports whether alerts about a group in this status are held
// back: someone knows about it (known) or said it is fixed (resolved).
func (s GroupStatus) Silent() bool { return s == StatusKnown || s == StatusResolved }

// GroupTriage is what people said about a failure group.
type GroupTriage struct {
	// Name is the name someone gave the group; "" means the generated one
	// (GroupName).
	Name   string
	Status GroupStatus
	Owner  string
	Notes  string
	// StatusChangedAt is when the status last changed; nil if it never did.
	StatusChangedAt *time.Time
	// ReopenedAt is when the group, resolved, last received new dead
	// letters and went back to new; nil if it never did.
	ReopenedAt *time.Time
}

// DisplayName is the group's name: the one given, or the generated one.
func (g GroupSummary) DisplayName() string {
	if g.Triage.Name != "" {
		return g.Triage.Name
	}
	return GroupName(g.Reason, g.DescriptionPattern)
}

// maxGeneratedPattern is how much of a description pattern a generated name
// keeps.
const maxGeneratedPattern = 60

// GroupName is the name generated for a group from its reason and
// description pattern: "MaxDeliveryCountExceeded · Order <n> not found",
// the pattern's first line cut at a word near 60 characters with "…".
func GroupName(reason, pattern string) string {
	if reason == "" {
		reason = "(no reason)"
	}
	p, _, _ := strings.Cut(strings.TrimSpace(pattern), "\n")
	p = strings.Join(strings.Fields(p), " ")
	if p == "" {
		return reason
	}
	if utf8.RuneCountInString(p) > maxGeneratedPattern {
		r := []rune(p)[:maxGeneratedPattern]
		cut := string(r)
		if i := strings.LastIndexByte(cut, ' '); i > maxGeneratedPattern/2 {
			cut = cut[:i]
		}
		p = strings.TrimRight(cut, " .,;:") + "…"
	}
	return reason + " · " + p
}

// TriageChange is a change to a group's triage; nil fields stay as they
// are. Name "" gives the group back its generated name.
type TriageChange struct {
	Name, Owner, Notes *string
	Status             *GroupStatus
}

// State is the group's status, new when none is recorded.
func (t GroupTriage) State() GroupStatus {
	if t.Status == "" {
		return StatusNew
	}
	return t.Status
}
