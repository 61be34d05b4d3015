package broker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/sqlfilter"
)

func bodies(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = body(d)
	}
	return out
}

func TestSQLRulesRoute(t *testing.T) {
	ns, _ := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	sp := DefaultSubscriptionProperties()
	subs := map[string][]Rule{
		"param":  {{Name: "p", Kind: FilterSQL, SQLExpression: "color = @c AND quantity >= @min", Parameters: map[string]any{"@c": "red", "@min": 5}}},
		"sys":    {{Name: "s", Kind: FilterSQL, SQLExpression: "sys.Label LIKE 'ord%' AND sys.SequenceNumber > 1"}},
		"null":   {{Name: "n", Kind: FilterSQL, SQLExpression: "color IS NULL OR NOT EXISTS(quantity)"}},
		"notred": {{Name: "n", Kind: FilterSQL, SQLExpression: "NOT (color = 'red')"}}, // unknown for a message without color
		"typed":  {{Name: "x", Kind: FilterSQL, SQLExpression: "color = 1"}},           // an evaluation error selects nothing
		"corr":   {{Name: "c", Kind: FilterCorrelation, Correlation: &CorrelationFilter{To: "shop", ReplyTo: "r", ContentType: "application/json", ReplyToSessionID: "rs"}}},
	}
	for name, rules := range subs {
		_, err := ns.CreateSubscription("t", name, sp, rules...)
		mustNil(t, err)
	}
	label, to, replyTo, ct, rs := "orders", "shop", "r", "application/json", "rs"
	m1 := msg("m1") // red, 10, label orders, seq 1
	m1.Properties.Subject = &label
	m1.ApplicationProperties = map[string]any{"color": "red", "quantity": int32(10)}
	m2 := msg("m2") // blue, 10, label orders, seq 2
	m2.Properties.Subject = &label
	m2.ApplicationProperties = map[string]any{"color": "blue", "quantity": int64(10)}
	m3 := msg("m3") // red, 3, every correlation field
	m3.Properties.To, m3.Properties.ReplyTo, m3.Properties.ContentType, m3.Properties.ReplyToGroupID = &to, &replyTo, &ct, &rs
	m3.ApplicationProperties = map[string]any{"color": "red", "quantity": 3.0}
	m4 := msg("m4") // no properties
	mustSend(t, ns, "t", m1, m2, m3, m4)
	want := map[string][]string{
		"param":  {"m1"},
		"sys":    {"m2"},
		"null":   {"m4"},
		"notred": {"m2"},
		"typed":  {},
		"corr":   {"m3"},
	}
	for name, w := range want {
		if got := bodies(peekAll(t, ns, "t/Subscriptions/"+name)); !slices.Equal(got, w) {
			t.Errorf("%s: got %v, want %v", name, got, w)
		}
	}
}

func TestSQLRuleActions(t *testing.T) {
	ns, _ := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	sp := DefaultSubscriptionProperties()
	_, err := ns.CreateSubscription("t", "plain", sp)
	mustNil(t, err)
	_, err = ns.CreateSubscription("t", "act", sp, Rule{
		Name: "halve", Kind: FilterSQL, SQLExpression: "color = 'red'",
		Action:           "SET quantity = quantity / 2; REMOVE priority; SET sys.CorrelationId = @cid, SET sys.Label = sys.Label + '!'",
		ActionParameters: map[string]any{"@cid": "low"},
	})
	mustNil(t, err)
	// Two rules without actions and two with: a message matching all four
	// gives three messages (one plain, one per action).
	_, err = ns.CreateSubscription("t", "multi", sp,
		Rule{Name: "a", Kind: FilterTrue},
		Rule{Name: "b", Kind: FilterSQL, SQLExpression: "1=1"},
		Rule{Name: "x", Kind: FilterTrue, Action: "SET tag = 'x'"},
		Rule{Name: "y", Kind: FilterSQL, SQLExpression: "color = 'red'", Action: "SET tag = 'y'"},
	)
	mustNil(t, err)

	label := "L"
	m := msg("m1")
	m.Properties.Subject = &label
	m.ApplicationProperties = map[string]any{"color": "red", "quantity": int32(10), "priority": "high"}
	mustSend(t, ns, "t", m)

	plain := peekAll(t, ns, "t/Subscriptions/plain")
	if len(plain) != 1 {
		t.Fatalf("plain: %d messages", len(plain))
	}
	p := plain[0].Message
	if p.ApplicationProperties["quantity"] != int32(10) || p.ApplicationProperties["priority"] != "high" ||
		p.Properties.CorrelationID != nil || *p.Properties.Subject != "L" || p.ApplicationProperties[propRuleName] != nil {
		t.Errorf("another subscription's action leaked into plain: %+v %+v", p.ApplicationProperties, p.Properties)
	}

	act := peekAll(t, ns, "t/Subscriptions/act")
	if len(act) != 1 {
		t.Fatalf("act: %d messages", len(act))
	}
	a := act[0].Message
	if got := a.ApplicationProperties["quantity"]; got != int32(5) {
		t.Errorf("quantity = %#v, want int32(5)", got)
	}
	if _, ok := a.ApplicationProperties["priority"]; ok {
		t.Error("priority was not removed")
	}
	if a.Properties.CorrelationID != "low" || *a.Properties.Subject != "L!" {
		t.Errorf("system properties %+v", a.Properties)
	}
	if a.ApplicationProperties[propRuleName] != "halve" {
		t.Errorf("RuleName = %v", a.ApplicationProperties[propRuleName])
	}
	if act[0].SequenceNumber != plain[0].SequenceNumber {
		t.Errorf("copies in different subscriptions have seqs %d and %d", act[0].SequenceNumber, plain[0].SequenceNumber)
	}

	multi := peekAll(t, ns, "t/Subscriptions/multi")
	if len(multi) != 3 {
		t.Fatalf("multi: %d messages, want 3", len(multi))
	}
	var tags []any
	for _, d := range multi {
		tags = append(tags, d.Message.ApplicationProperties["tag"])
	}
	if tags[0] != nil || tags[1] != "x" || tags[2] != "y" {
		t.Errorf("tags %v, want [<nil> x y]", tags)
	}
	if s := seqs(multi); s[0] == s[1] || s[1] == s[2] || !slices.IsSorted(s) {
		t.Errorf("copies in one subscription share sequence numbers: %v", s)
	}
	// The next message still gets a fresh, higher number everywhere.
	mustSend(t, ns, "t", msg("m2"))
	if ds := peekAll(t, ns, "t/Subscriptions/plain"); ds[1].SequenceNumber <= multi[2].SequenceNumber {
		t.Errorf("next seq %d not above %d", ds[1].SequenceNumber, multi[2].SequenceNumber)
	}
}

