package dlq

import (
	"fmt"
	"strings"
	"time"
)

// The one table of a Filter's keys. Every outside form reads and writes a
// filter through it (filter_forms.go): the query string of GET
// /api/v1/messages and of the message list page, the message list's form, the
// JSON filter of POST /api/v1/jobs (also what a job keeps of its selection),
// the live subscription of a message list, and export's flags.

// keyKind says how many values a key takes and of what shape.
type keyKind int

const (
	oneValue  keyKind = iota // a single string value
	manyValue                // repeatable (property)
	boolValue                // true, false, 1 or 0; in JSON a boolean
)

// filterKey is one key of a Filter in every form.
type filterKey struct {
	name  string // the query parameter and the JSON key
	flag  string // the command-line flag, without --
	usage string // the flag's help
	kind  keyKind
	// parse reads one (non-empty, for oneValue keys) value into f.
	parse func(f *Filter, v string, in input) error
	// encode is f's values for the key, none when unset; parse reads them
	// back to the same filter.
	encode func(f Filter) []string
	// check validates f once every key is read; nil when there is nothing
	// to check.
	check func(f Filter, in input) error
}

// input is how a form writes values and names its parameters.
type input struct {
	// localTimes also accepts a datetime-local input's value
	// (2026-11-22T10:42, with or without seconds), taken as UTC.
	localTimes bool
	// label is how the form names a key's parameter (by the key's name)
	// in errors.
	label func(name string) string
}

func (in input) bad(name, format string, a ...any) error {
	return &FilterError{Param: in.label(name), Msg: fmt.Sprintf(format, a...)}
}

