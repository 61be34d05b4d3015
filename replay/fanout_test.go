package replay

import (
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
)

// countCopies evaluates true, false and correlation filters against each
// message (system properties and application properties, numbers across
// types); a SQL filter leaves the count unknown; a condition on the message
// id never holds for a copy (it gets a new one).
func TestCountCopies(t *testing.T) {
	str := func(s string) *string { return &s }
	recs := []dlq.Record{
		{Message: dlq.Message{MessageID: "a", Subject: str("OrderPlaced"), ApplicationProperties: dlq.EncodeProperties(map[string]any{"region": "EU", "tier": int64(2)})}},
		{Message: dlq.Message{MessageID: "b", Subject: str("OrderPlaced"), ApplicationProperties: dlq.EncodeProperties(map[string]any{"region": "US", "tier": 2.5})}},
		{Message: dlq.Message{MessageID: "c"}},
	}
	corr := func(sys map[string]string, props map[string]any) []Rule {
		return []Rule{{Kind: RuleCorrelation, Correlation: &Correlation{System: sys, Properties: props}}}
	}
	subs := []Subscription{
		{Name: "all", RulesRead: true, Rules: []Rule{{Kind: RuleTrue}}},
		{Name: "sql-true", RulesRead: true, Rules: []Rule{{Kind: RuleSQL, Filter: " 1 = 1 "}}},
		{Name: "off", RulesRead: true, Rules: []Rule{{Kind: RuleFalse}}},
		{Name: "no-rules", RulesRead: true},
		{Name: "eu", RulesRead: true, Rules: corr(nil, map[string]any{"region": "EU"})},
		{Name: "placed", RulesRead: true, Rules: corr(map[string]string{"subject": "OrderPlaced"}, nil)},
		{Name: "tier-2", RulesRead: true, Rules: corr(nil, map[string]any{"tier": int32(2)})},
		{Name: "tier-2.5-or-eu", RulesRead: true, Rules: append(corr(nil, map[string]any{"tier": 2.5}), corr(nil, map[string]any{"region": "EU"})...)},
		{Name: "by-id", RulesRead: true, Rules: corr(map[string]string{"message_id": "a"}, nil)},
		{Name: "string-2", RulesRead: true, Rules: corr(nil, map[string]any{"tier": "2"})},
		{Name: "sql-or-true", RulesRead: true, Rules: []Rule{{Kind: RuleSQL, Filter: "tier > 1"}, {Kind: RuleTrue}}},
		{Name: "sql", RulesRead: true, Rules: []Rule{{Kind: RuleSQL, Filter: "tier > 1"}, {Kind: RuleCorrelation, Correlation: &Correlation{}}}},
		{Name: "unread"},
	}
	countCopies(subs, recs)
	want := map[string]int{"all": 3, "sql-true": 3, "off": 0, "no-rules": 0, "eu": 1, "placed": 2, "tier-2": 1, "tier-2.5-or-eu": 2,
		"by-id": 0, "string-2": 0, "sql-or-true": 3, "sql": -1, "unread": -1}
	for _, s := range subs {
		got := -1
		if s.CopiesKnown {
			got = s.Copies
			if s.Of != 3 {
				t.Errorf("%s: of %d, want 3", s.Name, s.Of)
			}
		}
		if got != want[s.Name] {
			t.Errorf("%s takes %d copies, want %d", s.Name, got, want[s.Name])
		}
	}
	words := FanOutWords("orders", subs)
	for _, w := range []string{"every copy reaches all, sql-true and sql-or-true", "placed takes 2 of the 3 copies", "eu takes 1 of the 3 copies",
		"a copy reaches sql when its filter matches it", "a copy reaches every subscription whose filter matches it: unread",
		"off, no-rules, by-id and string-2 receive none"} {
		if !strings.Contains(words, w) {
			t.Errorf("%q does not say %q", words, w)
		}
	}
	if got := FanOutWords("t", nil); !strings.Contains(got, "no subscriptions") {
		t.Errorf("no subscriptions: %q", got)
	}
	names := make([]string, 12)
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	if got := nameList(names); got != "a, b, c, d, e, f, g, h, i, j and 2 more" {
		t.Errorf("nameList of 12: %q", got)
	}
}
