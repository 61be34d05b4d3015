package audit

import (
	"context"
	"errors"
	"strconv"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// rehash rewrites the chain from entry i on as someone holding only the
// database would: recomputing every SHA-256 link.
func rehash(m *memStore, from int) {
	for i := from; i < len(m.entries); i++ {
		if i > 0 {
			m.entries[i].PrevHash = m.entries[i-1].Hash
		}
		m.entries[i].Hash = m.entries[i].ComputeHash()
	}
}

func brokenAt(t *testing.T, err error, seq int64, reason Reason) {
	t.Helper()
	var be *BrokenChainError
	if !errors.As(err, &be) || be.Seq != seq || be.Reason != reason {
		t.Fatalf("want broken at %d (reason %d), got %v", seq, reason, err)
	}
}

func TestKeyedChainRefusesARewriteRehashedWithoutTheKey(t *testing.T) {
	ctx := context.Background()
	m := &memStore{}
	// Two entries from before the key existed.
	old := New(m)
	for range 2 {
		if _, err := old.Append(ctx, Record{Action: ActionJobPaused}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := NewKeyed(m, testKey)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(ctx, Record{Action: ActionJobResumed}); err != nil {
			t.Fatal(err)
		}
	}
	// 1, 2 unkeyed; 3 the switch; 4..6 keyed.
	if len(m.entries) != 6 || m.entries[2].Action != ActionAuditKeyed || m.entries[2].Actor != ActorSystem {
		t.Fatalf("entries = %+v", m.entries)
	}
	if m.entries[3].Hash != m.entries[3].ComputeHMAC(testKey) || m.entries[3].Hash == m.entries[3].ComputeHash() {
		t.Fatal("entry after the switch is not an HMAC")
	}
	n, head, err := l.VerifyHead(ctx, Head{}, nil)
	if n != 6 || err != nil || head.Seq != 6 || head.Hash != m.entries[5].Hash {
		t.Fatalf("VerifyHead = %d, %v, %v", n, head, err)
	}
	// An unkeyed verifier cannot vouch for the keyed part.
	_, err = New(m).Verify(ctx, nil)
	brokenAt(t, err, 3, NeedsKey)
	// Another key is named as such.
	other, _ := NewKeyed(m, []byte("another key, long enough to use"))
	_, err = other.Verify(ctx, nil)
	brokenAt(t, err, 3, WrongKey)
	if err := other.CheckKey(ctx); err == nil {
		t.Fatal("CheckKey accepted another key")
	}

	saved := append([]Entry(nil), m.entries...)
	// Rewrite entry 4 and rehash everything after it, SHA-256 style.
	m.entries[3].Outcome = OutcomeFailed
	rehash(m, 3)
	_, err = l.Verify(ctx, nil)
	brokenAt(t, err, 4, HashMismatch)

	// Rewrite an old unkeyed entry and rehash all: the switch entry breaks.
	copy(m.entries, saved)
	m.entries[0].Actor = "mallory"
	rehash(m, 0)
	_, err = l.Verify(ctx, nil)
	brokenAt(t, err, 3, HashMismatch)

	// Erase the switch (rename it) and rehash all: a keyed verifier
	// notices the chain is no longer under the key.
	m.entries[2].Action = ActionJobPaused
	rehash(m, 0)
	_, err = l.Verify(ctx, nil)
	brokenAt(t, err, 1, NotKeyed)
}

func TestVerifyExpectedHead(t *testing.T) {
	ctx := context.Background()
	m := &memStore{}
	l, _ := NewKeyed(m, testKey)
	for range 4 {
		if _, err := l.Append(ctx, Record{Action: ActionJobPaused}); err != nil {
			t.Fatal(err)
		}
	}
	want := Head{Seq: 5, Hash: m.entries[4].Hash}
	if _, _, err := l.VerifyHead(ctx, want, nil); err != nil {
		t.Fatal(err)
	}
	// The newest two entries removed: shorter than the head kept elsewhere.
	m.entries = m.entries[:3]
	_, head, err := l.VerifyHead(ctx, want, nil)
	brokenAt(t, err, 5, Truncated)
	if head.Seq != 3 {
		t.Fatalf("head = %v", head)
	}
	// The head's hash differs: what led up to it was replaced.
	_, _, err = l.VerifyHead(ctx, Head{Seq: 2, Hash: GenesisHash}, nil)
	brokenAt(t, err, 2, HeadMismatch)
	// An emptied chain is shorter than any head.
	m.entries = nil
	_, _, err = l.VerifyHead(ctx, want, nil)
	brokenAt(t, err, 5, Truncated)
}

func TestParseHead(t *testing.T) {
	h := Head{Seq: 42, Hash: GenesisHash[:63] + "a"}
	got, err := ParseHead(" " + h.String() + "\n")
	if err != nil || got != h {
		t.Fatalf("ParseHead = %v, %v", got, err)
	}
	for _, bad := range []string{"", "42", "x:" + GenesisHash, "-1:" + GenesisHash, "42:abc", "42:" + GenesisHash[:63] + "z"} {
		if _, err := ParseHead(bad); err == nil {
			t.Errorf("ParseHead(%q) accepted", bad)
		}
	}
	if _, err := NewKeyed(&memStore{}, []byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
	if KeyID(testKey) == KeyID([]byte(strconv.Itoa(1)+string(testKey))) || len(KeyID(testKey)) != 16 {
		t.Fatal("KeyID")
	}
}
