package dlq

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// filterSamples set each key of the table to a value (a filter key without
// a sample here fails TestFilterSamplesCoverEveryKey): together they are
// every key, alone each is one condition.
func filterSamples() map[string]Filter {
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	until := time.Date(2026, 11, 22, 12, 30, 5, 123e6, time.UTC)
	return map[string]Filter{
		"namespace":    {Namespace: "prod-eu"},
		"entity":       {Entity: "payments/Subscriptions/audit"},
		"subqueue":     {SubQueue: SubQueueTransferDeadLetter},
		"state":        {State: StateDeferred},
		"reason":       {Reason: " Sql Timeout "},
		"group":        {Group: "g-1f2e"},
		"q":            {Query: "tenant 42 ünïcode"},
		"property":     {Properties: []PropertyMatch{{Key: "tenant", Value: "t=1"}, {Key: "n", Value: ""}, {Key: "tenant", Value: "t2"}}},
		"since":        {Since: &since},
		"until":        {Until: &until},
		"include_gone": {IncludeGone: true},
		"all":          {All: true},
	}
}

// every is all the samples in one filter.
func every() Filter {
	var f Filter
	for _, s := range filterSamples() {
		v := reflect.ValueOf(&f).Elem()
		sv := reflect.ValueOf(s)
		for i := range v.NumField() {
			if !sv.Field(i).IsZero() {
				v.Field(i).Set(sv.Field(i))
			}
		}
	}
	return f
}

func TestFilterSamplesCoverEveryKey(t *testing.T) {
	samples := filterSamples()
	for _, k := range FilterKeys() {
		s, ok := samples[k]
		if !ok {
			t.Errorf("no sample for filter key %q", k)
			continue
		}
		if got := s.Encode(); len(got) != 1 || got[k] == nil {
			t.Errorf("the sample of %q encodes as %v, want that key alone", k, got)
		}
	}
	if len(samples) != len(FilterKeys()) {
		t.Errorf("%d samples for %d keys", len(samples), len(FilterKeys()))
	}
	// Every field of Filter but the reader's QueryNotBodies and
	// Namespaces (its scope) is a key's.
	f := every()
	v := reflect.ValueOf(f)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; name != "QueryNotBodies" && name != "Namespaces" && v.Field(i).IsZero() {
			t.Errorf("field %s is set by no key's sample", name)
		}
	}
}

// flagArgs is f as export's command line.
func flagArgs(f Filter) []string {
	var args []string
	for _, k := range filterKeys {
		for _, v := range k.encode(f) {
			args = append(args, "--"+k.flag+"="+v)
		}
	}
	return args
}

func parseFlags(t *testing.T, args []string) (Filter, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	FilterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return FilterFromFlags(fs)
}

func sameFilter(t *testing.T, what string, got, want Filter) {
	t.Helper()
	eqTime := func(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
	if !eqTime(got.Since, want.Since) || !eqTime(got.Until, want.Until) {
		t.Errorf("%s: times %v %v, want %v %v", what, got.Since, got.Until, want.Since, want.Until)
	}
	got.Since, got.Until, want.Since, want.Until = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %+v, want %+v", what, got, want)
	}
}

// Every key, alone and all together, goes query → Filter → JSON → Filter →
// query → Filter, and through the form and the flags, unchanged.
func TestFilterRoundTrips(t *testing.T) {
	cases := filterSamples()
	cases["every key"] = every()
	cases["nothing"] = Filter{}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			q := want.Encode()
			f1, err := ParseFilterQuery(q)
			if err != nil {
				t.Fatalf("query %s: %v", q.Encode(), err)
			}
			sameFilter(t, "query", f1, want)

			b, err := json.Marshal(f1)
			if err != nil {
				t.Fatal(err)
			}
			var f2 Filter
			if err := json.Unmarshal(b, &f2); err != nil {
				t.Fatalf("JSON %s: %v", b, err)
			}
			sameFilter(t, "JSON "+string(b), f2, want)

			q2 := f2.Encode()
			if q2.Encode() != q.Encode() {
				t.Errorf("query after JSON %s, want %s", q2.Encode(), q.Encode())
			}
			f3, err := ParseFilterForm(q2)
			if err != nil {
				t.Fatalf("form %s: %v", q2.Encode(), err)
			}
			sameFilter(t, "form", f3, want)

			f4, err := parseFlags(t, flagArgs(f3))
			if err != nil {
				t.Fatalf("flags %v: %v", flagArgs(f3), err)
			}
			sameFilter(t, "flags", f4, want)

			// A pointer in a struct, as POST /api/v1/jobs holds it.
			var body struct {
				Filter *Filter `json:"filter"`
			}
			if err := json.Unmarshal([]byte(`{"filter":`+string(b)+`}`), &body); err != nil || body.Filter == nil {
				t.Fatalf("in a body: %v", err)
			}
			sameFilter(t, "in a body", *body.Filter, want)
		})
	}
}

