package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// searchSegments is the number of segments of the search index.
func searchSegments(ctx context.Context, t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.idxdb.QueryRowContext(ctx, `SELECT count(DISTINCT segid) FROM messages_fts_idx`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readingStore is a new SQLite store with queue q whose indexer does not
// merge (noMerge) until the test says, and which someone has just searched:
// its pages are indexed inline, a segment each.
func readingStore(t *testing.T) *Store {
	t.Helper()
	s := OpenFresh(t, "sqlite")
	ctx := t.Context()
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "q", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	s.idx.noMerge.Store(true)
	if _, err := s.CountMessages(ctx, dlq.Filter{Query: "another"}, 0); err != nil {
		t.Fatal(err)
	}
	return s
}

// ingestOneByOne applies n pages of one message each to queue q, from
// sequence number from on.
func ingestOneByOne(ctx context.Context, t *testing.T, s *Store, from, n int) {
	t.Helper()
	ingestPages(ctx, t, s, from, n, 1)
}

// ingestPages applies n pages of per messages each to queue q, from
// sequence number from on; each message has words of its own besides
// "word another", so that a page's segment grows with per.
func ingestPages(ctx context.Context, t *testing.T, s *Store, from, n, per int) {
	t.Helper()
	now := time.Now()
	seq := int64(from)
	for range n {
		msgs := make([]dlq.Message, per)
		for j := range msgs {
			r := "Reason"
			msgs[j] = dlq.Message{SequenceNumber: seq + int64(j), State: dlq.StateActive, MessageID: "m", DeadLetterReason: &r,
				Body: fmt.Appendf(nil, "word another w%d x%d y%d", seq+int64(j), 7*(seq+int64(j)), 13*(seq+int64(j)))}
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "q", SubQueue: dlq.SubQueueDeadLetter, From: seq, Through: seq + int64(per) - 1,
			Messages: msgs, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
		seq += int64(per)
	}
}

// While someone searches, every page is indexed inline and writes a segment
// of its own: the indexer merges them in steps, without the ingester's
// idle merge, so that no page later merges a whole level (issue 18's
// crisis merge). Without readers it leaves them to the ingester.
func TestIndexerMergesWhileSomeoneReads(t *testing.T) {
	s := OpenFresh(t, "sqlite")
	ctx := t.Context()
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "q", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Nobody reads: pages go to the indexer's runs; one run, one segment
	// at least, and no merge.
	ingestOneByOne(ctx, t, s, 1, 10)
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	s.idx.lastRead.Store(0) // FlushIndex counts as a read
	// Each inline page writes a segment: with the merging off, 40 stay.
	s.idx.noMerge.Store(true)
	search := func() {
		t.Helper()
		if _, err := s.CountMessages(ctx, dlq.Filter{Query: "another"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	search()
	before := searchSegments(ctx, t, s)
	ingestOneByOne(ctx, t, s, 11, 40)
	if got := searchSegments(ctx, t, s); got < before+40 {
		t.Fatalf("%d segments after 40 inline pages, from %d: the pages were not indexed one by one", got, before)
	}
	// With it on, the next inline page starts merging them (however
	// small: the loop reads the limit only after noMerge is off).
	s.idx.mergeMin = 1
	s.idx.noMerge.Store(false)
	search()
	ingestOneByOne(ctx, t, s, 51, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := searchSegments(ctx, t, s)
		if n <= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d segments 10 s after the inline pages: the indexer did not merge them", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := s.CountMessages(ctx, dlq.Filter{Query: "another"}, 0); err != nil || n != 51 {
		t.Fatalf("search after merging finds %d, %v; want 51", n, err)
	}
}

// A merge larger than the indexer takes on while someone reads is left to
// the ingester's idle steps.
func TestIndexerLeavesALargeMergeToIdleTime(t *testing.T) {
	s := readingStore(t)
	ctx := t.Context()
	ingestOneByOne(ctx, t, s, 1, 20)
	levels, err := readFTSStructure(ctx, s.idxdb)
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := nextMerge(levels)
	if pages < 20 {
		t.Fatalf("the next merge reads %d pages after 20 inline pages", pages)
	}
	// The loop reads the limits only after they are set (noMerge until
	// then).
	s.idx.mergeMin, s.idx.mergeMax = 1, pages-1
	s.idx.noMerge.Store(false)
	before := searchSegments(ctx, t, s)
	ingestOneByOne(ctx, t, s, 21, 1) // starts merging
	time.Sleep(300 * time.Millisecond)
	if got := searchSegments(ctx, t, s); got < before+1 {
		t.Fatalf("%d segments, then %d after a page: a merge of %d pages was taken on with a limit of %d", before, got, pages, pages-1)
	}
}

// A merge smaller than mergeFrom is left to FTS5's crisis merge, unless it
// has started: then the indexer finishes it.
func TestIndexerLeavesSmallMergesUnlessStarted(t *testing.T) {
	s := readingStore(t)
	ctx := t.Context()
	ingestPages(ctx, t, s, 1, 20, 300)
	levels, err := readFTSStructure(ctx, s.idxdb)
	if err != nil {
		t.Fatal(err)
	}
	if pages, _ := nextMerge(levels); pages < 40 || pages >= mergeFrom {
		t.Fatalf("the next merge reads %d pages: want a small one of many pages", pages)
	}
	before := searchSegments(ctx, t, s)
	s.idx.noMerge.Store(false) // mergeMin is mergeFrom
	ingestPages(ctx, t, s, 6001, 1, 300)
	time.Sleep(300 * time.Millisecond)
	if got := searchSegments(ctx, t, s); got < before+1 {
		t.Fatalf("%d segments, then %d after a page: a merge smaller than mergeFrom was taken on", before, got)
	}
	// A one-page step starts merging level 0 and leaves most of it; the
	// next page has the indexer finish it.
	s.idx.noMerge.Store(true)
	if more, err := s.mergeSearchStep(ctx, 1); err != nil || !more {
		t.Fatalf("one-page merge step: %v, %v", more, err)
	}
	if levels, err = readFTSStructure(ctx, s.idxdb); err != nil {
		t.Fatal(err)
	}
	if _, started := nextMerge(levels); !started {
		t.Fatalf("a one-page step finished the merge: %+v", levels)
	}
	s.idx.noMerge.Store(false)
	ingestPages(ctx, t, s, 6301, 1, 300)
	deadline := time.Now().Add(10 * time.Second)
	for {
		levels, err := readFTSStructure(ctx, s.idxdb)
		if err != nil {
			t.Fatal(err)
		}
		if _, started := nextMerge(levels); !started && searchSegments(ctx, t, s) <= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after a merge was started it is not finished: %+v", levels)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A level near its crisis merge is merged whatever the size of the merge:
// FTS5 would soon merge all of it in one transaction.
func TestIndexerMergesALevelNearItsCrisis(t *testing.T) {
	s := readingStore(t)
	ctx := t.Context()
	ingestOneByOne(ctx, t, s, 1, mergeNearCrisis-2)
	levels, err := readFTSStructure(ctx, s.idxdb)
	if err != nil {
		t.Fatal(err)
	}
	if n := mostSegments(levels); n < mergeNearCrisis-2 || n >= mergeNearCrisis {
		t.Fatalf("%d segments on a level after %d inline pages", n, mergeNearCrisis-2)
	}
	// Too large to take on by the ceiling, and too small by the floor.
	s.idx.mergeMax = 1
	s.idx.noMerge.Store(false)
	ingestOneByOne(ctx, t, s, mergeNearCrisis-1, 1)
	time.Sleep(300 * time.Millisecond)
	before := searchSegments(ctx, t, s)
	if before < mergeNearCrisis-1 {
		t.Fatalf("%d segments below the crisis threshold: merged", before)
	}
	ingestOneByOne(ctx, t, s, mergeNearCrisis, 1) // the level reaches mergeNearCrisis
	deadline := time.Now().Add(10 * time.Second)
	for searchSegments(ctx, t, s) > 8 {
		if time.Now().After(deadline) {
			t.Fatalf("%d segments 10 s after a level reached %d: not merged", searchSegments(ctx, t, s), mergeNearCrisis)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Nobody reads: the indexer merges nothing itself.
func TestIndexerLeavesMergingWhenNobodyReads(t *testing.T) {
	s := OpenFresh(t, "sqlite")
	ctx := t.Context()
	// However small the merge: nobody reading is the only reason left.
	s.idx.noMerge.Store(true)
	s.idx.mergeMin = 1
	s.idx.noMerge.Store(false)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "q", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Pages indexed one run each, each a segment, asked for without a
	// read (FlushIndex is one).
	for i := range 12 {
		ingestOneByOne(ctx, t, s, 1+i, 1)
		s.idx.poke()
		for {
			through, newest, err := s.indexProgress(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if through == newest {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	n := searchSegments(ctx, t, s)
	if n < 12 {
		t.Fatalf("%d segments after 12 runs of a page each, with nobody reading: something merged them", n)
	}
	// A run with nothing to index starts no merge either.
	s.idx.poke()
	time.Sleep(300 * time.Millisecond)
	if got := searchSegments(ctx, t, s); got != n {
		t.Fatalf("%d segments, then %d, with nobody reading", n, got)
	}
}
