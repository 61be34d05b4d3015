package dlq

import "time"

// EntitySummary is an entity as the catalog's entity list shows it: the
// broker's counts as last read, plus what only the catalog knows.
type EntitySummary struct {
	Entity
	// Namespace is the Service Bus namespace the entity is in, as
	// configured.
	Namespace string
	// Status is the entity's status as last read (Active, Disabled,
	// SendDisabled, ReceiveDisabled).
	Status string
	// Deferred is the catalog's count of present deferred messages in the
	// main entity (Service Bus counts them as active).
	Deferred int64
	// CountsAt is when Counts were read; nil if never.
	CountsAt *time.Time
	// DeletedAt is when the catalog noticed the entity was deleted; nil
	// while it exists.
	DeletedAt *time.Time
}

// GroupSummary is a failure group with the catalog's counters.
type GroupSummary struct {
	Group
	// Entities are the paths of every entity the group was seen in, the
	// ones with the most present messages first.
	Entities []string
	// Namespaces are the group's counts in each namespace it was seen in,
	// the one with the most present messages first.
	Namespaces []NamespaceCount
	// Present is how many of its messages are still in a dead-letter queue;
	// Total counts every one the catalog has seen.
	Present, Total int64
	FirstSeenAt    time.Time
	LastSeenAt     time.Time
	// Triage is what people said about the group (triage.go).
	Triage GroupTriage
}

// DepthSeries is the namespace's dead-letter depth over a time window, for
// the overview's chart: Points are equal slices of [Since, Until], each the
// largest depth seen in it; Latest is the depth at Until.
type DepthSeries struct {
	Since, Until time.Time
	Points       []int64
	Latest       int64
}

// NamespaceCount is a failure group's count in one namespace.
type NamespaceCount struct {
	Name           string
	Present, Total int64
	// Entities are the paths of the entities it was seen in there, as
	// GroupSummary.Entities orders them: what a reader who may see only
	// some namespaces is shown of Entities.
	Entities []string
}
