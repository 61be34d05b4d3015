package audit

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// memStore is an in-memory Store.
type memStore struct {
	mu      sync.Mutex
	entries []Entry
}

func (m *memStore) AppendAudit(_ context.Context, build func(int64, string) (Entry, error)) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seq, h := int64(0), GenesisHash
	if n := len(m.entries); n > 0 {
		seq, h = m.entries[n-1].Seq, m.entries[n-1].Hash
	}
	e, err := build(seq, h)
	if err == nil {
		m.entries = append(m.entries, e)
	}
	return e, err
}

func (m *memStore) ScanAudit(_ context.Context, f Filter, fn func(Entry) error) error {
	for _, e := range m.entries {
		if f.Action != "" && e.Action != f.Action {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func TestHashEncodingIsUnambiguous(t *testing.T) {
	base := Entry{Seq: 1, At: time.UnixMilli(1), Actor: "ab", Action: "c", Params: json.RawMessage("{}"),
		MessageIDs: []string{"1", "2"}, Outcome: "ok", PrevHash: GenesisHash}
	variants := []Entry{base, base, base, base, base}
	variants[1].Actor, variants[1].Action = "a", "bc"                // moved a byte between fields
	variants[2].MessageIDs = []string{"1,2"}                         // joined ids
	variants[3].MessageIDs = []string{"1", "2", ""}                  // an extra empty id
	variants[4].Outcome, variants[4].PrevHash = "ok"+GenesisHash, "" // moved into the previous field
	seen := map[string]int{}
	for i, v := range variants {
		h := v.ComputeHash()
		if len(h) != 64 {
			t.Fatalf("hash %q is not 64 hex digits", h)
		}
		if j, ok := seen[h]; ok {
			t.Fatalf("variants %d and %d hash alike", j, i)
		}
		seen[h] = i
	}
	if base.ComputeHash() != base.ComputeHash() {
		t.Fatal("hash not deterministic")
	}
}

func TestAppend(t *testing.T) {
	m := &memStore{}
	l := New(m)
	l.Now = func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("x", 3600)) }
	ctx := context.Background()
	e, err := l.Append(ctx, Record{Action: ActionJobPaused, Params: json.RawMessage(`{"b": 1, "a": {"d": 2, "c": 1.50}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if e.Actor != ActorLocal || e.Outcome != OutcomeSucceeded || e.Seq != 1 || e.PrevHash != GenesisHash ||
		e.MessageIDs == nil || e.At.Location() != time.UTC || e.At.Nanosecond() != 123000000 {
		t.Fatalf("entry = %+v", e)
	}
	if string(e.Params) != `{"a":{"c":1.50,"d":2},"b":1}` {
		t.Fatalf("params = %s", e.Params)
	}
	e2, err := l.Append(WithActor(ctx, "alice"), Record{Action: ActionJobResumed, Outcome: OutcomeDenied})
	if err != nil {
		t.Fatal(err)
	}
	if e2.Actor != "alice" || e2.PrevHash != e.Hash || e2.Seq != 2 || string(e2.Params) != "{}" || e2.Outcome != OutcomeDenied {
		t.Fatalf("second entry = %+v", e2)
	}
	if _, err := l.Append(ctx, Record{Action: "replayed"}); !errors.Is(err, ErrUnknownAction) {
		t.Fatalf("unknown action: %v", err)
	}
	if _, err := l.Append(ctx, Record{Action: ActionReplay, Params: []int{1}}); err == nil {
		t.Fatal("params that are not an object were accepted")
	}
	if n, err := l.Verify(ctx, nil); n != 2 || err != nil {
		t.Fatalf("Verify = %d, %v", n, err)
	}
	m.entries[0].Outcome = OutcomeFailed
	var be *BrokenChainError
	if _, err := l.Verify(ctx, nil); !errors.As(err, &be) || be.Seq != 1 || be.Reason != HashMismatch {
		t.Fatalf("Verify after tampering: %v", err)
	}
}
