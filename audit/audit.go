package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GenesisHash is the PrevHash of the first entry: 64 zeros.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// hashTag starts every hashed encoding, so a later encoding can change
// without ever colliding with this one.
const hashTag = "dlqdash.audit.v1"

// Entry is one line of the audit trail.
type Entry struct {
	Seq        int64           // 1, 2, 3, ... without gaps
	At         time.Time       // UTC, milliseconds
	Actor      string          // who: a user, a token's name, or ActorLocal
	Action     string          // what: one of the Action constants
	Params     json.RawMessage // the action's parameters, canonical JSON (an object)
	MessageIDs []string        // the catalog ids of the messages it affected; never nil
	Outcome    string          // one of the Outcome constants
	PrevHash   string          // the previous entry's Hash; GenesisHash for the first
	Hash       string          // lowercase hex SHA-256 of the entry (ComputeHash)
}

// keyedTag starts the encoding of a keyed (HMAC) entry.
const keyedTag = "dlqdash.audit.v2.hmac-sha256"

// ComputeHash is the hash an unkeyed entry (one before the chain records
// its switch to a key) should carry: hex SHA-256 of the encoding the
// package documentation describes, over every field but Hash.
func (e Entry) ComputeHash() string { return e.digest(sha256.New(), hashTag) }

// ComputeHMAC is the hash a keyed entry should carry: hex HMAC-SHA256 under
// key of the same encoding, with its own tag.
func (e Entry) ComputeHMAC(key []byte) string {
	return e.digest(hmac.New(sha256.New, key), keyedTag)
}

