package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// BenchmarkUpdateItemsBatch measures the store's side of one batch of a
// replay (250 messages, as the engine writes them: locked with the copies'
// ids, then sent, then completed; three UpdateItems) in a job of 20,000
// messages. Besides the time it reports what does not depend on the
// machine's load: the rows SQLite writes and the transactions it commits
// per batch (counted by the writer connection's hooks), and the CPU time.
//
//	go test -run '^$' -bench UpdateItemsBatch -benchmem ./store/
func BenchmarkUpdateItemsBatch(b *testing.B) {
	const n, batch = 20_000, 250
	ctx := b.Context()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, now); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte(`{"sku":"A-1","qty":3},`), 40)
	reason := "SqlTimeout"
	for seq := int64(0); seq < n; {
		msgs := make([]dlq.Message, 1000)
		from := seq + 1
		for i := range msgs {
			seq++
			msgs[i] = dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: fmt.Sprintf("msg-%d", seq),
				DeadLetterReason: &reason, Body: body}
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter,
			From: from, Through: seq, Messages: msgs, SeenAt: now}); err != nil {
			b.Fatal(err)
		}
	}
	var rows, commits int
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := conn.Raw(func(dc any) error {
		if os.Getenv("NOHOOK") != "" {
			return nil
		}
		h := dc.(sqlite.HookRegisterer)
		h.RegisterPreUpdateHook(func(sqlite.SQLitePreUpdateData) { rows++ })
		h.RegisterCommitHook(func() int32 { commits++; return 0 })
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	conn.Close()

	var job replay.Job
	var items []replay.Item
	newJob := func() {
		if job.ID != 0 {
			if _, err := s.SetStatus(ctx, job.ID, replay.StatusCompleted, ""); err != nil {
				b.Fatal(err)
			}
		}
		job, err = s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "bench"},
			replay.Selection{Filter: &dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}}, 3)
		if err != nil {
			b.Fatal(err)
		}
		if items, err = s.UnfinishedItems(ctx, job.ID); err != nil || len(items) != n {
			b.Fatalf("%d items, %v", len(items), err)
		}
	}
	newJob()
	var took [3]time.Duration // locked, sent, completed
	update := func(ctx context.Context, ups []replay.Update) {
		start := time.Now()
		if _, err := s.UpdateItems(ctx, job.ID, ups); err != nil {
			b.Fatal(err)
		}
		took[min(bucket(ups[0].State), 2)] += time.Since(start)
	}
	batches, rows0, commits0 := 0, rows, commits
	cpu0 := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		if len(items) < batch {
			b.StopTimer()
			c0, r0 := commits, rows
			newJob()
			commits0, rows0 = commits0+commits-c0, rows0+rows-r0
			b.StartTimer()
		}
		chunk := items[:batch]
		items = items[batch:]
		ups := make([]replay.Update, batch)
		for i, it := range chunk {
			ups[i] = replay.Update{MessageID: it.MessageID, State: replay.ItemLocked,
				CopyMessageID: replay.DerivedMessageID(it.OriginalMessageID, it.SequenceNumber, job.ID)}
		}
		update(ctx, ups)
		for i := range ups {
			ups[i] = replay.Update{MessageID: ups[i].MessageID, State: replay.ItemSent}
		}
		update(ctx, ups)
		for i := range ups {
			ups[i].State = replay.ItemCompleted
		}
		update(ctx, ups)
		batches++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(batches), "cpu-µs/batch")
	b.ReportMetric(float64(rows-rows0)/float64(batches), "rows-written/batch")
	for i, name := range []string{"locked", "sent", "completed"} {
		b.ReportMetric(float64(took[i].Microseconds())/float64(batches), name+"-µs/batch")
	}
	b.ReportMetric(float64(commits-commits0)/float64(batches), "commits/batch")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(batches*batch), "µs/msg")
}

// cpuTime is the CPU time the process has used (user and system, every
// thread): on a shared machine it varies less with the load than the
// elapsed time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