func TestSQLRuleErrors(t *testing.T) {
	ns, _ := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	_, err := ns.CreateSubscription("t", "s", DefaultSubscriptionProperties())
	mustNil(t, err)
	for _, r := range []Rule{
		{Name: "bad", Kind: FilterSQL, SQLExpression: "color = "},
		{Name: "bad", Kind: FilterSQL, SQLExpression: "color = @p"}, // no parameter value
		{Name: "bad", Kind: FilterTrue, Action: "SET sys.SequenceNumber = 1"},
		{Name: "bad", Kind: FilterTrue, Action: "quantity = 1"},
	} {
		_, err := ns.CreateRule("t", "s", r)
		var se *sqlfilter.SyntaxError
		if !errors.Is(err, ErrInvalidProperties) || !errors.As(err, &se) {
			t.Errorf("CreateRule(%q / %q) = %v, want ErrInvalidProperties with a syntax error", r.SQLExpression, r.Action, err)
		}
	}
	// The bad rule was not stored, and an update is checked too.
	rs, err := ns.Rules("t", "s")
	mustNil(t, err)
	if len(rs) != 1 {
		t.Fatalf("rules %+v", rs)
	}
	_, err = ns.UpdateRule("t", "s", Rule{Name: "$Default", Kind: FilterSQL, SQLExpression: "a LIKE 1"})
	wantErr(t, err, ErrInvalidProperties)
	_, err = ns.CreateSubscription("t", "s2", DefaultSubscriptionProperties(), Rule{Name: "r", Kind: FilterSQL, SQLExpression: "sys.Nope = 1"})
	wantErr(t, err, ErrInvalidProperties)
}

