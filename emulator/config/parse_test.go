package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadExample(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "Config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns, ok := c.Namespace()
	if !ok || ns.Name != "sbemulatorns" {
		t.Fatalf("namespace = %+v", ns)
	}
	if got := c.Summary(); got != "sbemulatorns: 4 queues, 1 topic, 3 subscriptions" {
		t.Errorf("Summary = %q", got)
	}
	if c.UserConfig.Logging.Type != "File,Console" {
		t.Errorf("Logging.Type = %q", c.UserConfig.Logging.Type)
	}

	orders := ns.Queues[0]
	wantOrders := QueueProperties{
		DeadLetteringOnMessageExpiration:    true,
		DefaultMessageTimeToLive:            Duration(2 * time.Hour),
		DuplicateDetectionHistoryTimeWindow: Duration(time.Minute),
		LockDuration:                        Duration(30 * time.Second),
		MaxDeliveryCount:                    5,
		RequiresDuplicateDetection:          true,
	}
	if orders.Name != "orders" || orders.Properties != wantOrders {
		t.Errorf("orders = %+v, want %+v", orders, wantOrders)
	}
	// Absent properties take Microsoft's emulator defaults.
	minimal := ns.Queues[3]
	wantMinimal := QueueProperties{
		DefaultMessageTimeToLive:            Duration(time.Hour),
		DuplicateDetectionHistoryTimeWindow: Duration(20 * time.Second),
		LockDuration:                        Duration(time.Minute),
		MaxDeliveryCount:                    3,
	}
	if minimal.Properties != wantMinimal {
		t.Errorf("minimal = %+v, want %+v", minimal.Properties, wantMinimal)
	}
	if q := ns.Queues[1]; q.Name != "payments/incoming" || !q.Properties.RequiresSession {
		t.Errorf("queue 1 = %+v", q)
	}
	if q := ns.Queues[2]; q.Properties.ForwardTo != "orders" || q.Properties.ForwardDeadLetteredMessagesTo != "notifications" {
		t.Errorf("audit forwarding = %+v", q.Properties)
	}

	topic := ns.Topics[0]
	if topic.Properties.DefaultMessageTimeToLive != Duration(24*time.Hour) || len(topic.Subscriptions) != 3 {
		t.Fatalf("topic = %+v", topic)
	}
	email := topic.Subscriptions[0]
	if email.Properties.LockDuration != Duration(2*time.Minute) || email.Properties.MaxDeliveryCount != 10 {
		t.Errorf("email props = %+v", email.Properties)
	}
	wantCF := &CorrelationFilter{
		ContentType: "application/json", CorrelationID: "corr-1", Label: "email", MessageID: "m-1",
		ReplyTo: "replies", ReplyToSessionID: "rs-1", SessionID: "s-1", To: "someone",
		Properties: map[string]any{"channel": "email", "priority": int64(2), "weight": 0.5, "urgent": true},
	}
	if len(email.Rules) != 1 || email.Rules[0].Name != "email-only" || !reflect.DeepEqual(email.Rules[0].Properties.CorrelationFilter, wantCF) {
		t.Errorf("email rules = %+v", email.Rules)
	}
	sms := topic.Subscriptions[1]
	if sms.Properties.MaxDeliveryCount != 3 || sms.Properties.LockDuration != Duration(time.Minute) {
		t.Errorf("sms defaults = %+v", sms.Properties)
	}
	if r := sms.Rules[0].Properties; r.FilterType != "Sql" || r.SQLFilter.SQLExpression != "channel = 'sms'" || r.Action.SQLExpression != "SET handled = 'yes'" {
		t.Errorf("sms rule = %+v", r)
	}
	if s := topic.Subscriptions[2]; s.Properties.ForwardTo != "audit" || len(s.Rules) != 0 {
		t.Errorf("everything = %+v", s)
	}
}

