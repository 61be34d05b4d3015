package highlight

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/dlqdash/dlqdash/internal/search"
)

func TestHighlighterMatchesAsFTS5Does(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cases := []struct {
		name, q, text string
		want          []string // the matched substrings, in order
	}{
		{"case", "timeout", "Timeout after TIMEOUT; timeouts", []string{"Timeout", "TIMEOUT"}},
		{"prefix", "time*", "Timeout after timeouts, not a ttime", []string{"Timeout", "timeouts"}},
		{"phrase", `"order 42"`, "order 41, order 42, 42 order, order-42", []string{"order 42", "order-42"}},
		{"diacritics", "cafe", "Café CAFÉ cafe cafés", []string{"Café", "CAFÉ", "cafe"}},
		{"multi-byte", "größe", "Die Größe: GRÖSSE, größe东京 größe 東京", []string{"Größe", "größe"}},
		{"cjk token", "東京", "東京 東京都", []string{"東京"}},
		{"in a tag", "script", `<script>window.__xss=1</script>`, []string{"script", "script"}},
		{"quotes", "value", `{"key":"value","v":'value'}`, []string{"value", "value"}},
		{"any phrase", "alpha beta", "only beta here", []string{"beta"}},
		{"markers in text", "x", "a\x01x\x02b\x00x", []string{"x", "x"}},
		{"none", "absent", "nothing to see", nil},
	}
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.text
	}
	// One call per query (a page's previews are one call).
	for i, c := range cases {
		q, err := search.Parse(c.q)
		if err != nil {
			t.Fatal(err)
		}
		spans, err := h.Spans(context.Background(), q, []string{"unrelated", texts[i], ""})
		if err != nil {
			t.Fatal(err)
		}
		if spans[0] != nil || spans[2] != nil {
			t.Errorf("%s: spans in the other texts: %v", c.name, spans)
		}
		var got []string
		for _, s := range spans[1] {
			got = append(got, c.text[s.Start:s.End])
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q in %q highlighted %q, want %q", c.name, c.q, c.text, got, c.want)
		}
	}
}

func TestHighlighterIsSafeConcurrently(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	q, _ := search.Parse("needle")
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		go func() {
			spans, err := h.Spans(context.Background(), q, []string{"a needle", "hay", "needle needle"})
			if err == nil && (len(spans[0]) != 1 || spans[1] != nil || len(spans[2]) != 2) {
				err = errors.New("wrong spans")
			}
			errs <- err
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
