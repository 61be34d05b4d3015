package views

import (
	"slices"
	"strings"
)

// Line diff kinds.
const (
	DiffSame    = "same"
	DiffAdded   = "added"
	DiffRemoved = "removed"
)

// DiffLine is one line of a line-based diff: a line of the original
// (removed), of the edit (added), or of both (same).
type DiffLine struct {
	Kind string
	Text string
	// Old and New are the line's numbers in the original and the edit,
	// from 1; 0 where the line is not in that side.
	Old, New int
}

// maxDiffCells bounds the comparison table of LineDiff (lines of the
// original times lines of the edit, after the common start and end are
// cut): beyond it the changed middle is shown as removed, then added.
const maxDiffCells = 4_000_000

// LineDiff compares two texts line by line: the longest common subsequence
// of lines, so that an edit of one line of a long body shows as that line
// removed and its new text added, everything else as context.
func LineDiff(old, new string) []DiffLine {
	a, b := splitLines(old), splitLines(new)
	var out []DiffLine
	// The common start and end cost nothing to find and are most of an
	// edit.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	for i := range pre {
		out = append(out, DiffLine{Kind: DiffSame, Text: a[i], Old: i + 1, New: i + 1})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	out = append(out, middleDiff(ma, mb, pre)...)
	for i := range suf {
		oi, ni := len(a)-suf+i, len(b)-suf+i
		out = append(out, DiffLine{Kind: DiffSame, Text: a[oi], Old: oi + 1, New: ni + 1})
	}
	return out
}

// middleDiff diffs the changed middle, whose lines start after off lines
// on both sides.
func middleDiff(a, b []string, off int) []DiffLine {
	var out []DiffLine
	if len(a)*len(b) > maxDiffCells || len(a) == 0 || len(b) == 0 {
		for i, l := range a {
			out = append(out, DiffLine{Kind: DiffRemoved, Text: l, Old: off + i + 1})
		}
		for i, l := range b {
			out = append(out, DiffLine{Kind: DiffAdded, Text: l, New: off + i + 1})
		}
		return out
	}
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, DiffLine{Kind: DiffSame, Text: a[i], Old: off + i + 1, New: off + j + 1})
			i, j = i+1, j+1
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			out = append(out, DiffLine{Kind: DiffRemoved, Text: a[i], Old: off + i + 1})
			i++
		default:
			out = append(out, DiffLine{Kind: DiffAdded, Text: b[j], New: off + j + 1})
			j++
		}
	}
	for ; i < len(a); i++ {
		out = append(out, DiffLine{Kind: DiffRemoved, Text: a[i], Old: off + i + 1})
	}
	for ; j < len(b); j++ {
		out = append(out, DiffLine{Kind: DiffAdded, Text: b[j], New: off + j + 1})
	}
	return out
}

// splitLines splits a text into lines without their line ends ("" has
// none; a final line end adds no empty line).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// DiffChanged reports whether a diff has any added or removed line.
func DiffChanged(d []DiffLine) bool {
	return slices.ContainsFunc(d, func(l DiffLine) bool { return l.Kind != DiffSame })
}

// Property change kinds.
const (
	PropertyAdded   = "added"
	PropertyRemoved = "removed"
	PropertyChanged = "changed"
)

// PropertyChange is one application property the edit adds, removes or
// changes; Old and New are the values as JSON text ("" on the side where
// it is absent). Note says why, when the edit is not the cause (the
// broker's dead-letter properties, which no copy carries).
type PropertyChange struct {
	Key, Kind, Old, New, Note string
}

// PropertyDiff compares two sets of application properties, each value
// as its JSON text, by key: the added, removed and changed ones, sorted by
// key.
func PropertyDiff(old, new map[string]string) []PropertyChange {
	var out []PropertyChange
	for k, o := range old {
		n, ok := new[k]
		switch {
		case !ok:
			out = append(out, PropertyChange{Key: k, Kind: PropertyRemoved, Old: o})
		case n != o:
			out = append(out, PropertyChange{Key: k, Kind: PropertyChanged, Old: o, New: n})
		}
	}
	for k, n := range new {
		if _, ok := old[k]; !ok {
			out = append(out, PropertyChange{Key: k, Kind: PropertyAdded, New: n})
		}
	}
	slices.SortFunc(out, func(a, b PropertyChange) int { return strings.Compare(a.Key, b.Key) })
	return out
}
