package store

import (
	"context"
	"runtime"
	"time"
)

// While someone reads through the indexes, the indexer merges the search
// index's small levels itself, a few pages at a time, instead of leaving
// them to FTS5's crisis merge (SQLite only).
//
// FTS5 writes a segment per index transaction, and merges none of them as
// it goes (automerge 0, migration 0012): the ingester's idle 'merge' steps
// combine them between reads of the namespace, and a level that reaches 64
// segments (crisismerge) is merged whole by the transaction that wrote the
// 64th. While someone reads, every ingest page is indexed inline and
// writes a segment of its own, so that transaction is soon an ingest
// page's or an index run's that reads wait for: after a bulk read of a
// million messages, 26 segments of 110 pages each waited on level 0, and
// the page that added the 64th merged all of them, 383-897 ms with the
// catalog's lock held and a core taken from the 32 clients reading, or
// the index run did, 275 ms that 22 reads waited for (issue 18,
// BENCHMARKS.md). Merged in steps of mergeStepPages beside the reads, the
// same level took 0.3 s of a core over a second or two, before any page
// would have merged it.
//
// A step runs on the indexer's connection in its own transaction and holds
// indexer.writing, so that an ingest page never waits for it: the page is
// left to the next run (wantInline), which runs after the step. Merging
// stops as soon as a read waits for the indexes or a run is asked for, and
// starts again after the next run or inline page. It uses at most a
// quarter of a core: after each step the indexer pauses mergePause times
// the CPU time the step took.
//
// It only takes on merges of mergeFrom to mergeWhileReading leaf pages
// (or one it has started), read from FTS5's structure record, unless a
// level nears its crisis merge (mergeNearCrisis):
//   - FTS5 picks the level with the most segments, which after a bulk read
//     is soon the level of the bulk's merged segments (12 of 6,000 pages at
//     a million): tens of seconds of a quarter of a core, which the readers
//     would pay for in latency. That one is left to the ingester's idle
//     steps (a step that finishes a merge spends the rest of its pages on
//     the next one FTS5 picks, so it may start it).
//   - The pages' own small segments are left to FTS5's crisis merge, 64 of
//     them at a time, a few milliseconds of a core. Merging them whenever
//     FTS5 would (whenever level 0 has more segments than the large level,
//     every second or two) added a segment to that level each time, four
//     times as fast as the crisis merges do, and that level's own crisis
//     merge (at 64) would merge all of it in one transaction.
const (
	// mergeStepPages is about how many pages a merge step writes: 2-10 ms
	// at a million messages.
	mergeStepPages = 32
	// mergeWhileReading is the largest merge, in leaf pages read
	// (nextMerge), that the indexer works on while someone reads: about a
	// second of a core, and more than level 0 of a bulk read ever holds
	// (63 segments of about 110 pages).
	mergeWhileReading = 8192
	// mergeFrom is the smallest merge the indexer starts: FTS5's crisis
	// merge of smaller ones takes 100 ms of a core or less. Each merge adds
	// a segment to the level above, and merging the pages' small segments
	// whenever FTS5 would (a level of 14 segments and up, after a bulk
	// read) filled the bulk's level 1 four times as fast as the crisis
	// merges do, towards that level's own crisis merge.
	mergeFrom = 1024
	// mergePause is how many times a step's CPU time the indexer waits
	// before the next one.
	mergePause = 3
	// mergeNearCrisis is the number of segments of a level at which the
	// indexer takes on any merge, however large or small, and merges with
	// half a core (mergePauseNearCrisis): FTS5 would soon merge that whole
	// level in one transaction (crisismerge 64). The bulk's level 1 at 1M
	// took 6.8 s of a core so; a level-0 crisis merge adds a segment to it
	// every 64 pages, so 24 of them are left (2.5 minutes at 1,000 msg/s),
	// and every level-0 merge of the indexer's adds one too (every second
	// or two), against about 15 s to merge it at half a core.
	mergeNearCrisis = 40
	// mergePauseNearCrisis is mergePause near a crisis merge.
	mergePauseNearCrisis = 1
)

// mergeRun is the state of the indexer's merging between two runs (the
// indexer's goroutine alone uses it).
type mergeRun struct {
	started time.Time
	steps   int
	cpu     time.Duration
}

// wroteSegment tells the indexer that an ingest page indexed its own
// messages: it starts merging if it is not already. A nil indexer (a
// read-only store) merges nothing.
func (ix *indexer) wroteSegment() {
	if ix == nil {
		return
	}
	select {
	case ix.inlined <- struct{}{}:
	default:
	}
}

// startMerging is when the first merge step after a run is due, or nil
// when nobody reads (the ingester's idle steps then merge).
func (ix *indexer) startMerging() <-chan time.Time {
	if !ix.mayMerge() {
		return nil
	}
	ix.merge = mergeRun{started: time.Now()}
	return time.After(0)
}