func TestBadFiles(t *testing.T) {
	tests := []struct {
		file string
		want []string // each must appear in the error text
	}{
		{"syntax-trailing-comma.json", []string{"syntax-trailing-comma.json:4:", "JSON syntax error", "invalid character '}'"}},
		{"syntax-truncated.json", []string{"syntax-truncated.json:5:1:", "unexpected end of file"}},
		{"unknown-field.json", []string{"unknown-field.json:7:", `UserConfig.Namespaces[0].Queues[0].Properties.LockDurationn: unknown field "LockDurationn"`, "LockDuration, MaxDeliveryCount"}},
		{"wrong-type.json", []string{"wrong-type.json:7:", "UserConfig.Namespaces[0].Queues[0].Properties.MaxDeliveryCount: must be an integer, got a string"}},
		{"lock-too-long.json", []string{"lock-too-long.json:12:31: ", `UserConfig.Namespaces[0].Queues[2].Properties.LockDuration: "PT10M" exceeds the maximum lock duration PT5M`}},
		{"bad-name.json", []string{"bad-name.json:7:", `UserConfig.Namespaces[0].Topics[0].Name: "topic-" is not a valid name`}},
		{"duplicate-name.json", []string{"duplicate-name.json:7:", `UserConfig.Namespaces[0].Topics[0].Name: topic name "Orders" is already used by UserConfig.Namespaces[0].Queues[0].Name`}},
		{"bad-duration.json", []string{"bad-duration.json:6:", `DefaultMessageTimeToLive: "1 hour" is not an ISO-8601 duration`}},
		{"forward-unknown.json", []string{"forward-unknown.json:6:", `Queues[0].Properties.ForwardTo: "nowhere" is not a queue or topic of this namespace`}},
		{"rule-missing-filter.json", []string{"rule-missing-filter.json:13:", `Rules[0].Properties.SqlFilter: required when FilterType is "Sql"`}},
		{"two-namespaces.json", []string{"two-namespaces.json:3:", "exactly one namespace; found 2"}},
		{"no-userconfig.json", []string{"no-userconfig.json:1:1:", `unknown field "Namespaces"`, "UserConfig: required field is missing"}},
		{"max-delivery-zero.json", []string{"max-delivery-zero.json:7:", "Subscriptions[0].Properties.MaxDeliveryCount: must be at least 1, got 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", "bad", tt.file))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %v is not a *config.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\ndoes not contain\n  %s", err, w)
				}
			}
		})
	}
	// Every bad file has a test case.
	files, _ := filepath.Glob(filepath.Join("testdata", "bad", "*.json"))
	if len(files) != len(tests) {
		t.Errorf("%d bad files, %d test cases", len(files), len(tests))
	}
}

