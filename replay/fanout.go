package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dlqdash/dlqdash/dlq"
)

// SubscriptionLister is a Broker that lists a topic's subscriptions with
// their rules (package servicebus's Client does, over the admin API): who
// receives a copy sent to a topic, which a plan says in words.
type SubscriptionLister interface {
	// Subscriptions lists topic's subscriptions in the admin API's
	// order; their rules are read (one request each) only when the topic
	// has at most rulesUpTo subscriptions, else RulesRead is false.
	Subscriptions(ctx context.Context, topic string, rulesUpTo int) ([]Subscription, error)
}

// RulesUpTo is how many subscriptions a plan reads the rules of: a topic
// with more is described by its subscriptions' names alone (each
// subscription's rules cost one request of the admin API).
const RulesUpTo = 20

// Subscription is one subscription of a topic.
type Subscription struct {
	Name string
	// Rules are its rules' filters (read when RulesRead).
	Rules     []Rule
	RulesRead bool
	// Copies is how many of the plan's copies to its topic the
	// subscription takes, when that is known exactly (CopiesKnown): its
	// rules are true, false or correlation filters, evaluated against each
	// selected message (the whole selection fits in the dry run's sample,
	// and no edit changes the properties). Of is how many copies go to the
	// topic.
	Copies, Of  int
	CopiesKnown bool
}

// Rule is one rule of a subscription: its name and filter.
type Rule struct {
	Name string
	// Kind is the filter's kind: true (every message), false (none), sql,
	// correlation, or unknown.
	Kind RuleKind
	// Filter is a sql filter's expression, or a correlation filter's
	// conditions in words (`subject = "x" and region = "eu"`); empty
	// otherwise.
	Filter string
	// Correlation is a correlation filter's conditions, which a plan
	// evaluates against the selected messages (nil for other kinds).
	Correlation *Correlation
}

// Correlation is a correlation filter: every condition must hold.
type Correlation struct {
	// System are the system properties it compares, by these names:
	// correlation_id, message_id, subject, to, reply_to,
	// reply_to_session_id, session_id, content_type.
	System map[string]string
	// Properties are application properties that must be present with an
	// equal value (strings, numbers, booleans).
	Properties map[string]any
}

// matches reports whether a copy of rec meets the filter. A copy carries a
// new MessageId (the original's + "/dlqdash-<job>"), so a condition on the
// message id never holds for it.
func (c *Correlation) matches(rec dlq.Record, props map[string]any) bool {
	for name, want := range c.System {
		var got *string
		switch name {
		case "correlation_id":
			got = rec.CorrelationID
		case "subject":
			got = rec.Subject
		case "to":
			got = rec.To
		case "reply_to":
			got = rec.ReplyTo
		case "reply_to_session_id":
			got = rec.ReplyToSessionID
		case "session_id":
			got = rec.SessionID
		case "content_type":
			got = rec.ContentType
		}
		if got == nil || *got != want {
			return false
		}
	}
	for k, want := range c.Properties {
		got, ok := props[k]
		if !ok || !sameValue(got, want) {
			return false
		}
	}
	return true
}

// sameValue compares a property as the catalog keeps it (decoded JSON with
// numbers as json.Number) with a filter's value.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	}
	n, ok := got.(json.Number)
	if !ok {
		return false
	}
	g, err := n.Float64()
	if err != nil {
		return false
	}
	switch w := want.(type) {
	case int:
		return g == float64(w)
	case int32:
		return g == float64(w)
	case int64:
		return g == float64(w)
	case float64:
		return g == w
	case float32:
		return g == float64(w)
	}
	return false
}

// countCopies sets, for each subscription whose rules can be evaluated,
// how many of recs' copies it takes.
func countCopies(subs []Subscription, recs []dlq.Record) {
	props := make([]map[string]any, len(recs))
	for i, r := range recs {
		dec := json.NewDecoder(bytes.NewReader(r.ApplicationProperties))
		dec.UseNumber()
		if len(r.ApplicationProperties) == 0 || dec.Decode(&props[i]) != nil {
			props[i] = nil
		}
	}
	for i := range subs {
		s := &subs[i]
		if !s.RulesRead {
			continue
		}
		if s.Receives() == ReceivesAll {
			s.Copies, s.Of, s.CopiesKnown = len(recs), len(recs), true // a true filter takes every copy
			continue
		}
		if slices.ContainsFunc(s.Rules, func(r Rule) bool {
			return !(r.Kind == RuleTrue || r.Kind == RuleFalse || r.Kind == RuleCorrelation && r.Correlation != nil ||
				r.Kind == RuleSQL && (isTrueSQL(r.Filter) || isFalseSQL(r.Filter)))
		}) {
			continue // a SQL filter: not evaluated here
		}
		n := 0
		for j, rec := range recs {
			if slices.ContainsFunc(s.Rules, func(r Rule) bool {
				switch {
				case r.Kind == RuleTrue || r.Kind == RuleSQL && isTrueSQL(r.Filter):
					return true
				case r.Kind == RuleCorrelation:
					return r.Correlation.matches(rec, props[j])
				}
				return false
			}) {
				n++
			}
		}
		s.Copies, s.Of, s.CopiesKnown = n, len(recs), true
	}
}