// The JSON is the API's filter object: keys of the query string, strings,
// property a list, include_gone a boolean, times in UTC to the millisecond.
func TestFilterJSONShape(t *testing.T) {
	since := time.Date(2026, 11, 22, 11, 42, 0, 0, time.FixedZone("", 3600))
	f := Filter{Entity: "orders", Since: &since, IncludeGone: true, QueryNotBodies: true,
		Properties: []PropertyMatch{{Key: "tenant", Value: "t1"}, {Key: "n", Value: "3"}}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"entity":"orders","include_gone":true,"property":["tenant=t1","n=3"],"since":"2026-11-22T10:42:00.000Z"}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	if b, _ := json.Marshal(Filter{}); string(b) != "{}" {
		t.Errorf("the empty filter is %s", b)
	}
}

// Jobs keep their filter's JSON; before the filter had one JSON form, a job
// made through the API kept what the client sent. Every such filter still
// reads.
func TestFilterReadsKeptJobFilters(t *testing.T) {
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		kept string
		want Filter
	}{
		{`{"entity":"orders","subqueue":"dead_letter"}`, Filter{Entity: "orders", SubQueue: SubQueueDeadLetter}},
		{`{"entity":"orders","include_gone":"true","property":"a=1","q":"","reason":null,"since":"2026-11-22T11:00:00+01:00"}`,
			Filter{Entity: "orders", IncludeGone: true, Properties: []PropertyMatch{{Key: "a", Value: "1"}}, Since: &since}},
		{`{"include_gone":false,"property":["a=1","b="]}`, Filter{Properties: []PropertyMatch{{Key: "a", Value: "1"}, {Key: "b"}}}},
		{`{}`, Filter{}},
	} {
		var f Filter
		if err := json.Unmarshal([]byte(tt.kept), &f); err != nil {
			t.Errorf("%s: %v", tt.kept, err)
			continue
		}
		sameFilter(t, tt.kept, f, tt.want)
	}
}

// A bad value is refused in every form, naming the parameter as that form
// names it.
func TestFilterBadValuesNameTheParameter(t *testing.T) {
	for _, tt := range []struct {
		key, value string
		word       string // what the message says besides the name
	}{
		{"subqueue", "dlq", "dead_letter"},
		{"state", "asleep", "deferred"},
		{"property", "tenant", "key=value"},
		{"property", "=value", "key=value"},
		{"since", "yesterday", "2026-11-22T10:4"},
		{"until", "2026-11-22", "2026-11-22T10:4"},
		{"include_gone", "yes", "true, false, 1 or 0"},
		// A NUL byte is refused in every key, before the key reads it.
		{"q", "a\x00b", "NUL byte"},
		{"entity", "orders\x00", "NUL byte"},
		{"reason", "\x00", "NUL byte"},
		{"group", "g\x00", "NUL byte"},
		{"property", "k=\x00", "NUL byte"},
		{"property", "k\x00=v", "NUL byte"},
		{"subqueue", "main\x00", "NUL byte"},
		{"since", "2026-11-22T10:00:00Z\x00", "NUL byte"},
		// A time an offset moves out of 0000-9999 in UTC: forms write UTC,
		// and could not read it back.
		{"since", "9999-12-31T23:00:00-05:00", "0000 to 9999"},
		{"until", "0000-01-01T00:30:00+01:00", "0000 to 9999"},
	} {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			check := func(form, param string, err error) {
				t.Helper()
				var fe *FilterError
				if !errors.As(err, &fe) {
					t.Fatalf("%s: error %v, want a FilterError", form, err)
				}
				if fe.InvalidParameter() != param || !strings.Contains(fe.Error(), param) || !strings.Contains(fe.Error(), tt.word) {
					t.Errorf("%s: %s %q, want one naming %s and saying %q", form, fe.Param, fe.Msg, param, tt.word)
				}
			}
			_, err := ParseFilterQuery(url.Values{tt.key: {tt.value}})
			check("query", tt.key, err)
			_, err = ParseFilterForm(url.Values{tt.key: {tt.value}})
			check("form", tt.key, err)
			var f Filter
			raw, _ := json.Marshal(map[string]string{tt.key: tt.value})
			check("JSON", tt.key, json.Unmarshal(raw, &f))
			flagName := "--" + keyFlag(tt.key)
			_, err = parseFlags(t, []string{flagName + "=" + tt.value})
			check("flags", flagName, err)
		})
	}
}