func TestParseErrorsInline(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
	}{
		{"empty", "", "line 1, column 1: empty file"},
		{"not an object", `[]`, "must be an object, got an array"},
		{"trailing data", `{"UserConfig":{"Namespaces":[{"Name":"a"}]}} x`, "line 1, column 46: unexpected data"},
		{"duplicate field", `{"UserConfig":{"Namespaces":[{"Name":"a","name":"b"}]}}`, `Namespaces[0].Name: field given twice`},
		{"logging type", `{"UserConfig":{"Namespaces":[{"Name":"a"}],"Logging":{"Type":"Syslog"}}}`, `Logging.Type: "Syslog" is not one of`},
		{"lock too short", `{"UserConfig":{"Namespaces":[{"Name":"a","Queues":[{"Name":"q","Properties":{"LockDuration":"PT1S"}}]}]}}`, `"PT1S" is below the minimum lock duration PT5S`},
		{"ttl zero", `{"UserConfig":{"Namespaces":[{"Name":"a","Queues":[{"Name":"q","Properties":{"DefaultMessageTimeToLive":"PT0S"}}]}]}}`, `"PT0S" must be a positive duration`},
		{"dup window", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Properties":{"DuplicateDetectionHistoryTimeWindow":"P8D"}}]}]}}`, `exceeds the maximum duplicate detection window P7D`},
		{"self forward", `{"UserConfig":{"Namespaces":[{"Name":"a","Queues":[{"Name":"q","Properties":{"ForwardTo":"Q"}}]}]}}`, `cannot forward to itself`},
		{"bad filter type", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"True"}}]}]}]}]}}`, `FilterType: "True" is not "Correlation" or "Sql"`},
		{"empty correlation", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Correlation","CorrelationFilter":{}}}]}]}]}]}}`, `must set at least one property`},
		{"nested app prop", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Correlation","CorrelationFilter":{"Properties":{"x":[1]}}}}]}]}]}]}}`, `CorrelationFilter.Properties.x: must be a string, number or boolean, got an array`},
		{"duplicate rule", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"1=1"}}},{"Name":"R","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"1=1"}}}]}]}]}]}}`, `rule name "R" is already used by`},
		{"bad sql filter", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"color = 'red' AND"}}}]}]}]}]}}`, `SqlFilter.SqlExpression: not a valid SQL filter: line 1, column 18`},
		{"sql filter parameter", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"color = @c"}}}]}]}]}]}}`, `the parameter @c has no value`},
		{"bad sql action", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"1=1"},"Action":{"SqlExpression":"SET sys.SequenceNumber = 1"}}}]}]}]}]}}`, `Action.SqlExpression: not a valid SQL action: line 1, column 5`},
		{"long subscription", `{"UserConfig":{"Namespaces":[{"Name":"a","Topics":[{"Name":"t","Subscriptions":[{"Name":"` + strings.Repeat("s", 51) + `"}]}]}]}}`, `is longer than 50 characters`},
		{"int overflow", `{"UserConfig":{"Namespaces":[{"Name":"a","Queues":[{"Name":"q","Properties":{"MaxDeliveryCount":99999999999}}]}]}}`, `must be an integer between`},
		{"deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), "nesting deeper than 64"},
		{"column counts characters", "{\n  \"ü\": 1, \"UserConfig\": 5}", `line 2, column 3: ü: unknown field "ü"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n  %v\ndoes not contain\n  %s", err, tt.want)
			}
		})
	}
}

func TestParseLenient(t *testing.T) {
	// Case-insensitive field names, null as absent, a BOM, no Logging, no Queues.
	in := "\xef\xbb\xbf" + `{"userconfig":{"namespaces":[{"name":"dev","topics":[{"name":"t","properties":null}]}]}}`
	c, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := c.Namespace()
	if ns.Name != "dev" || len(ns.Topics) != 1 || ns.Topics[0].Properties.DefaultMessageTimeToLive != Duration(time.Hour) {
		t.Errorf("parsed %+v", ns)
	}
}

func TestDefaultIsValidAndRoundTrips(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"LockDuration": "PT1M"`) {
		t.Errorf("marshalled default lacks ISO durations:\n%s", b)
	}
	back, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("Parse(marshal(Default())): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip differs:\n%+v\n%+v", back, c)
	}
	if got := c.Summary(); got != "sbemulatorns: 1 queue, 1 topic, 1 subscription" {
		t.Errorf("Summary = %q", got)
	}
	if !strings.Contains(DefaultsHelp(), "MaxDeliveryCount 3") {
		t.Errorf("DefaultsHelp = %q", DefaultsHelp())
	}
}

func TestValidateHandBuilt(t *testing.T) {
	c := &Config{UserConfig: UserConfig{Namespaces: []Namespace{{
		Name:   "ns",
		Queues: []Queue{{Name: "q"}}, // zero properties mean defaults
	}}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.UserConfig.Namespaces[0].Queues[0].Properties.LockDuration = Duration(time.Hour)
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `UserConfig.Namespaces[0].Queues[0].Properties.LockDuration: "PT1H" exceeds`) {
		t.Errorf("Validate = %v", err)
	}
	if err := (&Config{}).Validate(); err == nil {
		t.Error("empty config validated")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load = %v", err)
	}
}