// mayMerge reports whether a merge step may run now: on SQLite (the GIN
// index of PostgreSQL merges its own pending entries), while someone reads
// through the indexes, none waits for them, and no run was asked for.
func (ix *indexer) mayMerge() bool {
	return !ix.s.eng.postgres && !ix.paused.Load() && !ix.noMerge.Load() && ix.waiters.Load() == 0 && len(ix.kick) == 0 &&
		time.Since(time.Unix(0, ix.lastRead.Load())) <= readersActiveFor
}

// mergeOn does one merge step if it may, and returns when the next is due:
// nil once the index has nothing left to merge, or merging stopped.
func (ix *indexer) mergeOn() <-chan time.Time {
	if !ix.mayMerge() {
		return nil
	}
	ctx := context.Background()
	levels, err := readFTSStructure(ctx, ix.s.idxdb)
	if err != nil {
		ix.warnOnce("merging the search index: its structure cannot be read; the ingester's idle steps merge it", err)
		return nil
	}
	pages, started := nextMerge(levels)
	near := mostSegments(levels) >= mergeNearCrisis
	if pages > ix.mergeMax && !near {
		if time.Since(ix.leftToIdle) >= time.Minute {
			ix.s.log.Debug("a merge of the search index left to idle time", "pages", pages)
			ix.leftToIdle = time.Now()
		}
		return nil
	}
	if pages < ix.mergeMin && !started && !near {
		return nil // FTS5's crisis merge does it in a few milliseconds
	}
	start := time.Now()
	more, cpu, err := ix.s.timedMergeStep(ctx)
	if wall := time.Since(start); wall >= slowIndexRun {
		// a read that comes meanwhile may wait for it (an inline page
		// is left to the next run)
		ix.s.log.Debug("slow merge step", "took", wall.Round(time.Microsecond), "cpu", cpu.Round(time.Microsecond))
	}
	ix.merge.steps++
	ix.merge.cpu += cpu
	if err != nil {
		ix.warnOnce("merging the search index failed; the next index run tries again", err)
		return nil
	}
	if !more {
		if ix.merge.steps > 1 {
			ix.s.log.Debug("merged the search index", "steps", ix.merge.steps,
				"cpu", ix.merge.cpu.Round(time.Microsecond), "took", time.Since(ix.merge.started).Round(time.Millisecond))
		}
		return nil
	}
	pause := mergePause * cpu
	if near {
		pause = mergePauseNearCrisis * cpu
	}
	return time.After(max(pause, time.Millisecond))
}

// warnOnce logs a failure of the merging at most once a minute: merging
// starts again after every run and inline page, ten times a second.
func (ix *indexer) warnOnce(msg string, err error) {
	if time.Since(ix.mergeWarned) >= time.Minute {
		ix.s.log.Warn(msg, "error", err.Error())
		ix.mergeWarned = time.Now()
	}
}

// timedMergeStep is a merge step of mergeStepPages and the CPU time it
// took: on a machine whose cores the readers keep busy, a step waits for
// one as long as it runs, and a pause by its wall time would merge several
// times slower than a quarter of a core. Where the system does not report
// a thread's CPU time, its wall time.
func (s *Store) timedMergeStep(ctx context.Context) (bool, time.Duration, error) {
	// The step runs on this goroutine (the driver is Go), on this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	cpu0, ok := threadCPU()
	more, err := s.mergeSearchStep(ctx, mergeStepPages)
	cpu1, _ := threadCPU()
	if !ok {
		return more, time.Since(start), err
	}
	return more, cpu1 - cpu0, err
}

// mergeSearchStep does about pages pages of FTS5's merge work in a
// transaction of the indexer's connection, and reports whether there was
// any. It holds indexer.writing: an ingest page that would index inline
// leaves its messages to the next run rather than wait for the index
// file's lock.
func (s *Store) mergeSearchStep(ctx context.Context, pages int) (bool, error) {
	if s.idx != nil {
		s.idx.writing.Lock()
		defer s.idx.writing.Unlock()
	}
	before := s.totalChanges(ctx)
	if _, err := s.idxdb.ExecContext(ctx, `INSERT INTO messages_fts (messages_fts, rank) VALUES ('merge', ?)`, pages); err != nil {
		return false, s.wrap("merge search index", err)
	}
	// FTS5's documented test: fewer than two changes means nothing to merge.
	return s.totalChanges(ctx)-before >= 2, nil
}

// totalChanges is SQLite's count of rows changed on the indexer's
// connection; an FTS5 'merge' that finds nothing to do changes none.
func (s *Store) totalChanges(ctx context.Context) int64 {
	var n int64
	_ = s.idxdb.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&n)
	return n
}
