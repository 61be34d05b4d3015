package broker

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/sqlfilter"
)

// normalizeRule validates r, fills CreatedAt, parses its SQL filter and
// action (a bad expression is an ErrInvalidProperties wrapping the
// *sqlfilter.SyntaxError) and deep-copies the maps so the caller's are not
// shared.
func normalizeRule(r Rule, now int64) (Rule, error) {
	if r.Name == "" || strings.Contains(r.Name, "/") {
		return r, fmt.Errorf("rule %q: %w", r.Name, ErrInvalidProperties)
	}
	r = copyRule(r)
	r.filter, r.action = nil, nil
	switch r.Kind {
	case FilterTrue, FilterFalse:
	case FilterSQL:
		f, err := sqlfilter.ParseFilter(r.SQLExpression, r.Parameters)
		if err != nil {
			return r, fmt.Errorf("rule %q: SQL filter: %w: %w", r.Name, err, ErrInvalidProperties)
		}
		r.filter = f
	case FilterCorrelation:
		if r.Correlation == nil {
			return r, fmt.Errorf("rule %q: correlation filter missing: %w", r.Name, ErrInvalidProperties)
		}
	default:
		return r, fmt.Errorf("rule %q: filter kind %d: %w", r.Name, r.Kind, ErrInvalidProperties)
	}
	if strings.TrimSpace(r.Action) != "" {
		a, err := sqlfilter.ParseAction(r.Action, r.ActionParameters)
		if err != nil {
			return r, fmt.Errorf("rule %q: SQL action: %w: %w", r.Name, err, ErrInvalidProperties)
		}
		r.action = a
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = unixTime(now)
	}
	return r, nil
}

func copyRule(r Rule) Rule {
	if r.Correlation != nil {
		c := *r.Correlation
		c.Properties = maps.Clone(c.Properties)
		r.Correlation = &c
	}
	r.Parameters = maps.Clone(r.Parameters)
	r.ActionParameters = maps.Clone(r.ActionParameters)
	return r
}

// matches reports whether rule r selects m; view gives the message as the
// SQL language sees it, built only when a SQL filter needs it. A SQL
// filter that fails to evaluate (a filter exception in Azure) does not
// select the message and returns the error.
func (r *Rule) matches(m *goamqp.Message, view func() *ruleMessage) (bool, error) {
	switch r.Kind {
	case FilterTrue:
		return true, nil
	case FilterFalse:
		return false, nil
	case FilterSQL:
		ok, err := r.filter.Match(view())
		return ok && err == nil, err
	case FilterCorrelation:
		return r.Correlation.matches(m), nil
	}
	return false, nil
}