// RuleKind is the kind of a rule's filter.
type RuleKind string

// The kinds of filter.
const (
	RuleTrue        RuleKind = "true"
	RuleFalse       RuleKind = "false"
	RuleSQL         RuleKind = "sql"
	RuleCorrelation RuleKind = "correlation"
	RuleUnknown     RuleKind = "unknown"
)

// Receives says which copies a subscription gets.
type Receives string

// What a subscription receives of the copies sent to its topic.
const (
	// ReceivesAll: a rule with a true filter (the default rule, $Default
	// 1=1) takes every copy.
	ReceivesAll Receives = "all"
	// ReceivesNone: no rule, or only false filters: no copy.
	ReceivesNone Receives = "none"
	// ReceivesIfMatch: a copy arrives when one of the rules' filters
	// matches it (the copy carries the original's properties, so the
	// original would have matched the same way, unless the rules changed
	// since or an edit changed the properties).
	ReceivesIfMatch Receives = "if_filter_matches"
	// ReceivesUnknown: the rules were not read.
	ReceivesUnknown Receives = "unknown"
)

// Receives is what the subscription gets of the copies sent to its topic.
func (s Subscription) Receives() Receives {
	if !s.RulesRead {
		return ReceivesUnknown
	}
	out := ReceivesNone
	for _, r := range s.Rules {
		switch {
		case r.Kind == RuleTrue || r.Kind == RuleSQL && isTrueSQL(r.Filter):
			return ReceivesAll
		case r.Kind == RuleFalse || r.Kind == RuleSQL && isFalseSQL(r.Filter):
		default:
			out = ReceivesIfMatch
		}
	}
	return out
}

// isTrueSQL and isFalseSQL know the expressions Service Bus writes for its
// true and false filters.
func isTrueSQL(expr string) bool {
	e := strings.ToLower(strings.Join(strings.Fields(expr), ""))
	return e == "1=1" || e == "true"
}

func isFalseSQL(expr string) bool {
	e := strings.ToLower(strings.Join(strings.Fields(expr), ""))
	return e == "1=0" || e == "false"
}

// FanOutWords says in words who receives a copy sent to a topic: the
// subscriptions that take every copy, and those that take the copies their
// filters match, by name. Nothing when the list is empty.
func FanOutWords(topic string, subs []Subscription) string {
	if len(subs) == 0 {
		return fmt.Sprintf("the topic %s has no subscriptions: a copy sent there reaches nobody", topic)
	}
	var all, match, unknown, none, some []string
	for _, s := range subs {
		if s.CopiesKnown {
			switch {
			case s.Copies == s.Of:
				all = append(all, s.Name)
			case s.Copies == 0:
				none = append(none, s.Name)
			default:
				some = append(some, fmt.Sprintf("%s takes %d of the %d copies (its filter matches those)", s.Name, s.Copies, s.Of))
			}
			continue
		}
		switch s.Receives() {
		case ReceivesAll:
			all = append(all, s.Name)
		case ReceivesIfMatch:
			match = append(match, s.Name)
		case ReceivesNone:
			none = append(none, s.Name)
		default:
			unknown = append(unknown, s.Name)
		}
	}
	var parts []string
	if len(all) > 0 {
		parts = append(parts, "every copy reaches "+nameList(all))
	}
	if len(match) > 0 {
		parts = append(parts, "a copy reaches "+nameList(match)+" when "+theirFilter(len(match))+" matches it")
	}
	if len(unknown) > 0 {
		parts = append(parts, "a copy reaches every subscription whose filter matches it: "+nameList(unknown))
	}
	parts = append(parts, some...)
	if len(none) > 0 {
		parts = append(parts, nameList(none)+" "+receiveVerb(len(none))+" none (no rule takes them)")
	}
	return "copies sent to the topic " + topic + ": " + strings.Join(parts, "; ")
}

func theirFilter(n int) string {
	if n == 1 {
		return "its filter"
	}
	return "its own filter"
}

func receiveVerb(n int) string {
	if n == 1 {
		return "receives"
	}
	return "receive"
}

// nameList is "a", "a and b", "a, b and c"; past 10 names, "a, b, … and
// 12 more".
func nameList(names []string) string {
	const show = 10
	switch {
	case len(names) == 1:
		return names[0]
	case len(names) <= show:
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
}