func TestRuleMessageSystemProperties(t *testing.T) {
	id := goamqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sid := "sess"
	m := &goamqp.Message{
		Header:      &goamqp.MessageHeader{TTL: time.Minute, DeliveryCount: 0},
		Properties:  &goamqp.MessageProperties{MessageID: id, CorrelationID: "c", GroupID: &sid},
		Annotations: goamqp.Annotations{annPartitionKey: "pk"},
		Data:        [][]byte{[]byte("x")},
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for expr, want := range map[string]bool{
		"sys.MessageId = '01020304-0506-0708-090a-0b0c0d0e0f10'":  true,
		"sys.CorrelationId = 'c' AND sys.SessionId = 'sess'":      true,
		"sys.TimeToLive IS NOT NULL AND sys.To IS NULL":           true,
		"sys.SequenceNumber = 7 AND sys.DeliveryCount = 0":        true,
		"sys.EnqueuedTimeUtc = @at":                               true,
		"sys.ExpiresAtUtc - sys.EnqueuedTimeUtc = sys.TimeToLive": true,
		"sys.PartitionKey = 'pk' AND sys.Size > 0":                true,
		"sys.LockToken IS NULL AND sys.State = 0":                 true,
	} {
		f, err := sqlfilter.ParseFilter(expr, map[string]any{"@at": at})
		mustNil(t, err)
		got, err := f.Match(&ruleMessage{m: m, seq: 7, at: at.UnixNano(), size: -1})
		if got != want || err != nil {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
	// Setting system properties on a copy.
	c := &ruleMessage{m: cloneForAction(m)}
	a, err := sqlfilter.ParseAction("SET sys.To = 'x'; SET sys.MessageId = newid(); REMOVE sys.SessionId; SET sys.PartitionKey = 'p2'; SET sys.ContentType = 'text/plain'", nil)
	mustNil(t, err)
	mustNil(t, a.Apply(c))
	if *c.m.Properties.To != "x" || c.m.Properties.GroupID != nil || c.m.Annotations[annPartitionKey] != "p2" || *c.m.Properties.ContentType != "text/plain" {
		t.Errorf("copy %+v %+v", c.m.Properties, c.m.Annotations)
	}
	if u, ok := c.m.Properties.MessageID.(goamqp.UUID); !ok || u == id {
		t.Errorf("MessageId = %#v, want a new UUID", c.m.Properties.MessageID)
	}
	if m.Properties.To != nil || m.Properties.GroupID == nil || m.Annotations[annPartitionKey] != "pk" {
		t.Errorf("the original changed: %+v %+v", m.Properties, m.Annotations)
	}
}

// BenchmarkTopicFanOutSQL5 sends to a topic whose five subscriptions each
// have a SQL filter (two selecting the message, three not) and one a SQL
// action: the cost of evaluating SQL at fan-out, next to
// BenchmarkTopicFanOut5's true filters.
func BenchmarkTopicFanOutSQL5(b *testing.B) {
	ns := New(Options{})
	if _, err := ns.CreateTopic("t", DefaultTopicProperties()); err != nil {
		b.Fatal(err)
	}
	for name, r := range map[string]Rule{
		"a": {Name: "r", Kind: FilterSQL, SQLExpression: "color = 'red' AND quantity > 5"},
		"b": {Name: "r", Kind: FilterSQL, SQLExpression: "color IN ('blue', 'green') OR quantity < 0"},
		"c": {Name: "r", Kind: FilterSQL, SQLExpression: "sys.Label LIKE 'ord%'"},
		"d": {Name: "r", Kind: FilterSQL, SQLExpression: "NOT EXISTS(color)"},
		"e": {Name: "r", Kind: FilterSQL, SQLExpression: "quantity >= 10", Action: "SET quantity = quantity / 2"},
	} {
		if _, err := ns.CreateSubscription("t", name, DefaultSubscriptionProperties(), r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		m := benchMsg(1024)
		m.ApplicationProperties = map[string]any{"color": "red", "quantity": int64(10)}
		if err := ns.Send("t", m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFilterEvaluationExceptions: a SQL filter that fails to evaluate
// selects nothing; with DeadLetteringOnFilterEvaluationExceptions the
// message lands in that subscription's DLQ with reason FilterException.
func TestFilterEvaluationExceptions(t *testing.T) {
	ns, _ := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	bad := Rule{Name: "cmp", Kind: FilterSQL, SQLExpression: "quantity > 5"}
	_, err := ns.CreateSubscription("t", "quiet", DefaultSubscriptionProperties(), bad)
	mustNil(t, err)
	sp := DefaultSubscriptionProperties()
	sp.DeadLetteringOnFilterEvaluationExceptions = true
	_, err = ns.CreateSubscription("t", "dlq", sp, bad, Rule{Name: "all", Kind: FilterTrue})
	mustNil(t, err)

	ok := msg("ok")
	ok.ApplicationProperties = map[string]any{"quantity": int64(9)}
	wrong := msg("wrong")
	wrong.ApplicationProperties = map[string]any{"quantity": "nine"} // a string compared with a number
	mustSend(t, ns, "t", ok, wrong)

	if got := bodies(peekAll(t, ns, "t/Subscriptions/quiet")); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("quiet: %v", got)
	}
	if got := bodies(peekAll(t, ns, "t/Subscriptions/dlq")); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("dlq main: %v", got)
	}
	dl := peekAll(t, ns, "t/Subscriptions/dlq/$DeadLetterQueue")
	if len(dl) != 1 || body(dl[0]) != "wrong" {
		t.Fatalf("dlq dead letters: %v", bodies(dl))
	}
	props := dl[0].Message.ApplicationProperties
	if props[propDeadLetterReason] != filterExceptionReason || !strings.Contains(props[propDeadLetterDescription].(string), "cannot order a string and an integer") {
		t.Errorf("dead-letter properties %v", props)
	}
	si, err := ns.Subscription("t", "dlq")
	mustNil(t, err)
	if got := si.Counts; got.DeadLetter != 1 || got.Active != 1 {
		t.Errorf("counts %+v", got)
	}
}
