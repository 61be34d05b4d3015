package sqlfilter

import (
	"errors"
	"testing"
)

// FuzzParse checks that no input makes the parser or the evaluator panic,
// and that every rejection is a *SyntaxError with a position inside the
// input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"color = 'red' AND quantity > 10", "sys.Label LIKE '%bus%' ESCAPE '!'", "a IN (1, 2.5, 'x', NULL)",
		"NOT EXISTS([x y]) OR \"q\"\"t\" IS NOT NULL", "@p + -3 * (2 % 1) / 4.5E-3 <> p('user.x')", "newid() = 1",
		"SET a = 1; REMOVE b, SET sys.To = 'x'", "'unterminated", "[", "1e", "-9223372036854775808 = x",
	} {
		f.Add(s)
	}
	params := map[string]any{"@p": 1}
	f.Fuzz(func(t *testing.T, src string) {
		check := func(err error) {
			if err == nil {
				return
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("%q: error %v is not a *SyntaxError", src, err)
			}
			if se.Offset < 0 || se.Offset > len(src) || se.Line < 1 || se.Column < 1 {
				t.Fatalf("%q: position out of range: %+v", src, se)
			}
		}
		fl, err := ParseFilter(src, params)
		check(err)
		if err == nil {
			_, _ = fl.Match(sample())
		}
		a, err := ParseAction(src, params)
		check(err)
		if err == nil {
			_ = a.Apply(sample())
		}
	})
}
