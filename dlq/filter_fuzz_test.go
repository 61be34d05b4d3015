package dlq

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzFilterForms feeds every outside form of a filter (an API query
// string, a page's form, the JSON object of a job, export's flags) the
// same fuzzed input. Each must refuse with a FilterError or give a filter
// that holds no NUL byte; a filter read from a query string must write
// itself back (Encode) to a query that reads to the same filter, and one
// read from JSON must do the same through MarshalJSON.
func FuzzFilterForms(f *testing.F) {
	for _, seed := range []struct{ query, json string }{
		{"q=a%00b", `{"q":"a\u0000b"}`},
		{"entity=nosuch", `{"entity":"nosuch"}`},
		{"", `{}`},
		{"all=true", `{"all":true}`},
		{"include_gone=1", `{"include_gone":true}`},
		{"reason=%ff%fe", `{"reason":"\udcff"}`},
		{"property=k%3Dv&property=%3Dv", `{"property":["k=v","=v"]}`},
		{"since=9999-12-31T23:00:00-05:00", `{"since":"0000-01-01T00:00:00+01:00"}`},
		{"since=2026-11-22T10:00:00.0001Z&until=2026-11-22T10:00:00.0002Z", `{"until":"2026-11-22T10:42"}`},
		{"subqueue=dead_letter&state=active&group=g&q=tenant*+42", `{"subqueue":"main","state":"deferred","group":null}`},
		{"entity=a&entity=b", `{"colour":"red"}`},
		{"%zz", `[1]`},
	} {
		f.Add(seed.query, []byte(seed.json))
	}
	f.Fuzz(func(t *testing.T, query string, body []byte) {
		if v, err := url.ParseQuery(query); err == nil {
			fq, err := ParseFilterQuery(v)
			checkFiltered(t, "query", fq, err)
			if err == nil {
				roundTrip(t, "query", fq)
			}
			ff, err := ParseFilterForm(v)
			checkFiltered(t, "form", ff, err)
			ffl, err := parseFlagValues(v)
			checkFiltered(t, "flags", ffl, err)
		}
		var fj Filter
		err := json.Unmarshal(body, &fj)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return // not JSON: the decoder's, not the filter's, to refuse
		}
		checkFiltered(t, "JSON", fj, err)
		if err == nil {
			roundTrip(t, "JSON", fj)
		}
	})
}

// checkFiltered: a refusal is a FilterError naming a parameter; a filter
// holds no NUL byte in any text.
func checkFiltered(t *testing.T, form string, f Filter, err error) {
	t.Helper()
	if err != nil {
		var fe *FilterError
		if !errors.As(err, &fe) || fe.Param == "" || fe.Msg == "" {
			t.Fatalf("%s: refused with %v (%T), want a FilterError naming a parameter", form, err, err)
		}
		return
	}
	texts := []string{f.Entity, string(f.SubQueue), string(f.State), f.Reason, f.Group, f.Query}
	for _, p := range f.Properties {
		texts = append(texts, p.Key, p.Value)
	}
	for _, s := range texts {
		if strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("%s: a NUL byte got through: %+v", form, f)
		}
	}
}

// roundTrip: what a filter writes of itself reads back to the same
// filter, once its times are the millisecond UTC ones forms write.
func roundTrip(t *testing.T, form string, f Filter) {
	t.Helper()
	q := f.Encode()
	f2, err := ParseFilterQuery(q)
	if err != nil {
		if subMillisecond(f) {
			return // since and until a fraction of a millisecond apart: equal when written
		}
		t.Fatalf("%s: %+v encodes as %q, which does not read back: %v", form, f, q.Encode(), err)
	}
	if q2 := f2.Encode(); q2.Encode() != q.Encode() {
		t.Fatalf("%s: %q reads back as %q", form, q.Encode(), q2.Encode())
	}
	b, err := json.Marshal(f2)
	if err != nil {
		t.Fatal(err)
	}
	var f3 Filter
	if err := json.Unmarshal(b, &f3); err != nil {
		t.Fatalf("%s: %+v marshals as %s, which does not read back: %v", form, f2, b, err)
	}
	if !validText(f2) {
		return // JSON writes invalid UTF-8 as U+FFFD: not the same bytes
	}
	if q3 := f3.Encode(); q3.Encode() != q.Encode() {
		t.Fatalf("%s: JSON %s reads back as %q, want %q", form, b, q3.Encode(), q.Encode())
	}
}

func subMillisecond(f Filter) bool {
	return (f.Since != nil && f.Since.Nanosecond()%1e6 != 0) || (f.Until != nil && f.Until.Nanosecond()%1e6 != 0)
}

func validText(f Filter) bool {
	ok := utf8.ValidString(f.Entity) && utf8.ValidString(f.Reason) && utf8.ValidString(f.Group) && utf8.ValidString(f.Query)
	for _, p := range f.Properties {
		ok = ok && utf8.ValidString(p.Key) && utf8.ValidString(p.Value)
	}
	return ok
}

// parseFlagValues reads v as export's flags would take it (each key's
// values as repeated flags).
func parseFlagValues(v url.Values) (Filter, error) {
	var args []string
	for _, k := range filterKeys {
		for _, x := range v[k.name] {
			args = append(args, "--"+k.flag+"="+x)
		}
	}
	fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	FilterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Filter{}, &FilterError{Param: "flags", Msg: err.Error()}
	}
	return FilterFromFlags(fs)
}
