package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
)

func openAuditLog(t testing.TB) (*Store, *audit.Log) { return openAuditLogOn(t, "sqlite") }

// openAuditLogOn is openAuditLog on engine (Engines).
func openAuditLogOn(t testing.TB, engine string) (*Store, *audit.Log) {
	t.Helper()
	s := OpenFresh(t, engine)
	return s, audit.New(s)
}

func appendN(t testing.TB, l *audit.Log, n int) {
	t.Helper()
	for i := range n {
		_, err := l.Append(context.Background(), audit.Record{
			Action:     audit.ActionReplay,
			Params:     map[string]any{"job_id": "j" + strconv.Itoa(i%7), "i": i},
			MessageIDs: []string{strconv.Itoa(i)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// dropTriggers does what an attacker with the file can: remove the
// append-only triggers.
func dropTriggers(t *testing.T, s *Store) {
	t.Helper()
	for _, tr := range []string{"audit_log_no_update", "audit_log_no_delete"} {
		drop := "DROP TRIGGER " + tr
		if s.eng.postgres {
			drop += " ON audit_log"
		}
		if _, err := s.writer.Exec(drop); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditChainVerifies(t *testing.T) { ForEachEngine(t, testAuditChainVerifies) }

func testAuditChainVerifies(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	n, err := l.Verify(ctx, nil)
	if n != 0 || err != nil {
		t.Fatalf("empty log: Verify = %d, %v", n, err)
	}
	first, err := l.Append(audit.WithActor(ctx, "alice@example.com"), audit.Record{Action: audit.ActionReplayJobCreated,
		Params: map[string]any{"z": 1, "a": []int{2, 3}, "big": jsonNumber("9007199254740993")}, MessageIDs: []string{"1", "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != 1 || first.PrevHash != audit.GenesisHash || first.Actor != "alice@example.com" || first.Outcome != audit.OutcomeSucceeded {
		t.Fatalf("first entry = %+v", first)
	}
	if got := string(first.Params); got != `{"a":[2,3],"big":9007199254740993,"z":1}` {
		t.Fatalf("params = %s, want canonical JSON with every digit", got)
	}
	appendN(t, l, 999)
	var progress []int
	n, err = l.Verify(ctx, func(n int) { progress = append(progress, n) })
	if n != 1000 || err != nil {
		t.Fatalf("Verify = %d, %v; want 1000, nil", n, err)
	}
	// The stored entry reads back exactly as appended.
	var got audit.Entry
	s.ScanAudit(ctx, audit.Filter{}, func(e audit.Entry) error {
		if e.Seq == 1 {
			got = e
		}
		return nil
	})
	if got.Hash != first.Hash || !got.At.Equal(first.At) || string(got.Params) != string(first.Params) || strings.Join(got.MessageIDs, ",") != "1,2" {
		t.Fatalf("read back %+v, appended %+v", got, first)
	}
}

type jsonNumber string

func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

func TestAuditTriggersRefuseChanges(t *testing.T) { ForEachEngine(t, testAuditTriggersRefuseChanges) }

func testAuditTriggersRefuseChanges(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	appendN(t, l, 3)
	for _, q := range []string{
		`UPDATE audit_log SET params = '{}' WHERE seq = 2`,
		`DELETE FROM audit_log WHERE seq = 2`,
		`DELETE FROM audit_log`,
	} {
		_, err := s.writer.Exec(q)
		if err == nil || !strings.Contains(err.Error(), "audit_log is append-only") {
			t.Errorf("%s: err = %v, want append-only refusal", q, err)
		}
	}
	if n, err := l.Verify(t.Context(), nil); n != 3 || err != nil {
		t.Fatalf("Verify = %d, %v", n, err)
	}
}

func wantBroken(t *testing.T, l *audit.Log, seq int64, reason audit.Reason, msg string) {
	t.Helper()
	n, err := l.Verify(t.Context(), nil)
	var be *audit.BrokenChainError
	if !errors.As(err, &be) {
		t.Fatalf("Verify = %d, %v; want a broken chain at %d", n, err, seq)
	}
	good := seq - 1
	if reason == audit.Gap {
		good = seq - 2 // one entry missing
	}
	if be.Seq != seq || be.Reason != reason || int64(n) != good {
		t.Fatalf("Verify = %d, %+v; want broken at %d (reason %d) after %d good entries", n, be, seq, reason, good)
	}
	if msg != "" && err.Error() != msg {
		t.Fatalf("error = %q, want %q", err, msg)
	}
}

func TestAuditTamperingDetected(t *testing.T) { ForEachEngine(t, testAuditTamperingDetected) }

func testAuditTamperingDetected(t *testing.T, engine string) {
	t.Run("params changed", func(t *testing.T) {
		s, l := openAuditLogOn(t, engine)
		appendN(t, l, 100)
		dropTriggers(t, s)
		if _, err := s.writer.Exec(`UPDATE audit_log SET params = '{"i":41,"job_id":"evil"}' WHERE seq = 42`); err != nil {
			t.Fatal(err)
		}
		wantBroken(t, l, 42, audit.HashMismatch, "audit chain broken at entry 42: hash does not match its contents")
	})
	for _, col := range []string{"actor = 'mallory'", "action = 'discard'", "outcome = 'failed'", "message_ids = '[\"99\"]'", "message_ids = 'garbage'", "at = at + 1", "hash = lower(hash)||''"} {
		t.Run(col, func(t *testing.T) {
			s, l := openAuditLogOn(t, engine)
			appendN(t, l, 20)
			dropTriggers(t, s)
			if _, err := s.writer.Exec(`UPDATE audit_log SET ` + col + ` WHERE seq = 7`); err != nil {
				t.Fatal(err)
			}
			if col == "hash = lower(hash)||''" {
				// Unchanged: a no-op rewrite must still verify.
				if n, err := l.Verify(t.Context(), nil); n != 20 || err != nil {
					t.Fatalf("Verify = %d, %v", n, err)
				}
				return
			}
			wantBroken(t, l, 7, audit.HashMismatch, "")
		})
	}
	t.Run("entry rewritten with a fresh hash", func(t *testing.T) {
		// The attacker recomputes the changed entry's hash: the next entry's
		// link no longer holds.
		s, l := openAuditLogOn(t, engine)
		appendN(t, l, 20)
		dropTriggers(t, s)
		var e audit.Entry
		s.ScanAudit(t.Context(), audit.Filter{}, func(x audit.Entry) error {
			if x.Seq == 7 {
				e = x
			}
			return nil
		})
		e.Actor = "mallory"
		if _, err := s.writer.Exec(`UPDATE audit_log SET actor = ?, hash = ? WHERE seq = 7`, e.Actor, e.ComputeHash()); err != nil {
			t.Fatal(err)
		}
		wantBroken(t, l, 8, audit.PrevMismatch, "audit chain broken at entry 8: prev_hash does not match the hash of the entry before it")
	})
	t.Run("entry deleted in the middle", func(t *testing.T) {
		s, l := openAuditLogOn(t, engine)
		appendN(t, l, 50)
		dropTriggers(t, s)
		if _, err := s.writer.Exec(`DELETE FROM audit_log WHERE seq = 30`); err != nil {
			t.Fatal(err)
		}
		wantBroken(t, l, 31, audit.Gap, "audit chain broken at entry 31: entries from 30 are missing before it")
	})
	t.Run("first entry deleted", func(t *testing.T) {
		s, l := openAuditLogOn(t, engine)
		appendN(t, l, 5)
		dropTriggers(t, s)
		if _, err := s.writer.Exec(`DELETE FROM audit_log WHERE seq = 1`); err != nil {
			t.Fatal(err)
		}
		n, err := l.Verify(t.Context(), nil)
		var be *audit.BrokenChainError
		if !errors.As(err, &be) || be.Seq != 2 || be.Reason != audit.Gap || n != 0 {
			t.Fatalf("Verify = %d, %v", n, err)
		}
	})
}

func TestAuditConcurrentAppends(t *testing.T) { ForEachEngine(t, testAuditConcurrentAppends) }

func testAuditConcurrentAppends(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := l.Append(t.Context(), audit.Record{Action: audit.ActionJobPaused,
					Params: map[string]int{"worker": w, "i": i}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A second Store on the same file appends too: the file's lock
	// serialises the two processes' writers.
	other, err := Open(t.Context(), s.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l2 := audit.New(other)
	var wg2 sync.WaitGroup
	for _, lg := range []*audit.Log{l, l2} {
		wg2.Go(func() {
			for range 20 {
				if _, err := lg.Append(t.Context(), audit.Record{Action: audit.ActionJobResumed}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg2.Wait()
	n, err := l.Verify(t.Context(), nil)
	if want := workers*each + 40; n != want || err != nil {
		t.Fatalf("Verify = %d, %v; want %d, nil", n, err, want)
	}
	var distinct int
	if err := s.reader.QueryRow(`SELECT count(DISTINCT seq) FROM audit_log`).Scan(&distinct); err != nil || distinct != n {
		t.Fatalf("distinct seqs = %d, %v; want %d", distinct, err, n)
	}
}

func TestAuditListFiltersAndPages(t *testing.T) { ForEachEngine(t, testAuditListFiltersAndPages) }

func testAuditListFiltersAndPages(t *testing.T, engine string) {
	s, l := openAuditLogOn(t, engine)
	ctx := t.Context()
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := base
	l.Now = func() time.Time { return now }
	for i := range 30 {
		now = base.Add(time.Duration(i) * time.Minute)
		actor := "alice"
		if i%3 == 0 {
			actor = "bob"
		}
		action := audit.ActionReplay
		if i%2 == 0 {
			action = audit.ActionDiscard
		}
		if _, err := l.Append(ctx, audit.Record{Actor: actor, Action: action}); err != nil {
			t.Fatal(err)
		}
	}
	since, until := base.Add(5*time.Minute), base.Add(20*time.Minute)
	tests := []struct {
		name string
		f    audit.Filter
		want []int64 // seqs, newest first
	}{
		{"bob", audit.Filter{Actor: "bob"}, []int64{28, 25, 22, 19, 16, 13, 10, 7, 4, 1}},
		{"bob discards", audit.Filter{Actor: "bob", Action: audit.ActionDiscard}, []int64{25, 19, 13, 7, 1}},
		{"window", audit.Filter{Since: &since, Until: &until}, []int64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6}},
		{"nobody", audit.Filter{Actor: "carol"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			cursor := ""
			for pages := 0; ; pages++ {
				es, next, err := s.ListAudit(ctx, tt.f, 4, cursor)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) > 4 || pages > 10 {
					t.Fatalf("page of %d entries, %d pages", len(es), pages)
				}
				for _, e := range es {
					got = append(got, e.Seq)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("seqs = %v, want %v", got, tt.want)
			}
		})
	}
	var ia interface{ InvalidParameter() string }
	if _, _, err := s.ListAudit(ctx, audit.Filter{}, 10, "bogus"); !errors.As(err, &ia) || ia.InvalidParameter() != "cursor" {
		t.Fatalf("bad cursor: %v", err)
	}
	// A message list's cursor is not an audit cursor.
	if _, _, err := s.ListAudit(ctx, audit.Filter{}, 10, encodeCursor(pageKey{at: 1, id: 2})); !errors.As(err, &ia) {
		t.Fatalf("message cursor accepted: %v", err)
	}
}
