package audit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinKeyLen is the shortest audit key accepted, in bytes.
const MinKeyLen = 16

// NewKeyed returns the Log kept in st whose entries are HMAC-SHA256 links
// under key, a secret kept outside the database. The first Append records
// the switch (ActionAuditKeyed) if the chain does not yet hold it; entries
// before it stay checkable as SHA-256.
func NewKeyed(st Store, key []byte) (*Log, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("audit key too short: %d bytes, want at least %d", len(key), MinKeyLen)
	}
	l := New(st)
	l.key = append([]byte(nil), key...)
	return l, nil
}

// KeyID names a key without revealing it: the first 16 hex digits of its
// HMAC of a fixed text. The switch entry records it, so that verify can
// tell a wrong key from a rewritten chain.
func KeyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("dlqdash.audit.key-id"))
	return hex.EncodeToString(m.Sum(nil))[:16]
}

// switchKeyID is the key id a switch entry records ("" if none).
func switchKeyID(e Entry) string {
	var p struct {
		KeyID string `json:"key_id"`
	}
	_ = json.Unmarshal(e.Params, &p)
	return p.KeyID
}

// sum is the hash e carries when this Log appends it.
func (l *Log) sum(e Entry) string {
	if l.key != nil {
		return e.ComputeHMAC(l.key)
	}
	return e.ComputeHash()
}

var errStopScan = errors.New("stop")

// ensureKeyed makes sure a keyed Log's chain records the switch to its key
// before its first keyed entry: it looks for the switch entry once and
// appends it if there is none. It refuses a chain switched to another key.
func (l *Log) ensureKeyed(ctx context.Context) error {
	if l.key == nil {
		return nil
	}
	l.keyedMu.Lock()
	defer l.keyedMu.Unlock()
	if l.keyed {
		return nil
	}
	var found *Entry
	err := l.store.ScanAudit(ctx, Filter{Action: ActionAuditKeyed}, func(e Entry) error {
		found = &e
		return errStopScan
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return fmt.Errorf("find the audit key switch: %w", err)
	}
	id := KeyID(l.key)
	if found != nil {
		if got := switchKeyID(*found); got != id {
			return fmt.Errorf("the audit trail is kept under another key (key id %s, this key is %s): give the key it was started with", got, id)
		}
		l.keyed = true
		return nil
	}
	sw := Entry{At: l.Now().UTC().Truncate(time.Millisecond), Actor: ActorSystem, Action: ActionAuditKeyed,
		Params: json.RawMessage(`{"key_id":"` + id + `"}`), MessageIDs: []string{}, Outcome: OutcomeSucceeded}
	if _, err := l.store.AppendAudit(ctx, func(lastSeq int64, lastHash string) (Entry, error) {
		sw.Seq, sw.PrevHash = lastSeq+1, lastHash
		sw.Hash = sw.ComputeHMAC(l.key)
		return sw, nil
	}); err != nil {
		return fmt.Errorf("record the switch to a keyed audit chain: %w", err)
	}
	l.keyed = true
	return nil
}

// CheckKey fails if the chain records a switch to another key than this
// Log's, and records the switch if there is none (for start-up).
func (l *Log) CheckKey(ctx context.Context) error { return l.ensureKeyed(ctx) }

// Head is the newest entry of a chain, kept elsewhere to notice a rewrite
// or a truncation later: "SEQ:HASH".
type Head struct {
	Seq  int64
	Hash string
}

func (h Head) String() string { return strconv.FormatInt(h.Seq, 10) + ":" + h.Hash }

// ParseHead reads "SEQ:HASH".
func ParseHead(s string) (Head, error) {
	seq, hash, ok := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 0 || len(hash) != 64 {
		return Head{}, fmt.Errorf("invalid audit head %q: want SEQ:HASH as `dlqdash audit head` prints it", s)
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return Head{}, fmt.Errorf("invalid audit head %q: the hash is not 64 hex digits", s)
	}
	return Head{Seq: n, Hash: strings.ToLower(hash)}, nil
}
