package search

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in, match, any string
	}{
		{"timeout", `"timeout"`, `"timeout"`},
		{"  order-123   tim*  ", `"order-123" "tim"*`, `"order-123" OR "tim"*`},
		{`"connection reset" db`, `"connection reset" "db"`, `"connection reset" OR "db"`},
		{`"connection res"*`, `"connection res"*`, `"connection res"*`},
		{`AND OR NOT body:x`, `"AND" "OR" "NOT" "body:x"`, `"AND" OR "OR" OR "NOT" OR "body:x"`},
		{`a"b c"`, `"a" "b c"`, `"a" OR "b c"`},
		{`-- "!!" x`, `"x"`, `"x"`},
	}
	for _, c := range cases {
		q, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if q.Match() != c.match || q.Any() != c.any {
			t.Errorf("Parse(%q) = %s / %s, want %s / %s", c.in, q.Match(), q.Any(), c.match, c.any)
		}
	}
	for _, bad := range []string{`"unclosed phrase`, `a "b`, `!!! --`, "", strings.Repeat("x ", 33), strings.Repeat("x", 1001)} {
		_, err := Parse(bad)
		var e *Error
		if !errors.As(err, &e) || e.InvalidParameter() != "q" {
			t.Errorf("Parse(%q) = %v, want a *search.Error naming q", bad, err)
		}
	}
}
