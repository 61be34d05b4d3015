package views

import (
	"reflect"
	"strings"
	"testing"
)

func diffText(d []DiffLine) string {
	var b strings.Builder
	for _, l := range d {
		b.WriteString(diffMark(l.Kind) + l.Text + "|")
	}
	return b.String()
}

func TestLineDiff(t *testing.T) {
	for _, tt := range []struct{ name, old, new, want string }{
		{"same", "a\nb\n", "a\nb", " a| b|"},
		{"one line changed", "a\nb\nc", "a\nB\nc", " a|−b|+B| c|"},
		{"added at the end", "a", "a\nb", " a|+b|"},
		{"removed at the start", "x\na", "a", "−x| a|"},
		{"from nothing", "", "a\nb", "+a|+b|"},
		{"to nothing", "a", "", "−a|"},
		{"a moved line", "a\nb\nc\nd", "b\nc\na\nd", "−a| b| c|+a| d|"},
		{"CRLF is a line end", "a\r\nb", "a\nb", " a| b|"},
	} {
		if got := diffText(LineDiff(tt.old, tt.new)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	// Line numbers on both sides.
	d := LineDiff("a\nb\nc", "a\nB\nc")
	want := []DiffLine{{DiffSame, "a", 1, 1}, {DiffRemoved, "b", 2, 0}, {DiffAdded, "B", 0, 2}, {DiffSame, "c", 3, 3}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("numbers: %+v", d)
	}
	// Past the table's bound the middle is removed, then added, but the
	// common start and end are still context.
	var a, b []string
	for i := range 2100 {
		a = append(a, "old"+strings.Repeat("x", i%7)+string(rune('a'+i%26)))
		b = append(b, "new"+string(rune('a'+i%26)))
	}
	big := LineDiff("head\n"+strings.Join(a, "\n")+"\ntail", "head\n"+strings.Join(b, "\n")+"\ntail")
	if len(big) != 2+2100+2100 || big[0].Kind != DiffSame || big[1].Kind != DiffRemoved || big[2101].Kind != DiffAdded || big[len(big)-1].Text != "tail" {
		t.Errorf("big diff: %d lines, first %+v, last %+v", len(big), big[0], big[len(big)-1])
	}
	if DiffChanged(LineDiff("a", "a")) || !DiffChanged(LineDiff("a", "b")) {
		t.Error("DiffChanged")
	}
}

func TestPropertyDiff(t *testing.T) {
	got := PropertyDiff(map[string]string{"a": `1`, "b": `"x"`, "gone": `true`},
		map[string]string{"a": `1`, "b": `"y"`, "new": `null`})
	want := []PropertyChange{{Key: "b", Kind: PropertyChanged, Old: `"x"`, New: `"y"`}, {Key: "gone", Kind: PropertyRemoved, Old: `true`},
		{Key: "new", Kind: PropertyAdded, New: `null`}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if d := PropertyDiff(map[string]string{"a": "1"}, map[string]string{"a": "1"}); len(d) != 0 {
		t.Errorf("no change: %+v", d)
	}
}