// filterKeys is the table, in the order forms list the keys.
var filterKeys = []*filterKey{
	{
		name: "namespace", flag: "namespace", kind: oneValue,
		usage:  "only messages of this Service Bus namespace, by its configured name (with several namespaces)",
		parse:  func(f *Filter, v string, _ input) error { f.Namespace = strings.TrimSpace(v); return nil },
		encode: func(f Filter) []string { return some(f.Namespace) },
	},
	{
		name: "entity", flag: "entity", kind: oneValue,
		usage:  "only messages of this queue or subscription path, e.g. orders or payments/Subscriptions/audit",
		parse:  func(f *Filter, v string, _ input) error { f.Entity = strings.TrimSpace(v); return nil },
		encode: func(f Filter) []string { return some(f.Entity) },
	},
	{
		name: "subqueue", flag: "subqueue", kind: oneValue,
		usage: "only this subqueue: dead_letter, transfer_dead_letter or main",
		parse: func(f *Filter, v string, in input) error {
			q := SubQueue(strings.TrimSpace(v))
			if q != "" && !q.Valid() {
				return in.bad("subqueue", "unknown %s %q: want dead_letter, transfer_dead_letter or main", in.label("subqueue"), v)
			}
			f.SubQueue = q
			return nil
		},
		encode: func(f Filter) []string { return some(string(f.SubQueue)) },
	},
	{
		name: "state", flag: "state", kind: oneValue,
		usage: "only this state: active, deferred or scheduled",
		parse: func(f *Filter, v string, in input) error {
			s := State(strings.TrimSpace(v))
			if s != "" && !s.Valid() {
				return in.bad("state", "unknown %s %q: want active, deferred or scheduled", in.label("state"), v)
			}
			f.State = s
			return nil
		},
		encode: func(f Filter) []string { return some(string(f.State)) },
	},
	{
		name: "reason", flag: "reason", kind: oneValue,
		usage:  "only messages with exactly this dead-letter reason",
		parse:  func(f *Filter, v string, _ input) error { f.Reason = v; return nil }, // exact, spaces included
		encode: func(f Filter) []string { return some(f.Reason) },
	},
	{
		name: "group", flag: "group", kind: oneValue,
		usage:  "only messages of this failure group (its id, as GET /api/v1/groups lists it)",
		parse:  func(f *Filter, v string, _ input) error { f.Group = strings.TrimSpace(v); return nil },
		encode: func(f Filter) []string { return some(f.Group) },
	},
	{
		// The command line's --q would be cryptic: it is --search there.
		name: "q", flag: "search", kind: oneValue,
		usage:  "only messages whose body text, reason, description or properties contain these words",
		parse:  func(f *Filter, v string, _ input) error { f.Query = v; return nil },
		encode: func(f Filter) []string { return some(f.Query) },
	},
	{
		name: "property", flag: "property", kind: manyValue,
		usage: "only messages whose application property key has this value, as key=value (repeatable)",
		parse: func(f *Filter, v string, in input) error {
			k, val, ok := strings.Cut(v, "=")
			if !ok || k == "" {
				return in.bad("property", "%s must be key=value (the key may not be empty), not %q", in.label("property"), v)
			}
			f.Properties = append(f.Properties, PropertyMatch{Key: k, Value: val})
			return nil
		},
		encode: func(f Filter) []string {
			var out []string
			for _, p := range f.Properties {
				out = append(out, p.Key+"="+p.Value)
			}
			return out
		},
		check: func(f Filter, in input) error {
			if len(f.Properties) > MaxPropertyMatches {
				return in.bad("property", "at most %d property filters, got %d", MaxPropertyMatches, len(f.Properties))
			}
			return nil
		},
	},
	{
		name: "since", flag: "since", kind: oneValue,
		usage:  "only messages enqueued at or after this RFC 3339 time, e.g. 2026-11-22T10:00:00Z",
		parse:  func(f *Filter, v string, in input) (err error) { f.Since, err = in.time("since", v); return err },
		encode: func(f Filter) []string { return someTime(f.Since) },
	},
	{
		name: "until", flag: "until", kind: oneValue,
		usage:  "only messages enqueued before this RFC 3339 time",
		parse:  func(f *Filter, v string, in input) (err error) { f.Until, err = in.time("until", v); return err },
		encode: func(f Filter) []string { return someTime(f.Until) },
		check: func(f Filter, in input) error {
			if f.Since != nil && f.Until != nil && !f.Until.After(*f.Since) {
				return in.bad("until", "%s (%s) must be after %s (%s)", in.label("until"), f.Until.Format(TimeFormat),
					in.label("since"), f.Since.Format(TimeFormat))
			}
			return nil
		},
	},
	{
		name: "include_gone", flag: "include-gone", kind: boolValue,
		usage:  "also messages the catalog saw leave the broker",
		parse:  func(f *Filter, v string, in input) error { return in.boolean("include_gone", v, &f.IncludeGone) },
		encode: func(f Filter) []string { return someBool(f.IncludeGone) },
	},
	{
		name: "all", flag: "all", kind: boolValue,
		usage:  "every message: no condition (export's default; a job's filter with no other condition must say it)",
		parse:  func(f *Filter, v string, in input) error { return in.boolean("all", v, &f.All) },
		encode: func(f Filter) []string { return someBool(f.All) },
	},
}

// boolean reads a boolValue key's value into b.
func (in input) boolean(name, v string, b *bool) error {
	switch strings.TrimSpace(v) {
	case "", "false", "0":
		*b = false
	case "true", "1":
		*b = true
	default:
		return in.bad(name, "%s must be true, false, 1 or 0, not %q", in.label(name), v)
	}
	return nil
}

func someBool(b bool) []string {
	if b {
		return []string{"true"}
	}
	return nil
}

// time reads a time: RFC 3339, or also a datetime-local value in UTC.
func (in input) time(name, v string) (*time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil && in.localTimes {
		for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999"} {
			if t, err = time.ParseInLocation(layout, v, time.UTC); err == nil {
				break
			}
		}
	}
	if err != nil {
		if in.localTimes {
			return nil, in.bad(name, "%s must be a date and time in UTC such as 2026-11-22T10:42, not %q", in.label(name), v)
		}
		return nil, in.bad(name, "%s must be an RFC 3339 time such as 2026-11-22T10:42:07Z, not %q", in.label(name), v)
	}
	// Forms write times in UTC (Encode, MarshalJSON): an offset that
	// moves one out of the years 0000-9999 would write a time no form
	// can read back (a job's kept filter among them).
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return nil, in.bad(name, "%s %q is outside the years 0000 to 9999 in UTC", in.label(name), v)
	}
	return &t, nil
}

func some(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func someTime(t *time.Time) []string {
	if t == nil {
		return nil
	}
	return []string{t.UTC().Format(TimeFormat)}
}
