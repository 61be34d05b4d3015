package dlq

import (
	"context"
	"time"
)

// Record is a cataloged message: the broker's fields plus what the catalog
// knows about the copy. It is the message object of the stable interface.
type Record struct {
	ID        int64  // the catalog's id (the API writes it as a string)
	Namespace string // the Service Bus namespace of its entity, as configured
	Entity    string
	SubQueue  SubQueue
	Message

	BodySize    int64
	BodyPreview string // a short text preview for lists; empty for binary bodies
	GroupID     string // empty for messages that are not dead letters
	FirstSeenAt time.Time
	LastSeenAt  time.Time
	GoneAt      *time.Time
	ReplayCount int
}

// Cursor is the ingester's read state of one (entity, subqueue).
type Cursor struct {
	Entity   string
	SubQueue SubQueue
	// Floor: no message new to the catalog can arrive below it.
	Floor int64
	// MaxSeen is the highest sequence number any pass has seen, -1 for none.
	MaxSeen int64
	// BrokerCount is the broker's count for the subqueue when the last pass
	// ended; -1 when never read.
	BrokerCount int64
	// MainLow is, for the main subqueue, the lowest active or deferred
	// sequence number seen by the last main pass (0 when unknown).
	MainLow int64
	// Present is the catalog's count of present messages (read, not stored).
	Present int64

	LastPassAt   *time.Time
	LastFullAt   *time.Time
	FullDuration time.Duration
	LastError    string
}

// Page is one page of a pass over an entity's subqueue, to be written in
// one transaction. The pass covered sequence numbers [From, Through]:
// Messages are every message in that range that the catalog keeps, and
// every present cataloged message of the subqueue in the range that is not
// among them has left the broker.
type Page struct {
	Entity   string
	SubQueue SubQueue
	From     int64
	Through  int64 // math.MaxInt64 for the final, empty page
	Messages []Message
	SeenAt   time.Time
}

// PageResult says what a page changed.
type PageResult struct {
	New     []int64 // catalog ids of messages seen for the first time
	Gone    []int64 // catalog ids of messages noticed gone
	Updated int     // known messages whose state or delivery count changed
}

// EntitySync is what recording the listed entities changed.
type EntitySync struct {
	Added   []string // paths seen for the first time (or again after deletion)
	Deleted []string // paths no longer listed; their messages are now gone
	Gone    []int64  // catalog ids of messages marked gone with a deleted entity
}

// Status is the ingester's freshness, as /api/v1/status reports it.
type Status struct {
	Namespace     string
	LastSuccessAt *time.Time
	Healthy       bool
	Error         string
	// ErrorSince is when the current failure began (nil when healthy).
	ErrorSince *time.Time
	// Replica is the replica that ingests the namespace (holds its ingest
	// lease, when several replicas share the catalog), "" when none does
	// or it is not known. Set by whoever runs the ingester
	// (cluster.Ingester); an Ingester leaves it empty.
	Replica string
}

// Catalog is what the ingester needs from the catalog's storage. Package
// store implements it over SQLite; every method is one transaction.
type Catalog interface {
	// Cursors returns the read state of every (entity, subqueue) read before,
	// with Present filled in.
	Cursors(ctx context.Context) ([]Cursor, error)
	// SyncEntities records the listed entities with their counts, and at as
	// the time of the last successful broker read (LastSuccess): new ones
	// are added, listed ones that were deleted come back, and known ones not
	// listed are marked deleted with their present messages gone.
	SyncEntities(ctx context.Context, listed []Entity, at time.Time) (EntitySync, error)
	// SaveSettings records entities' settings.
	SaveSettings(ctx context.Context, settings []Settings) error
	// ApplyPage writes one page of a pass.
	ApplyPage(ctx context.Context, p Page) (PageResult, error)
	// SaveCursor stores a cursor (Present is ignored).
	SaveCursor(ctx context.Context, c Cursor) error
	// RecordDepth stores a depth sample of an entity's broker counts.
	RecordDepth(ctx context.Context, entity string, c Counts, at time.Time) error
	// PruneGone deletes at most batch messages gone before cutoff and depth
	// samples older than cutoff, returning how many messages it deleted.
	PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error)
	// MergeSearchIndex does a bounded step of the search index's merging,
	// reporting whether there was any to do.
	MergeSearchIndex(ctx context.Context, pages int) (bool, error)
	// LastSuccess returns it (nil if never).
	LastSuccess(ctx context.Context) (*time.Time, error)
}

// ChangeKind says what a Change is about.
type ChangeKind string

// The change kinds.
const (
	ChangeNew       ChangeKind = "new"       // messages cataloged for the first time
	ChangeGone      ChangeKind = "gone"      // messages noticed gone
	ChangeUpdated   ChangeKind = "updated"   // known messages whose state or delivery count changed
	ChangeCounts    ChangeKind = "counts"    // an entity's broker counts changed
	ChangeFreshness ChangeKind = "freshness" // the ingester's status changed
	ChangeEntities  ChangeKind = "entities"  // entities were added or deleted
	ChangeGroups    ChangeKind = "groups"    // a failure group's triage changed (a person, not the ingester)
)

// Change is an event for the live dashboard. Subscribers must not block.
type Change struct {
	Kind ChangeKind
	// Namespace is the namespace of the ingester that made the change.
	Namespace string
	Entity    string   // empty for namespace-wide changes
	SubQueue  SubQueue // for new, gone and updated
	IDs       []int64  // catalog ids, for new, gone and updated
	Counts    *Counts  // for counts
	Status    *Status  // for freshness
	At        time.Time
}