func strField(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func idString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case goamqp.UUID:
		return uuidString(v)
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

func (c *CorrelationFilter) matches(m *goamqp.Message) bool {
	p := m.Properties
	if p == nil {
		p = &goamqp.MessageProperties{}
	}
	checks := []struct{ want, got string }{
		{c.ContentType, strField(p.ContentType)},
		{c.Subject, strField(p.Subject)},
		{c.ReplyTo, strField(p.ReplyTo)},
		{c.ReplyToSessionID, strField(p.ReplyToGroupID)},
		{c.SessionID, strField(p.GroupID)},
		{c.To, strField(p.To)},
	}
	for _, ch := range checks {
		if ch.want != "" && ch.want != ch.got {
			return false
		}
	}
	if c.CorrelationID != "" && c.CorrelationID != idString(p.CorrelationID) {
		return false
	}
	if c.MessageID != "" && c.MessageID != idString(p.MessageID) {
		return false
	}
	for k, want := range c.Properties {
		got, ok := m.ApplicationProperties[k]
		if !ok || !valuesEqual(want, got) {
			return false
		}
	}
	return true
}

// valuesEqual compares application property values, treating numbers of
// different Go types as equal when their values are.
func valuesEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int8:
		return float64(v), true
	case int16:
		return float64(v), true
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint8:
		return float64(v), true
	case uint16:
		return float64(v), true
	case uint32:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// matchAny reports whether any rule of a subscription selects m, as if
// it were enqueued now. Caller holds the topic's mu.
func matchAny(rules []Rule, m *goamqp.Message, now int64) bool {
	var v *ruleMessage
	view := func() *ruleMessage {
		if v == nil {
			v = &ruleMessage{m: m, at: now, size: -1}
		}
		return v
	}
	for i := range rules {
		if ok, _ := rules[i].matches(m, view); ok {
			return true
		}
	}
	return false
}

// propRuleName is the application property Azure adds to the copy a rule
// with an action produces (topic-filters: "a property called RuleName").
const propRuleName = "RuleName"

// route applies a subscription's rules to m, to be enqueued under seq at
// `at` (unix ns): plain reports that some rule without an action selects
// m (the subscription gets m itself, once, however many such rules
// match); copies holds one private copy per matching rule with an action,
// the action applied and RuleName set. An action that fails part way
// leaves its copy with the statements before the failure applied
// (emulator choice). failed is the first SQL filter evaluation error (the
// rule did not select m). Caller holds the topic's mu.
func route(rules []Rule, m *goamqp.Message, seq, at int64, size int32) (plain bool, copies []*goamqp.Message, failed error) {
	var v *ruleMessage // allocated only for a SQL filter (it escapes)
	view := func() *ruleMessage {
		if v == nil {
			v = &ruleMessage{m: m, seq: seq, at: at, size: size}
		}
		return v
	}
	for i := range rules {
		r := &rules[i]
		ok, err := r.matches(m, view)
		if err != nil && failed == nil {
			failed = fmt.Errorf("rule %s: %w", r.Name, err)
		}
		if !ok {
			continue
		}
		if r.action == nil {
			plain = true
			continue
		}
		c := &ruleMessage{m: cloneForAction(m), seq: seq, at: at, size: size}
		_ = r.action.Apply(c)
		c.SetUser(propRuleName, r.Name)
		copies = append(copies, c.m)
	}
	return plain, copies, failed
}

// filterExceptionReason is the DeadLetterReason of a message whose
// subscription's SQL filter failed to evaluate (Azure: the name of the
// exception type, FilterException for filter evaluation).
const filterExceptionReason = "FilterException"

// CreateRule adds a rule to a subscription.
func (ns *Namespace) CreateRule(topicName, sub string, r Rule) (Rule, error) {
	r, err := normalizeRule(r, ns.nowNano())
	if err != nil {
		return Rule{}, err
	}
	t, s, err := ns.subscription(topicName, sub)
	if err != nil {
		return Rule{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices.ContainsFunc(s.rules, func(x Rule) bool { return strings.EqualFold(x.Name, r.Name) }) {
		return Rule{}, fmt.Errorf("rule %q: %w", r.Name, ErrAlreadyExists)
	}
	s.rules = append(slices.Clip(s.rules), r)
	s.touch(ns.nowNano())
	return copyRule(r), nil
}

// UpdateRule replaces a rule (matched by name); CreatedAt is kept.
func (ns *Namespace) UpdateRule(topicName, sub string, r Rule) (Rule, error) {
	t, s, err := ns.subscription(topicName, sub)
	if err != nil {
		return Rule{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(s.rules, func(x Rule) bool { return strings.EqualFold(x.Name, r.Name) })
	if i < 0 {
		return Rule{}, fmt.Errorf("rule %q: %w", r.Name, ErrNotFound)
	}
	r.Name = s.rules[i].Name
	r.CreatedAt = s.rules[i].CreatedAt
	r, err = normalizeRule(r, ns.nowNano())
	if err != nil {
		return Rule{}, err
	}
	rules := slices.Clone(s.rules)
	rules[i] = r
	s.rules = rules
	s.touch(ns.nowNano())
	return copyRule(r), nil
}

// DeleteRule removes a rule.
func (ns *Namespace) DeleteRule(topicName, sub, name string) error {
	t, s, err := ns.subscription(topicName, sub)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(s.rules, func(x Rule) bool { return strings.EqualFold(x.Name, name) })
	if i < 0 {
		return fmt.Errorf("rule %q: %w", name, ErrNotFound)
	}
	s.rules = slices.Delete(slices.Clone(s.rules), i, i+1)
	s.touch(ns.nowNano())
	return nil
}

// Rule returns one rule.
func (ns *Namespace) Rule(topicName, sub, name string) (Rule, error) {
	t, s, err := ns.subscription(topicName, sub)
	if err != nil {
		return Rule{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(s.rules, func(x Rule) bool { return strings.EqualFold(x.Name, name) })
	if i < 0 {
		return Rule{}, fmt.Errorf("rule %q: %w", name, ErrNotFound)
	}
	return copyRule(s.rules[i]), nil
}

// Rules returns a subscription's rules in creation order.
func (ns *Namespace) Rules(topicName, sub string) ([]Rule, error) {
	t, s, err := ns.subscription(topicName, sub)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		out[i] = copyRule(r)
	}
	return out, nil
}
