package atom

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// TestSQLRuleErrorsAre400s: a SQL filter or action the language refuses is
// a 400 with Azure's wording and the position, whether it comes in a rule
// or in a subscription's DefaultRuleDescription, and nothing is created.
func TestSQLRuleErrorsAre400s(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		opts   admin.CreateRuleOptions
		detail string
	}{
		{"filter", admin.CreateRuleOptions{Filter: &admin.SQLFilter{Expression: "a = 1 AND (b = 2"}},
			"[Token line=1, column=17, Token in error= , Additional details= syntax error, unexpected end of expression, expecting ')']"},
		{"unknown sys", admin.CreateRuleOptions{Filter: &admin.SQLFilter{Expression: "sys.Colour = 'red'"}},
			"[Token line=1, column=5, Token in error= Colour, Additional details= unknown system property sys.Colour]"},
		{"missing parameter", admin.CreateRuleOptions{Filter: &admin.SQLFilter{Expression: "a = @x", Parameters: map[string]any{"@y": 1}}},
			"[Token line=1, column=5, Token in error= @x, Additional details= the parameter @x has no value"},
		{"action", admin.CreateRuleOptions{Action: &admin.SQLAction{Expression: "SET a = 1; a = 2"}},
			"[Token line=1, column=12, Token in error= a, Additional details= syntax error, unexpected identifier a, expecting SET or REMOVE]"},
	} {
		tt.opts.Name = to.Ptr("r-" + strings.ReplaceAll(tt.name, " ", "-"))
		_, err := e.client.CreateRule(ctx, "t", "s", &tt.opts)
		if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "There was an error parsing the SQL expression. "+tt.detail) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	_, err := e.client.CreateSubscription(ctx, "t", "s2", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		DefaultRule: &admin.RuleProperties{Name: "$Default", Filter: &admin.SQLFilter{Expression: "a LIKE 'x' ESCAPE 'yz'"}}}})
	if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "column=19, Token in error= 'yz', Additional details= the ESCAPE character must be a string of length 1") {
		t.Errorf("subscription with a bad default rule: %v", err)
	}
	if _, err := e.ns.Subscription("t", "s2"); err == nil {
		t.Error("the subscription was created despite its bad rule")
	}
	rules, err := e.ns.Rules("t", "s")
	if err != nil || len(rules) != 1 {
		t.Errorf("rules after the refusals: %v, %v", rules, err)
	}
}

// TestSQLParametersXML: parameters typed the way other SDKs write them
// (long, double, boolean, dateTime, any prefix) are read, used by the
// filter, and written back with the types the Go SDK reads.
func TestSQLParametersXML(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	body := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">
<RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
<Filter i:type="SqlFilter"><SqlExpression>n &gt; @n AND ok = @ok AND at &lt; @at</SqlExpression>
<Parameters><KeyValueOfstringanyType><Key>@n</Key><Value i:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5</Value></KeyValueOfstringanyType>
<KeyValueOfstringanyType><Key>@ok</Key><Value i:type="x:boolean" xmlns:x="http://www.w3.org/2001/XMLSchema">true</Value></KeyValueOfstringanyType>
<KeyValueOfstringanyType><Key>@at</Key><Value i:type="d6p1:dateTime" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">2030-01-02T03:04:05Z</Value></KeyValueOfstringanyType></Parameters></Filter>
<Action i:type="SqlRuleAction"><SqlExpression>SET n = n * @k, SET later = at + @span</SqlExpression>
<Parameters><KeyValueOfstringanyType><Key>@k</Key><Value i:type="d6p1:double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">1.5</Value></KeyValueOfstringanyType>
<KeyValueOfstringanyType><Key>@span</Key><Value i:type="d6p1:duration" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">PT1H30M</Value></KeyValueOfstringanyType></Parameters></Action>
</RuleDescription></content></entry>`
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, e.srv.URL+"/t/Subscriptions/s/Rules/typed", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sign(t, "https://localhost/t/Subscriptions/s/Rules/typed", "RootManageSharedAccessKey", "SAS_KEY_VALUE"))
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT rule: %d %s", resp.StatusCode, out)
	}
	for _, want := range []string{
		`<Key>@n</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5</Value>`,
		`<Key>@ok</Key><Value i:type="d6p1:boolean" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">true</Value>`,
		`<Key>@at</Key><Value i:type="d6p1:dateTime" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">2030-01-02T03:04:05Z</Value>`,
		`<Key>@k</Key><Value i:type="d6p1:double" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">1.5</Value>`,
		`<Key>@span</Key><Value i:type="d6p1:duration" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">PT1H30M</Value>`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("response lacks %s:\n%s", want, out)
		}
	}
	r, err := e.ns.Rule("t", "s", "typed")
	if err != nil {
		t.Fatal(err)
	}
	if r.Parameters["@n"] != int64(5) || r.Parameters["@ok"] != true || r.ActionParameters["@k"] != 1.5 || r.ActionParameters["@span"] != 90*time.Minute {
		t.Errorf("stored parameters: filter %v, action %v", r.Parameters, r.ActionParameters)
	}
}