func (e Entry) digest(h hash.Hash, tag string) string {
	var buf []byte
	field := func(s string) {
		buf = strconv.AppendInt(buf[:0], int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
		buf = append(buf, ',')
		h.Write(buf)
	}
	field(tag)
	field(strconv.FormatInt(e.Seq, 10))
	field(strconv.FormatInt(e.At.UnixMilli(), 10))
	field(e.Actor)
	field(e.Action)
	field(string(e.Params))
	field(strconv.Itoa(len(e.MessageIDs)))
	for _, id := range e.MessageIDs {
		field(id)
	}
	field(e.Outcome)
	field(e.PrevHash)
	return hex.EncodeToString(h.Sum(nil))
}

// Record is what happened, as the code that did it reports it. Log.Append
// adds the number, time and hashes.
type Record struct {
	// Actor is who did it; empty means ActorFrom(ctx).
	Actor  string
	Action string
	// Params is anything encoding/json encodes to an object (a struct, a
	// map, a json.RawMessage); nil means {}.
	Params     any
	MessageIDs []string
	// Outcome is one of the Outcome constants; empty means OutcomeSucceeded.
	Outcome string
}

// Store keeps the entries. Package store implements it; the table must be
// append-only.
type Store interface {
	// AppendAudit runs build with the newest entry's Seq and Hash (0 and
	// GenesisHash when there is none) and stores the entry it returns, in
	// one write transaction, so that concurrent appends (from any process)
	// chain one after another. It returns the stored entry.
	AppendAudit(ctx context.Context, build func(lastSeq int64, lastHash string) (Entry, error)) (Entry, error)
	// ScanAudit calls fn with every entry matching f, in Seq order, from
	// one snapshot, streaming, and stops at fn's first error (returning it).
	ScanAudit(ctx context.Context, f Filter, fn func(Entry) error) error
}

// Filter selects entries. The zero value selects all.
type Filter struct {
	Actor  string     // exactly this actor
	Action string     // exactly this action
	Since  *time.Time // At at or after
	Until  *time.Time // At before
	// Namespace keeps the entries whose params name it as their
	// namespace or destination_namespace.
	Namespace string
	// Job keeps the entries whose params name this job (job_id): its
	// creation, its messages' entries, its pauses and its end.
	Job string
	// Visible, when not nil, keeps the entries of these namespaces (by
	// their params' namespace) and the entries that name none: what a
	// reader limited to some namespaces may see.
	Visible []string
}

// Log is the audit trail. It is safe for concurrent use.
type Log struct {
	store Store
	// key, when set, keys every entry this Log appends (ComputeHMAC) and
	// the part of the chain after its switch entry when it verifies.
	key []byte
	// keyed is set once the chain is known to record the switch to key.
	keyedMu sync.Mutex
	keyed   bool
	// Now returns the current time; tests replace it.
	Now func() time.Time
}

// New returns the Log kept in st.
func New(st Store) *Log { return &Log{store: st, Now: time.Now} }

// ErrUnknownAction is returned by Append for an action outside the
// vocabulary.
var ErrUnknownAction = errors.New("unknown audit action")

// Append records r as the next entry of the chain and returns it.
func (l *Log) Append(ctx context.Context, r Record) (Entry, error) {
	e, err := l.prepare(ctx, r)
	if err != nil {
		return Entry{}, err
	}
	if err := l.ensureKeyed(ctx); err != nil {
		return Entry{}, fmt.Errorf("audit %s: %w", r.Action, err)
	}
	out, err := l.store.AppendAudit(ctx, l.build(e))
	if err != nil {
		return Entry{}, fmt.Errorf("audit %s: %w", r.Action, err)
	}
	return out, nil
}

// Build makes the next entry of the chain from the newest entry's Seq and
// Hash (0 and GenesisHash when there is none): what a store calls inside
// the write transaction that appends it (Store.AppendAudit's build).
type Build func(lastSeq int64, lastHash string) (Entry, error)

// Builder is for a store that appends an entry in the transaction that
// also writes what the entry records (a job's status and its entry: both
// or neither). It makes sure the chain is keyed first (a keyed Log may
// append the switch entry, so it must not run inside another write
// transaction), and returns a func that checks and encodes a Record (its
// actor, when empty, ctx's) into the Build the store calls, without any
// I/O.
func (l *Log) Builder(ctx context.Context) (func(Record) (Build, error), error) {
	if err := l.ensureKeyed(ctx); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return func(r Record) (Build, error) {
		e, err := l.prepare(ctx, r)
		if err != nil {
			return nil, err
		}
		return l.build(e), nil
	}, nil
}

// prepare checks r and makes its entry, all but its place in the chain.
func (l *Log) prepare(ctx context.Context, r Record) (Entry, error) {
	if !KnownAction(r.Action) {
		return Entry{}, fmt.Errorf("audit: %w %q", ErrUnknownAction, r.Action)
	}
	params, err := CanonicalParams(r.Params)
	if err != nil {
		return Entry{}, fmt.Errorf("audit %s: %w", r.Action, err)
	}
	ids := r.MessageIDs
	if ids == nil {
		ids = []string{}
	}
	e := Entry{
		At:         l.Now().UTC().Truncate(time.Millisecond),
		Actor:      r.Actor,
		Action:     r.Action,
		Params:     params,
		MessageIDs: ids,
		Outcome:    r.Outcome,
	}
	if e.Actor == "" {
		e.Actor = ActorFrom(ctx)
	}
	if e.Outcome == "" {
		e.Outcome = OutcomeSucceeded
	}
	return e, nil
}

// build chains e onto the newest entry.
func (l *Log) build(e Entry) Build {
	return func(lastSeq int64, lastHash string) (Entry, error) {
		e.Seq = lastSeq + 1
		e.PrevHash = lastHash
		e.Hash = l.sum(e)
		return e, nil
	}
}

// CanonicalParams encodes params as canonical JSON: an object whose keys
// are sorted at every level, without insignificant space, numbers exactly
// as written (never through a float). nil is {}.
func CanonicalParams(params any) (json.RawMessage, error) {
	if params == nil {
		return json.RawMessage("{}"), nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		if v == nil {
			return json.RawMessage("{}"), nil
		}
		return nil, errors.New("params: must be a JSON object")
	}
	// encoding/json writes map keys sorted and json.Number verbatim.
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	return out, nil
}

// BrokenChainError reports the first entry at which the chain does not
// hold.
type BrokenChainError struct {
	Seq    int64  // the entry that does not hold
	Reason Reason // why
	Want   string // what the chain says it should be: a hash, or a seq
	Got    string // what it is
	// Action is the action whose entry is missing (NoStatusEntry).
	Action string
}

// Reason says how a chain is broken.
type Reason int

const (
	// HashMismatch: the entry's Hash is not the hash of its contents.
	HashMismatch Reason = iota
	// PrevMismatch: the entry's PrevHash is not the previous entry's Hash.
	PrevMismatch
	// Gap: entries are missing before this one (Want is the Seq expected).
	Gap
	// Truncated: the chain ends (Got) before the expected head (Want, Seq).
	Truncated
	// HeadMismatch: the entry at the expected head's Seq has another hash.
	HeadMismatch
	// NotKeyed: a key was given but no entry records the switch to it: the
	// chain was rewritten without the key (Seq is 1).
	NotKeyed
	// WrongKey: the switch entry names another key (Want and Got: key ids).
	WrongKey
	// NeedsKey: the chain is keyed from this entry and no key was given.
	NeedsKey
	// NoCreation: a job has no creation entry (Want: the job id); Seq is 0.
	NoCreation
	// NoStatusEntry: a job's status (Got: completed, cancelled, paused)
	// has no entry of the Action that records it (Want: the job id); Seq
	// is 0. A job's status and its entry are written in one transaction,
	// so the entry was removed, or written apart from the status by a
	// dlqdash from before that (and lost in a crash between the two).
	NoStatusEntry
)

func (e *BrokenChainError) Error() string {
	msg := "audit chain broken at entry " + strconv.FormatInt(e.Seq, 10) + ": "
	switch e.Reason {
	case PrevMismatch:
		return msg + "prev_hash does not match the hash of the entry before it"
	case Gap:
		if e.Want == "1" {
			return msg + "it is the first entry, but the chain starts at 1"
		}
		return msg + "entries from " + e.Want + " are missing before it"
	case Truncated:
		return msg + "the chain ends at entry " + e.Got + ": its newest entries were removed (expected head " + e.Want + ")"
	case HeadMismatch:
		return msg + "its hash is not the expected head's: entries up to it were rewritten"
	case NotKeyed:
		return msg + "no entry records the switch to the audit key: the chain was rewritten without the key, or was never kept under this key"
	case WrongKey:
		return msg + "it switched the chain to another audit key (key id " + e.Want + ", this key is " + e.Got + "): give the key dlqdash serve uses"
	case NeedsKey:
		return msg + "the chain is keyed from here on: give the audit key (--audit-key-file or DLQDASH_AUDIT_KEY)"
	case NoStatusEntry:
		return "audit chain broken: job " + e.Want + " is " + e.Got + ", but no " + e.Action + " entry records it (removed, " +
			"or lost in a crash of a dlqdash that wrote a job's status and its entry apart)"
	case NoCreation:
		if e.Got == "empty" {
			return "audit chain broken: it is empty while job " + e.Want + " exists (the audit table was emptied)"
		}
		return "audit chain broken: job " + e.Want + " has no creation entry (removed, or the chain was replaced)"
	default:
		return msg + "hash does not match its contents"
	}
}

// VerifyProgressEvery is how many entries Verify checks between calls of
// its progress function.
const VerifyProgressEvery = 10000

// Verify checks every entry in order: numbered without gaps from 1, each
// PrevHash the previous Hash (GenesisHash first), each Hash that of its
// contents. It returns how many entries it checked, and a
// *BrokenChainError naming the first entry that does not hold. progress,
// if not nil, is called with the count every VerifyProgressEvery entries.
// It streams: memory does not grow with the log.
func (l *Log) Verify(ctx context.Context, progress func(n int)) (int, error) {
	n, _, err := l.VerifyHead(ctx, Head{}, progress)
	return n, err
}

// VerifyHead is Verify that also checks the chain against a head recorded
// earlier (zero: none): the chain must reach expect.Seq, and the entry
// there must carry expect.Hash. It returns the chain's head.
//
// Entries before the one recording the switch to a key
// (ActionAuditKeyed) are checked as SHA-256 (ComputeHash), that entry and
// every later one as HMAC-SHA256 under the Log's key (ComputeHMAC). A
// keyed Log refuses a chain that never switched (rewritten without the
// key), and a Log without a key refuses to vouch for a keyed chain.
func (l *Log) VerifyHead(ctx context.Context, expect Head, progress func(n int)) (int, Head, error) {
	n := 0
	prevSeq, prevHash := int64(0), GenesisHash
	keyed := false
	err := l.store.ScanAudit(ctx, Filter{}, func(e Entry) error {
		switch {
		case e.Seq != prevSeq+1:
			return &BrokenChainError{Seq: e.Seq, Reason: Gap, Want: strconv.FormatInt(prevSeq+1, 10), Got: strconv.FormatInt(e.Seq, 10)}
		case e.PrevHash != prevHash:
			return &BrokenChainError{Seq: e.Seq, Reason: PrevMismatch, Want: prevHash, Got: e.PrevHash}
		}
		if !keyed && e.Action == ActionAuditKeyed {
			if l.key == nil {
				return &BrokenChainError{Seq: e.Seq, Reason: NeedsKey}
			}
			if id := switchKeyID(e); id != KeyID(l.key) {
				return &BrokenChainError{Seq: e.Seq, Reason: WrongKey, Want: id, Got: KeyID(l.key)}
			}
			keyed = true
		}
		h := e.ComputeHash()
		if keyed {
			h = e.ComputeHMAC(l.key)
		}
		if h != e.Hash {
			return &BrokenChainError{Seq: e.Seq, Reason: HashMismatch, Want: h, Got: e.Hash}
		}
		if expect.Seq == e.Seq && expect.Hash != e.Hash {
			return &BrokenChainError{Seq: e.Seq, Reason: HeadMismatch, Want: expect.Hash, Got: e.Hash}
		}
		prevSeq, prevHash = e.Seq, e.Hash
		n++
		if progress != nil && n%VerifyProgressEvery == 0 {
			progress(n)
		}
		return nil
	})
	head := Head{Seq: prevSeq, Hash: prevHash}
	if err != nil {
		var be *BrokenChainError
		if errors.As(err, &be) {
			return n, head, be
		}
		return n, head, fmt.Errorf("verify audit chain: %w", err)
	}
	switch {
	case expect.Seq > prevSeq:
		return n, head, &BrokenChainError{Seq: expect.Seq, Reason: Truncated, Want: strconv.FormatInt(expect.Seq, 10), Got: strconv.FormatInt(prevSeq, 10)}
	case l.key != nil && n > 0 && !keyed:
		return n, head, &BrokenChainError{Seq: 1, Reason: NotKeyed}
	}
	return n, head, nil
}

// Scan calls fn with every entry matching f, in order (for export).
func (l *Log) Scan(ctx context.Context, f Filter, fn func(Entry) error) error {
	return l.store.ScanAudit(ctx, f, fn)
}

// actorKey is the context key of WithActor.
type actorKey struct{}

// ActorLocal is the actor until sign-in exists: whoever runs dlqdash.
const ActorLocal = "local"

// The namespaces of stored actors, one per identity source (package auth's
// Identity.Actor); "cli:" is the command line's (token create, revoke).
const (
	ActorOIDC  = "oidc:"
	ActorProxy = "proxy:"
	ActorToken = "token:"
	ActorCLI   = "cli:"
)

// DisplayName is the name a stored actor shows beside it: the name without
// its source's namespace ("alice" for "oidc:alice"). An actor stored before
// the namespaces (a bare name) is its own display name.
func DisplayName(actor string) string {
	for _, ns := range []string{ActorOIDC, ActorProxy, ActorToken, ActorCLI} {
		if name, ok := strings.CutPrefix(actor, ns); ok && name != "" {
			return name
		}
	}
	return actor
}

// ActorSystem is the actor of entries dlqdash records on its own account
// (the switch to a keyed chain).
const ActorSystem = "system"

// WithActor returns ctx carrying actor, for Append to record.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom is the actor ctx carries, or ActorLocal.
func ActorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && strings.TrimSpace(a) != "" {
		return a
	}
	return ActorLocal
}
