package dlq

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The outside forms of a Filter, each read and written through filterKeys.

// FilterKeys are the filter's query parameters (and JSON keys), in the order
// forms list them.
func FilterKeys() []string {
	names := make([]string, len(filterKeys))
	for i, k := range filterKeys {
		names[i] = k.name
	}
	return names
}

// apiInput names parameters by their keys and takes RFC 3339 times only.
var apiInput = input{label: func(name string) string { return name }}

// ParseFilterQuery reads the filter of an API query string (GET
// /api/v1/messages): each key at most once except property, times in RFC
// 3339. Parameters that are not filter keys are left to the caller.
func ParseFilterQuery(v url.Values) (Filter, error) {
	return parseValues(v, apiInput)
}

// ParseFilterForm reads the filter of an HTML form or of a page's link (the
// message list, a replay form's fields, a live subscription): as
// ParseFilterQuery, except that blank fields are absent and a time may also
// be a datetime-local input's value (2026-11-22T10:42), taken as UTC.
func ParseFilterForm(v url.Values) (Filter, error) {
	nonBlank := url.Values{}
	for _, name := range FilterKeys() {
		for _, x := range v[name] {
			if strings.TrimSpace(x) != "" {
				nonBlank.Add(name, x)
			}
		}
	}
	return parseValues(nonBlank, input{localTimes: true, label: apiInput.label})
}

// parseValues reads every key of the table from v, then checks the result.
func parseValues(v url.Values, in input) (Filter, error) {
	var f Filter
	for _, k := range filterKeys {
		vs := v[k.name]
		if k.kind != manyValue && len(vs) > 1 {
			return f, in.bad(k.name, "%s is given %d times; give it once", in.label(k.name), len(vs))
		}
		for _, x := range vs {
			if k.kind != manyValue && x == "" {
				continue // an empty value is no condition
			}
			if err := checkText(k.name, x, in); err != nil {
				return f, err
			}
			if err := k.parse(&f, x, in); err != nil {
				return f, err
			}
		}
	}
	for _, k := range filterKeys {
		if k.check == nil {
			continue
		}
		if err := k.check(f, in); err != nil {
			return f, err
		}
	}
	return f, nil
}

// checkText refuses what no value of any key can hold: a NUL byte, which
// no catalog text contains and SQLite's full-text search cannot take. Every
// form's values pass here, before any key reads them.
func checkText(name, v string, in input) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return in.bad(name, "%s holds a NUL byte (at byte %d): no message text contains one; remove it", in.label(name), i)
	}
	return nil
}

// Encode is f as a query string's parameters (links, live subscriptions);
// ParseFilterQuery and ParseFilterForm read it back to f. Times are written
// in UTC to the millisecond, as the API writes them.
func (f Filter) Encode() url.Values {
	v := url.Values{}
	for _, k := range filterKeys {
		for _, x := range k.encode(f) {
			v.Add(k.name, x)
		}
	}
	return v
}

// MarshalJSON writes f as the API's filter object (POST /api/v1/jobs
// "filter", and what a job keeps of its selection): the set keys only,
// strings, property as a list of key=value, include_gone as a boolean.
func (f Filter) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	for _, k := range filterKeys {
		vs := k.encode(f)
		switch {
		case len(vs) == 0:
		case k.kind == manyValue:
			m[k.name] = vs
		case k.kind == boolValue:
			m[k.name] = vs[0] == "true"
		default:
			m[k.name] = vs[0]
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the API's filter object with the query string's rules.
// A value may be a string, a boolean, a list of strings (property) or null;
// empty strings and nulls are absent. It reads every filter a job has kept
// since jobs kept filters (some as the client sent them: "include_gone":
// "true", "property": "k=v", times with an offset).
func (f *Filter) UnmarshalJSON(b []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return &FilterError{Param: "filter", Msg: "filter must be a JSON object with the message list's parameters as keys"}
	}
	v := url.Values{}
	keys := FilterKeys()
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		raw := obj[name]
		if !slices.Contains(keys, name) {
			param := name
			if name == "" {
				param = "filter" // an empty key names nothing
			}
			return &FilterError{Param: param, Msg: fmt.Sprintf("unknown filter key %q; a filter takes %s", name, strings.Join(keys, ", "))}
		}
		var (
			s    string
			b    bool
			list []string
		)
		switch {
		case json.Unmarshal(raw, &s) == nil: // null too, leaving s empty
			if s != "" {
				v.Add(name, s)
			}
		case json.Unmarshal(raw, &b) == nil:
			v.Add(name, strconv.FormatBool(b))
		case json.Unmarshal(raw, &list) == nil:
			v[name] = append(v[name], list...)
		default:
			return &FilterError{Param: "filter." + name, Msg: fmt.Sprintf("filter.%s must be a string (or a list of strings for property)", name)}
		}
	}
	parsed, err := parseValues(v, apiInput)
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

// FilterFlags defines on fs a flag for every filter key (--entity,
// --subqueue, --state, --reason, --group, --search, --property,
// --since, --until, --include-gone, --all) and returns their names in order, for
// a help text. FilterFromFlags reads them after fs.Parse.
func FilterFlags(fs *flag.FlagSet) []string {
	var names []string
	for _, k := range filterKeys {
		fs.Var(&flagValue{kind: k.kind}, k.flag, k.usage)
		names = append(names, k.flag)
	}
	return names
}

// FilterFromFlags reads the filter of the flags FilterFlags defined on fs,
// with the API's rules; errors name the flag (--since).
func FilterFromFlags(fs *flag.FlagSet) (Filter, error) {
	v := url.Values{}
	flags := map[string]string{}
	for _, k := range filterKeys {
		flags[k.name] = k.flag
		fl := fs.Lookup(k.flag)
		if fl == nil {
			return Filter{}, fmt.Errorf("dlq: flag --%s was not defined by FilterFlags", k.flag)
		}
		fv, ok := fl.Value.(*flagValue)
		if !ok {
			return Filter{}, fmt.Errorf("dlq: flag --%s was not defined by FilterFlags", k.flag)
		}
		v[k.name] = fv.values
	}
	return parseValues(v, input{label: func(name string) string { return "--" + flags[name] }})
}

// flagValue is a filter key's flag: the values given, the last one for a
// key that takes one.
type flagValue struct {
	kind   keyKind
	values []string
}

func (fv *flagValue) String() string {
	if fv == nil {
		return ""
	}
	return strings.Join(fv.values, ",")
}

func (fv *flagValue) Set(s string) error {
	if fv.kind == manyValue {
		fv.values = append(fv.values, s)
	} else {
		fv.values = []string{s}
	}
	return nil
}

// IsBoolFlag lets --include-gone stand alone.
func (fv *flagValue) IsBoolFlag() bool { return fv.kind == boolValue }
