package store

import (
	"slices"
	"testing"
)

// The structure record read from a live index lists every segment the
// index's own table of terms names, with their leaf pages.
func TestReadFTSStructure(t *testing.T) {
	s := readingStore(t)
	ctx := t.Context()
	ingestOneByOne(ctx, t, s, 1, 6)
	levels, err := readFTSStructure(ctx, s.idxdb)
	if err != nil {
		t.Fatal(err)
	}
	segments, pages := 0, 0
	for _, l := range levels {
		segments += len(l.pages)
		for _, n := range l.pages {
			if n < 1 {
				t.Errorf("a segment of %d leaf pages: %+v", n, levels)
			}
			pages += n
		}
	}
	if want := searchSegments(ctx, t, s); segments != want || segments < 6 {
		t.Fatalf("the structure lists %d segments (%+v), the index names %d, after 6 inline pages", segments, levels, want)
	}
	if got, started := nextMerge(levels); got != pages || started {
		t.Errorf("next merge reads %d pages (started %v), want all %d of level 0's, not started", got, started, pages)
	}
	// A step starts merging level 0: its merge count is set, and the
	// pages left to read are those of its inputs.
	if _, err := s.mergeSearchStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if levels, err = readFTSStructure(ctx, s.idxdb); err != nil {
		t.Fatal(err)
	}
	if levels[0].merging == 0 && len(levels[0].pages) != 0 {
		t.Fatalf("after a one-page merge step, level 0 is %+v", levels[0])
	}
}

func TestNextMerge(t *testing.T) {
	for _, c := range []struct {
		name    string
		levels  []ftsLevel
		want    int
		started bool
	}{
		{"empty", nil, 0, false},
		{"too few to merge", []ftsLevel{{pages: []int{5, 5, 5}}}, 0, false},
		{"the level with the most", []ftsLevel{{pages: []int{1, 1, 1, 1}}, {pages: []int{100, 100, 100, 100, 100}}}, 500, false},
		{"the lowest of equals", []ftsLevel{{pages: []int{1, 1, 1, 1}}, {pages: []int{100, 100, 100, 100}}}, 4, false},
		{"an unfinished merge goes on", []ftsLevel{{pages: []int{1, 1}}, {merging: 3, pages: []int{10, 20, 30, 40}}}, 60, true},
		{"unless a lower level has more", []ftsLevel{{pages: []int{1, 1, 1, 1, 1}}, {merging: 3, pages: []int{10, 20, 30}}}, 5, false},
	} {
		if got, started := nextMerge(c.levels); got != c.want || started != c.started {
			t.Errorf("%s: %d (started %v), want %d (%v)", c.name, got, started, c.want, c.started)
		}
	}
}

func TestParseFTSStructure(t *testing.T) {
	// V2: cookie, marker, 2 levels, 3 segments, write counter 7; level 0
	// merging 0 of 1 segment (id 1, pages 1-3, five V2 fields), level 1
	// merging 2 of 2 (pages 10-10 and 20-29).
	v2 := []byte{0, 0, 0, 9, 0xff, 0, 0, 1, 2, 3, 7,
		0, 1, 1, 1, 3, 0, 0, 0, 0, 0,
		2, 2, 2, 10, 10, 0, 0, 0, 0, 0, 3, 20, 29, 0, 0, 0, 0, 0}
	got, err := parseFTSStructure(v2)
	if err != nil {
		t.Fatal(err)
	}
	want := []ftsLevel{{pages: []int{3}}, {merging: 2, pages: []int{1, 10}}}
	if !slices.EqualFunc(got, want, func(a, b ftsLevel) bool { return a.merging == b.merging && slices.Equal(a.pages, b.pages) }) {
		t.Fatalf("V2: %+v, want %+v", got, want)
	}
	// A write counter of nine bytes (2^64-1) is skipped.
	big := []byte{0, 0, 0, 9, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 1, 5, 1, 2}
	if got, err = parseFTSStructure(big); err != nil || len(got) != 1 || !slices.Equal(got[0].pages, []int{2}) {
		t.Fatalf("a large write counter: %+v, %v; want one segment of 2 pages", got, err)
	}
	// The first format, and a two-byte varint (200 = 0x81 0x48).
	v1 := []byte{0, 0, 0, 9, 1, 1, 0, 0, 1, 5, 1, 0x81, 0x48}
	if got, err = parseFTSStructure(v1); err != nil || len(got) != 1 || !slices.Equal(got[0].pages, []int{200}) {
		t.Fatalf("V1: %+v, %v; want one segment of 200 pages", got, err)
	}
	for _, b := range [][]byte{nil, {0, 0, 0}, v2[:20], v1[:12], {0, 0, 0, 9, 1, 1, 0, 0, 2}} {
		if got, err := parseFTSStructure(b); err == nil {
			t.Errorf("%x: %+v, want an error", b, got)
		}
	}
}

func FuzzParseFTSStructure(f *testing.F) {
	f.Add([]byte{0, 0, 0, 9, 1, 1, 0, 0, 1, 5, 1, 0x81, 0x48})
	f.Add([]byte{0, 0, 0, 9, 0xff, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 3, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		levels, err := parseFTSStructure(b)
		if err != nil {
			return
		}
		for _, l := range levels {
			if l.merging < 0 || l.merging > len(l.pages) {
				t.Fatalf("merging %d of %d segments", l.merging, len(l.pages))
			}
		}
		_, _ = nextMerge(levels)
	})
}
