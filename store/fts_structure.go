package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
)

// ftsLevel is one level of the search index's segments, as FTS5's
// structure record lists them: the leaf pages of each segment, oldest
// first, and how many of the first ones an unfinished merge is combining.
type ftsLevel struct {
	merging int
	pages   []int
}

// ftsUsermerge is FTS5's usermerge, which migrations leave at its default:
// a 'merge' step starts a merge only on a level of at least this many
// segments.
const ftsUsermerge = 4

// readFTSStructure reads the search index's structure record (the row of
// id 10 of messages_fts_data) on db, the indexer's connection.
func readFTSStructure(ctx context.Context, db *sql.DB) ([]ftsLevel, error) {
	var b []byte
	if err := db.QueryRowContext(ctx, `SELECT block FROM messages_fts_data WHERE id = 10`).Scan(&b); err != nil {
		return nil, fmt.Errorf("read the search index's structure: %w", err)
	}
	return parseFTSStructure(b)
}

// ftsStructureV2 marks the structure record of FTS5's second format,
// whose segments carry five more fields.
const ftsStructureV2 = 0xff000001

// parseFTSStructure decodes a structure record: a 4-byte cookie, the V2
// marker if present, then varints: the number of levels, of segments, the
// write counter, and for each level its merge count, its segment count and
// each segment's id, first and last leaf page (and in V2 its origin pair
// and tombstone and entry counts).
func parseFTSStructure(b []byte) ([]ftsLevel, error) {
	if len(b) < 4 {
		return nil, errors.New("the search index's structure record is too short")
	}
	p := 4
	extra := 0
	if len(b) >= 8 && binary.BigEndian.Uint32(b[4:]) == ftsStructureV2 {
		p, extra = 8, 5
	}
	bad := false
	read := func() uint64 {
		v, n := ftsVarint(b[p:])
		if n == 0 {
			bad = true
		}
		p += n
		return v
	}
	// next reads a count or a page number; the counters (the write
	// counter, V2's fields) are only skipped, whatever their size.
	next := func() int {
		v := read()
		if v > 1<<31 {
			bad = true
			return 0
		}
		return int(v)
	}
	nLevels, nSegments := next(), next()
	read() // write counter
	if bad || nLevels > 64 || nSegments > 1<<16 {
		return nil, errors.New("the search index's structure record is malformed")
	}
	levels := make([]ftsLevel, nLevels)
	total := 0
	for i := range levels {
		merging, n := next(), next()
		if bad || n > nSegments-total || merging > n {
			return nil, errors.New("the search index's structure record is malformed")
		}
		total += n
		levels[i] = ftsLevel{merging: merging, pages: make([]int, n)}
		for j := range n {
			next() // segment id
			first, last := next(), next()
			for range extra {
				read()
			}
			if bad || last < first-1 {
				return nil, errors.New("the search index's structure record is malformed")
			}
			levels[i].pages[j] = last - first + 1
		}
	}
	return levels, nil
}

// ftsVarint decodes one of SQLite's varints (big-endian groups of 7 bits,
// the ninth byte whole), and its length: 0 if b ends first.
func ftsVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b); i++ {
		if i == 8 {
			return v<<8 | uint64(b[i]), 9
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// nextMerge is the leaf pages a 'merge' step would read to finish the
// merge it works on next, as FTS5 chooses it, and whether that merge has
// started: the level with the most segments (the lowest of equals), all
// of them, if it has ftsUsermerge or more, unless a level above it has an
// unfinished merge of more segments than that, which goes on. 0: nothing
// to merge.
func nextMerge(levels []ftsLevel) (pages int, started bool) {
	best, most := -1, 0
	for i, l := range levels {
		if l.merging > 0 {
			if l.merging > most {
				best, most = i, ftsUsermerge
			}
			break
		}
		if len(l.pages) > most {
			best, most = i, len(l.pages)
		}
	}
	if best < 0 || most < ftsUsermerge {
		return 0, false
	}
	l := levels[best]
	inputs := len(l.pages)
	if l.merging > 0 {
		inputs = l.merging
	}
	for _, n := range l.pages[:inputs] {
		pages += n
	}
	return pages, l.merging > 0
}

// mostSegments is the largest number of segments any level holds: FTS5
// merges a whole level in one go when it reaches crisismerge.
func mostSegments(levels []ftsLevel) int {
	most := 0
	for _, l := range levels {
		most = max(most, len(l.pages))
	}
	return most
}