func keyFlag(name string) string {
	for _, k := range filterKeys {
		if k.name == name {
			return k.flag
		}
	}
	return ""
}

func TestFilterChecksAcrossKeys(t *testing.T) {
	_, err := ParseFilterQuery(url.Values{"since": {"2026-11-22T10:00:00Z"}, "until": {"2026-11-22T09:00:00Z"}})
	var fe *FilterError
	if !errors.As(err, &fe) || fe.Param != "until" || !strings.Contains(fe.Msg, "after since") {
		t.Errorf("until before since: %v", err)
	}
	_, err = parseFlags(t, []string{"--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T10:00:00Z"})
	if !errors.As(err, &fe) || fe.Param != "--until" || !strings.Contains(fe.Msg, "after --since") {
		t.Errorf("flags, until at since: %v", err)
	}
	props := url.Values{}
	for range MaxPropertyMatches + 1 {
		props.Add("property", "a=1")
	}
	if _, err := ParseFilterQuery(props); !errors.As(err, &fe) || fe.Param != "property" || !strings.Contains(fe.Msg, "at most 16") {
		t.Errorf("17 properties: %v", err)
	}
	if _, err := ParseFilterQuery(url.Values{"entity": {"a", "b"}}); !errors.As(err, &fe) || fe.Param != "entity" || !strings.Contains(fe.Msg, "2 times") {
		t.Errorf("entity twice: %v", err)
	}
	var f Filter
	if err := json.Unmarshal([]byte(`{"colour":"red"}`), &f); !errors.As(err, &fe) || fe.Param != "colour" {
		t.Errorf("unknown JSON key: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"entity":3}`), &f); !errors.As(err, &fe) || fe.Param != "filter.entity" {
		t.Errorf("a number: %v", err)
	}
	if err := json.Unmarshal([]byte(`[1]`), &f); !errors.As(err, &fe) || fe.Param != "filter" {
		t.Errorf("not an object: %v", err)
	}
}

// The forms differ where they should: a form's blank fields are absent and
// its times may be datetime-local values in UTC; the API is strict; empty
// query values are no condition; the last of a repeated single flag wins.
func TestFilterFormRules(t *testing.T) {
	local := url.Values{"since": {"2026-11-22T10:42"}, "until": {"2026-11-22T10:43:05"}, "property": {"", " "}, "entity": {""}}
	f, err := ParseFilterForm(local)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 22, 10, 42, 0, 0, time.UTC)
	if f.Since == nil || !f.Since.Equal(want) || f.Properties != nil || f.Entity != "" {
		t.Errorf("form: %+v", f)
	}
	if _, err := ParseFilterQuery(url.Values{"since": {"2026-11-22T10:42"}}); err == nil {
		t.Error("the API took a datetime-local time")
	}
	if _, err := ParseFilterQuery(url.Values{"property": {""}}); err == nil {
		t.Error("the API took an empty property")
	}
	f, err = ParseFilterQuery(url.Values{"entity": {""}, "since": {""}, "include_gone": {""}, "limit": {"5"}})
	if err != nil || !reflect.DeepEqual(f, Filter{}) {
		t.Errorf("empty values: %+v %v", f, err)
	}
	f, err = parseFlags(t, []string{"--entity", " orders ", "--entity", "refunds", "--include-gone", "--property", "a=1", "--property", "b=2"})
	if err != nil || f.Entity != "refunds" || !f.IncludeGone || len(f.Properties) != 2 {
		t.Errorf("flags: %+v %v", f, err)
	}
	f, err = parseFlags(t, []string{"--include-gone=false", "--entity", " orders "})
	if err != nil || f.IncludeGone || f.Entity != "orders" {
		t.Errorf("flags: %+v %v", f, err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	if names := FilterFlags(fs); !slices.Contains(names, "search") || slices.Contains(names, "q") || len(names) != len(filterKeys) {
		t.Errorf("flags %v", names)
	}
}

// Unconditional knows every key: each sample narrows the selection but
// include_gone's and all's, which say "everything" louder.
func TestFilterUnconditional(t *testing.T) {
	for name, f := range filterSamples() {
		want := name == "include_gone" || name == "all"
		if got := f.Unconditional(); got != want {
			t.Errorf("%s: Unconditional %v, want %v", name, got, want)
		}
	}
	if !(Filter{}).Unconditional() || !(Filter{QueryNotBodies: true}).Unconditional() || every().Unconditional() {
		t.Error("the empty filter is unconditional, every key together is not")
	}
}
