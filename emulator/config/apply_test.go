package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

func TestApplyExample(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "Config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns := broker.New(broker.Options{})
	ns.SetName("something-else")
	if err := c.Apply(ns); err != nil {
		t.Fatal(err)
	}
	if ns.Name() != "sbemulatorns" {
		t.Errorf("namespace name = %q", ns.Name())
	}

	var names []string
	for _, q := range ns.Queues() {
		names = append(names, q.Name)
	}
	if strings.Join(names, ",") != "audit,minimal,orders,payments/incoming" {
		t.Errorf("queues = %v", names)
	}

	orders, err := ns.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	want := broker.DefaultQueueProperties()
	want.DeadLetteringOnMessageExpiration = true
	want.DefaultMessageTimeToLive = 2 * time.Hour
	want.DuplicateDetectionHistoryTimeWindow = time.Minute
	want.LockDuration = 30 * time.Second
	want.MaxDeliveryCount = 5
	want.RequiresDuplicateDetection = true
	if !reflect.DeepEqual(orders.Properties, want) {
		t.Errorf("orders:\n got %+v\nwant %+v", orders.Properties, want)
	}

	minimal, _ := ns.Queue("minimal")
	want = broker.DefaultQueueProperties()
	want.DefaultMessageTimeToLive = time.Hour
	want.DuplicateDetectionHistoryTimeWindow = 20 * time.Second
	want.LockDuration = time.Minute
	want.MaxDeliveryCount = 3
	if !reflect.DeepEqual(minimal.Properties, want) {
		t.Errorf("minimal (Microsoft's defaults):\n got %+v\nwant %+v", minimal.Properties, want)
	}
	if q, _ := ns.Queue("payments/incoming"); !q.Properties.RequiresSession {
		t.Errorf("payments/incoming = %+v", q.Properties)
	}
	if q, _ := ns.Queue("audit"); q.Properties.ForwardTo != "orders" || q.Properties.ForwardDeadLetteredMessagesTo != "notifications" {
		t.Errorf("audit forwarding = %+v", q.Properties)
	}

	topic, err := ns.Topic("notifications")
	if err != nil {
		t.Fatal(err)
	}
	if topic.SubscriptionCount != 3 || topic.Properties.DefaultMessageTimeToLive != 24*time.Hour ||
		topic.Properties.DuplicateDetectionHistoryTimeWindow != 20*time.Second {
		t.Errorf("topic = %+v", topic)
	}
	email, err := ns.Subscription("notifications", "email")
	if err != nil {
		t.Fatal(err)
	}
	if p := email.Properties; p.LockDuration != 2*time.Minute || p.MaxDeliveryCount != 10 || p.DefaultMessageTimeToLive != time.Hour {
		t.Errorf("email = %+v", p)
	}
	rules, _ := ns.Rules("notifications", "email")
	wantCorr := &broker.CorrelationFilter{
		ContentType: "application/json", CorrelationID: "corr-1", Subject: "email", MessageID: "m-1",
		ReplyTo: "replies", ReplyToSessionID: "rs-1", SessionID: "s-1", To: "someone",
		Properties: map[string]any{"channel": "email", "priority": int64(2), "weight": 0.5, "urgent": true},
	}
	if len(rules) != 1 || rules[0].Name != "email-only" || rules[0].Kind != broker.FilterCorrelation || !reflect.DeepEqual(rules[0].Correlation, wantCorr) {
		t.Errorf("email rules = %+v", rules)
	}
	rules, _ = ns.Rules("notifications", "sms")
	if len(rules) != 1 || rules[0].Kind != broker.FilterSQL || rules[0].SQLExpression != "channel = 'sms'" || rules[0].Action != "SET handled = 'yes'" {
		t.Errorf("sms rules = %+v", rules)
	}
	rules, _ = ns.Rules("notifications", "everything")
	if len(rules) != 1 || rules[0].Name != "$Default" || rules[0].Kind != broker.FilterTrue {
		t.Errorf("everything rules = %+v", rules)
	}
	if s, _ := ns.Subscription("notifications", "everything"); s.Properties.ForwardTo != "audit" || s.Properties.MaxDeliveryCount != 3 {
		t.Errorf("everything = %+v", s.Properties)
	}
}

func TestApplyDefault(t *testing.T) {
	ns := broker.New(broker.Options{})
	if err := Default().Apply(ns); err != nil {
		t.Fatal(err)
	}
	q, err := ns.Queue("queue.1")
	if err != nil || q.Properties.MaxDeliveryCount != DefaultMaxDeliveryCount || q.Properties.LockDuration != DefaultLockDuration {
		t.Errorf("queue.1 = %+v, %v", q.Properties, err)
	}
	s, err := ns.Subscription("topic.1", "subscription.1")
	if err != nil || s.Properties.DefaultMessageTimeToLive != DefaultMessageTimeToLive {
		t.Errorf("subscription.1 = %+v, %v", s.Properties, err)
	}
	if ns.Name() != DefaultNamespace {
		t.Errorf("name = %q", ns.Name())
	}
}

func TestApplyErrors(t *testing.T) {
	ns := broker.New(broker.Options{})
	if _, err := ns.CreateQueue("queue.1", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	err := Default().Apply(ns)
	if !errors.Is(err, broker.ErrAlreadyExists) || !strings.Contains(err.Error(), `create queue "queue.1"`) {
		t.Errorf("Apply over an existing queue = %v", err)
	}

	bad := Default()
	bad.UserConfig.Namespaces[0].Queues[0].Properties.LockDuration = Duration(time.Hour)
	err = bad.Apply(broker.New(broker.Options{}))
	if err == nil || !strings.Contains(err.Error(), "exceeds the maximum lock duration PT5M") {
		t.Errorf("Apply of an invalid config = %v", err)
	}
}
