package views

import "unicode/utf8"

// Mark is a search match in a text: bytes [Start, End) (package search
// finds them with FTS5's own rules).
type Mark struct{ Start, End int }

// segment is a run of a text, marked (a match) or not.
type segment struct {
	Text string
	Mark bool
}

// segments cuts text into its marked and unmarked runs, at most maxRunes
// runes of it (0: all), the cut marked with an ellipsis as truncate does.
// Marks out of order, overlapping or not on rune boundaries are skipped.
func segments(text string, marks []Mark, maxRunes int) []segment {
	var out []segment
	pos := 0
	add := func(s string, mark bool) {
		if s != "" {
			out = append(out, segment{s, mark})
		}
	}
	for _, m := range marks {
		if m.Start < pos || m.End <= m.Start || m.End > len(text) ||
			!boundary(text, m.Start) || !boundary(text, m.End) {
			continue
		}
		add(text[pos:m.Start], false)
		add(text[m.Start:m.End], true)
		pos = m.End
	}
	add(text[pos:], false)
	if maxRunes <= 0 || utf8.RuneCountInString(text) <= maxRunes {
		return out
	}
	left := maxRunes
	for i, s := range out {
		n := utf8.RuneCountInString(s.Text)
		if n < left {
			left -= n
			continue
		}
		cut := s.Text
		for j := range s.Text {
			if left == 0 {
				cut = s.Text[:j]
				break
			}
			left--
		}
		out = append(out[:i], segment{cut, s.Mark}, segment{"…", false})
		if cut == "" {
			out = append(out[:i], segment{"…", false})
		}
		return out
	}
	return out
}

func boundary(s string, i int) bool { return i == len(s) || utf8.RuneStart(s[i]) }

// matchesText says how many matches of the search q the body shows (cut:
// only its first 64 KiB are marked).
func matchesText(n int, q string, cut bool) string {
	in := "the body"
	if cut {
		in = "the body's first 64 KiB"
	}
	switch n {
	case 0:
		return "No match of “" + q + "” in " + in + " (it may be in the reason, the description or a property)."
	case 1:
		return "1 match of “" + q + "” highlighted in " + in + "."
	}
	return thousands(n) + " matches of “" + q + "” highlighted in " + in + "."
}
