package emulator_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/config"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// receiveAll takes every message of a subscription (receive-and-delete):
// it waits for want messages, then checks that nothing more arrives.
func receiveAll(ctx context.Context, t *testing.T, c *azservicebus.Client, topic, sub string, want int) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForSubscription(topic, sub, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	var got []*azservicebus.ReceivedMessage
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msgs, err := r.ReceiveMessages(rctx, want-len(got), nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: receive: %v", sub, err)
		}
		got = append(got, msgs...)
	}
	extra, err := r.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatalf("%s: peek: %v", sub, err)
	}
	if len(got) != want || len(extra) != 0 {
		t.Fatalf("%s: received %d messages (%d more left), want %d", sub, len(got), len(extra), want)
	}
	slices.SortFunc(got, func(a, b *azservicebus.ReceivedMessage) int { return strings.Compare(string(a.Body), string(b.Body)) })
	return got
}

func bodiesOf(msgs []*azservicebus.ReceivedMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

// TestSQLFiltersAndActionsThroughTheSDK: subscriptions with SQL filters
// (parameters, three-valued logic), a SQL action and a correlation filter
// on every field, all made with the SDK's admin client, get exactly the
// messages their rules select, the action's changes only in its own
// subscription; a bad expression is a 400 worded as Azure words it.
func TestSQLFiltersAndActionsThroughTheSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	emu := emulatortest.Start(t, emulator.Config{})
	c, ac := newClients(t, emu)
	const topic = "orders"
	if _, err := ac.CreateTopic(ctx, topic, nil); err != nil {
		t.Fatal(err)
	}
	redFilter := &admin.SQLFilter{
		Expression: "color = @c AND quantity > @min",
		Parameters: map[string]any{"@c": "red", "@min": int64(5)},
	}
	subs := map[string]*admin.RuleProperties{
		"all":    nil,
		"red":    {Name: "red", Filter: redFilter},
		"notred": {Name: "notred", Filter: &admin.SQLFilter{Expression: "NOT (user.color = 'red')"}},
		"sys":    {Name: "sys", Filter: &admin.SQLFilter{Expression: "sys.Label LIKE 'big!_%' ESCAPE '!' OR sys.MessageId IN ('m2')"}},
		"corr": {Name: "corr", Filter: &admin.CorrelationFilter{
			ContentType: to.Ptr("application/json"), CorrelationID: to.Ptr("cid"), MessageID: to.Ptr("m4"),
			ReplyTo: to.Ptr("replies"), ReplyToSessionID: to.Ptr("rs"), SessionID: to.Ptr("s1"), Subject: to.Ptr("big_order"),
			To: to.Ptr("shop"), ApplicationProperties: map[string]any{"region": "eu"},
		}},
	}
	for name, rule := range subs {
		if _, err := ac.CreateSubscription(ctx, topic, name, &admin.CreateSubscriptionOptions{
			Properties: &admin.SubscriptionProperties{DefaultRule: rule}}); err != nil {
			t.Fatalf("create subscription %s: %v", name, err)
		}
	}
	// The parameters come back as they were sent.
	got, err := ac.GetRule(ctx, topic, "red", "red", nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := got.Filter.(*admin.SQLFilter); !ok || f.Expression != redFilter.Expression ||
		f.Parameters["@c"] != "red" || f.Parameters["@min"] != int64(5) {
		t.Fatalf("GetRule(red) filter = %#v", got.Filter)
	}

	// A subscription whose only rule has an action.
	if _, err := ac.CreateSubscription(ctx, topic, "halve", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.DeleteRule(ctx, topic, "halve", "$Default", nil); err != nil {
		t.Fatal(err)
	}
	action := &admin.SQLAction{
		Expression: "SET quantity = quantity / 2; REMOVE priority; SET sys.CorrelationId = @cid",
		Parameters: map[string]any{"@cid": "low"},
	}
	created, err := ac.CreateRule(ctx, topic, "halve", &admin.CreateRuleOptions{
		Name: to.Ptr("halve-red"), Filter: &admin.SQLFilter{Expression: "user.color = 'red'"}, Action: action})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := created.Action.(*admin.SQLAction); !ok || a.Expression != action.Expression || a.Parameters["@cid"] != "low" {
		t.Fatalf("CreateRule action = %#v", created.Action)
	}

	// Bad expressions are refused with Azure's words and the position.
	for _, bad := range []admin.CreateRuleOptions{
		{Name: to.Ptr("bad1"), Filter: &admin.SQLFilter{Expression: "color = 'red' AND"}},
		{Name: to.Ptr("bad2"), Filter: &admin.SQLFilter{Expression: "color = @nope"}},
		{Name: to.Ptr("bad3"), Action: &admin.SQLAction{Expression: "quantity = 1"}},
	} {
		_, err := ac.CreateRule(ctx, topic, "halve", &bad)
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest ||
			!strings.Contains(err.Error(), "There was an error parsing the SQL expression. [Token line=1, column=") {
			t.Errorf("CreateRule(%s) = %v, want a 400 naming the position", *bad.Name, err)
		}
	}

	s, err := c.NewSender(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	send := func(m *azservicebus.Message) {
		t.Helper()
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	send(&azservicebus.Message{Body: []byte("m1"), MessageID: to.Ptr("m1"), Subject: to.Ptr("big_one"),
		ApplicationProperties: map[string]any{"color": "red", "quantity": int64(10), "priority": "high"}})
	send(&azservicebus.Message{Body: []byte("m2"), MessageID: to.Ptr("m2"),
		ApplicationProperties: map[string]any{"color": "blue", "quantity": int64(10)}})
	send(&azservicebus.Message{Body: []byte("m3"), MessageID: to.Ptr("m3"), Subject: to.Ptr("bigXone"),
		ApplicationProperties: map[string]any{"color": "red", "quantity": int64(3)}})
	send(&azservicebus.Message{Body: []byte("m4"), MessageID: to.Ptr("m4"), ContentType: to.Ptr("application/json"),
		CorrelationID: to.Ptr("cid"), ReplyTo: to.Ptr("replies"), ReplyToSessionID: to.Ptr("rs"), SessionID: to.Ptr("s1"),
		Subject: to.Ptr("big_order"), To: to.Ptr("shop"), ApplicationProperties: map[string]any{"region": "eu"}})
	send(&azservicebus.Message{Body: []byte("m5"), SessionID: to.Ptr("s1"), To: to.Ptr("shop"), // corr: all but one field
		ContentType: to.Ptr("application/json"), CorrelationID: to.Ptr("cid"), MessageID: to.Ptr("m4"),
		ReplyTo: to.Ptr("replies"), ReplyToSessionID: to.Ptr("rs"), Subject: to.Ptr("big_order"),
		ApplicationProperties: map[string]any{"region": "us"}})

	want := map[string][]string{
		"all":    {"m1", "m2", "m3", "m4", "m5"},
		"red":    {"m1"},
		"notred": {"m2"}, // m4, m5: no color, NOT unknown is unknown
		"sys":    {"m1", "m2", "m4", "m5"},
		"corr":   {"m4"},
		"halve":  {"m1", "m3"},
	}
	for sub, w := range want {
		msgs := receiveAll(ctx, t, c, topic, sub, len(w))
		if got := bodiesOf(msgs); !slices.Equal(got, w) {
			t.Errorf("%s got %v, want %v", sub, got, w)
		}
		switch sub {
		case "halve":
			for i, wantQ := range []int64{5, 1} {
				m := msgs[i]
				if m.ApplicationProperties["quantity"] != wantQ || m.CorrelationID == nil || *m.CorrelationID != "low" ||
					m.ApplicationProperties["RuleName"] != "halve-red" {
					t.Errorf("halve %s: properties %v, correlation id %v", m.Body, m.ApplicationProperties, m.CorrelationID)
				}
				if _, ok := m.ApplicationProperties["priority"]; ok {
					t.Errorf("halve %s: priority not removed", m.Body)
				}
			}
		case "all":
			m1 := msgs[0]
			if m1.ApplicationProperties["quantity"] != int64(10) || m1.ApplicationProperties["priority"] != "high" || m1.CorrelationID != nil {
				t.Errorf("the action changed another subscription's copy: %v %v", m1.ApplicationProperties, m1.CorrelationID)
			}
		}
	}
}

// TestSQLRuleParametersRoundTrip: a rule's filter and action parameters of
// every type the SDK sends (string, int, double, dateTime, boolean) come
// back equal from CreateRule, UpdateRule and GetRule, as the SDK's own
// rule CRUD test expects of Azure.
func TestSQLRuleParametersRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	emu := emulatortest.Start(t, emulator.Config{})
	_, ac := newClients(t, emu)
	if _, err := ac.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateSubscription(ctx, "t", "sub", nil); err != nil {
		t.Fatal(err)
	}
	dt := time.Date(2001, 1, 1, 1, 2, 3, 0, time.UTC)
	params := map[string]any{"@stringVar": "hello world", "@intVar": int64(100), "@floatVar": 100.1, "@dateTimeVar": dt, "@boolVar": true}
	rp := admin.RuleProperties{
		Name: "ruleWithFilterAndAction",
		Filter: &admin.SQLFilter{
			Expression: "MessageID=@stringVar OR MessageID=@intVar OR MessageID=@floatVar OR MessageID=@dateTimeVar OR MessageID=@boolVar",
			Parameters: params,
		},
		Action: &admin.SQLAction{
			Expression: "SET MessageID=@stringVar SET MessageID=@intVar SET MessageID=@floatVar SET MessageID=@dateTimeVar SET MessageID=@boolVar",
			Parameters: params,
		},
	}
	created, err := ac.CreateRule(ctx, "t", "sub", &admin.CreateRuleOptions{Name: &rp.Name, Filter: rp.Filter, Action: rp.Action})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := ac.UpdateRule(ctx, "t", "sub", created.RuleProperties)
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := ac.GetRule(ctx, "t", "sub", rp.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]admin.RuleProperties{"created": created.RuleProperties, "updated": updated.RuleProperties, "fetched": fetched.RuleProperties} {
		f, ok1 := got.Filter.(*admin.SQLFilter)
		a, ok2 := got.Action.(*admin.SQLAction)
		if !ok1 || !ok2 || got.Name != rp.Name || f.Expression != rp.Filter.(*admin.SQLFilter).Expression || a.Expression != rp.Action.(*admin.SQLAction).Expression {
			t.Fatalf("%s rule %#v", what, got)
		}
		for k, want := range params {
			if fv, av := f.Parameters[k], a.Parameters[k]; fv != want || av != want {
				t.Errorf("%s %s: filter %#v, action %#v, want %#v", what, k, fv, av, want)
			}
		}
		if len(f.Parameters) != len(params) || len(a.Parameters) != len(params) {
			t.Errorf("%s: %d filter and %d action parameters, want %d", what, len(f.Parameters), len(a.Parameters), len(params))
		}
	}
}

// TestSQLRulesFromConfigFile: rules in Microsoft's Config.json format (a
// SQL filter with an action, a correlation filter) route as the same rules
// made over the admin API do.
func TestSQLRulesFromConfigFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	entities, err := config.Parse(strings.NewReader(`{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Topics":[{"Name":"topic.1",
		"Subscriptions":[
			{"Name":"sql","Rules":[{"Name":"big","Properties":{"FilterType":"Sql",
				"SqlFilter":{"SqlExpression":"sys.MessageId = '123456' AND userProp1 = 'value1'"},
				"Action":{"SqlExpression":"SET sys.To = 'Entity'; SET seen = TRUE"}}}]},
			{"Name":"corr","Rules":[{"Name":"c","Properties":{"FilterType":"Correlation",
				"CorrelationFilter":{"Label":"subject1","Properties":{"prop3":"value3"}}}}]}]}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	emu := emulatortest.Start(t, emulator.Config{Entities: entities})
	c, _ := newClients(t, emu)
	s, err := c.NewSender("topic.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, m := range []*azservicebus.Message{
		{Body: []byte("a"), MessageID: to.Ptr("123456"), ApplicationProperties: map[string]any{"userProp1": "value1"}},
		{Body: []byte("b"), MessageID: to.Ptr("123457"), ApplicationProperties: map[string]any{"userProp1": "value1"}},
		{Body: []byte("c"), Subject: to.Ptr("subject1"), ApplicationProperties: map[string]any{"prop3": "value3"}},
	} {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	sql := receiveAll(ctx, t, c, "topic.1", "sql", 1)
	if m := sql[0]; string(m.Body) != "a" || m.To == nil || *m.To != "Entity" || m.ApplicationProperties["seen"] != true {
		t.Errorf("sql got %s, to %v, properties %v", m.Body, m.To, m.ApplicationProperties)
	}
	if got := bodiesOf(receiveAll(ctx, t, c, "topic.1", "corr", 1)); !slices.Equal(got, []string{"c"}) {
		t.Errorf("corr got %v", got)
	}
}
