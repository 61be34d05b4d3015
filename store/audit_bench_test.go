package store

import (
	"context"
	"encoding/json"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
)

// BenchmarkAuditAppend is one audit entry per operation, each its own
// IMMEDIATE transaction (read the last hash, insert, commit), as the replay
// engine will append them.
func BenchmarkAuditAppend(b *testing.B) {
	_, l := openAuditLog(b)
	ctx := context.Background()
	params := map[string]any{"job_id": "0195f3a2-job", "destination": "orders", "rate_per_second": 100}
	i := 0
	cpu := processCPU()
	for b.Loop() {
		if _, err := l.Append(ctx, audit.Record{Action: audit.ActionReplay, Params: params, MessageIDs: []string{strconv.Itoa(i)}}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	// The process's CPU time (getrusage): steadier than the wall clock on
	// a shared machine.
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAuditAppendParallel appends from GOMAXPROCS goroutines at once:
// they queue on the one writer connection.
func BenchmarkAuditAppendParallel(b *testing.B) {
	_, l := openAuditLog(b)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(ctx, audit.Record{Action: audit.ActionJobPaused, Params: map[string]int{"n": 1}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkAuditVerify100k verifies a chain of 100,000 entries (each with
// a small params object and one message id), streaming.
func BenchmarkAuditVerify100k(b *testing.B) {
	const n = 100_000
	s, l := openAuditLog(b)
	seedAuditChain(b, s, n)
	for b.Loop() {
		got, err := l.Verify(context.Background(), nil)
		if err != nil || got != n {
			b.Fatalf("Verify = %d, %v", got, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
}

// seedAuditChain writes a valid chain of n entries in one transaction
// (Append would take one commit each).
func seedAuditChain(b *testing.B, s *Store, n int) {
	b.Helper()
	tx, err := s.writer.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	st, err := tx.Prepare(`INSERT INTO audit_log (` + auditColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	prev := audit.GenesisHash
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		params, _ := audit.CanonicalParams(map[string]any{"job_id": "0195f3a2-job", "destination": "orders", "attempt": i % 3})
		e := audit.Entry{Seq: int64(i), At: at.Add(time.Duration(i) * time.Millisecond), Actor: "local", Action: audit.ActionReplay,
			Params: params, MessageIDs: []string{strconv.Itoa(i)}, Outcome: audit.OutcomeSucceeded, PrevHash: prev}
		e.Hash = e.ComputeHash()
		ids, _ := json.Marshal(e.MessageIDs)
		if _, err := st.Exec(e.Seq, e.At.UnixMilli(), e.Actor, e.Action, string(e.Params), string(ids), e.Outcome, e.PrevHash, e.Hash); err != nil {
			b.Fatal(err)
		}
		prev = e.Hash
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
