package views

import (
	"bytes"
	"context"
	"testing"
)

func TestMarkedEscapesAndCuts(t *testing.T) {
	render := func(text string, marks []Mark, n int) string {
		var b bytes.Buffer
		if err := Marked(text, marks, n).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	text := `<b a="x">größe</b> & größe`
	// "größe" at bytes 9-16 and 23-30 (ö and ß are two bytes each).
	marks := []Mark{{9, 16}, {23, 30}}
	if got, want := render(text, marks, 0), `&lt;b a=&#34;x&#34;&gt;<mark data-testid="match">größe</mark>&lt;/b&gt; &amp; <mark data-testid="match">größe</mark>`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Cut inside the second mark: the mark keeps its part, then the ellipsis.
	if got, want := render(text, marks, 22), `&lt;b a=&#34;x&#34;&gt;<mark data-testid="match">größe</mark>&lt;/b&gt; &amp; <mark data-testid="match">g</mark>…`; got != want {
		t.Errorf("cut: got  %s\nwant %s", got, want)
	}
	// Cut right before a mark, and marks that are not on rune boundaries
	// or overlap are ignored.
	if got, want := render(text, []Mark{{10, 12}, {9, 16}, {12, 20}}, 9), `&lt;b a=&#34;x&#34;&gt;…`; got != want {
		t.Errorf("cut before: got  %s\nwant %s", got, want)
	}
	if got := render("short", []Mark{{0, 5}}, 200); got != `<mark data-testid="match">short</mark>` {
		t.Errorf("uncut: %s", got)
	}
}
