package atom

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// These tests pin what the azservicebus v1.11.0 live tests expect of the
// service (scripts/sdk-suite runs those against the emulator), through the
// real admin client.

// Forwarding targets come back as absolute URLs: as given when the client
// sent one (sb:// or https://, TestAdminClient_Forwarding and
// TestAdminClient_Queue_Forwarding), sb://<namespace>/<name> when it sent a
// name; the broker forwards to the entity the URL names either way.
func TestForwardTargetsAreAbsoluteURLs(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateQueue(ctx, "dst", nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ given, want string }{
		{"dst", "sb://127.0.0.1:5300/dst"},
		{"sb://127.0.0.1:5300/dst", "sb://127.0.0.1:5300/dst"},
		{"https://127.0.0.1:5300/dst", "https://127.0.0.1:5300/dst"},
	} {
		name := "src-" + strings.NewReplacer(":", "", "/", "").Replace(tt.given)
		created, err := e.client.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			ForwardTo: to.Ptr(tt.given), ForwardDeadLetteredMessagesTo: to.Ptr(tt.given),
		}})
		if err != nil {
			t.Fatalf("%s: %v", tt.given, err)
		}
		got, err := e.client.GetQueue(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]*string{
			"create ForwardTo": created.ForwardTo, "create ForwardDeadLetteredMessagesTo": created.ForwardDeadLetteredMessagesTo,
			"get ForwardTo": got.ForwardTo, "get ForwardDeadLetteredMessagesTo": got.ForwardDeadLetteredMessagesTo,
		} {
			if v == nil || *v != tt.want {
				t.Errorf("%s given %q: %v, want %q", what, tt.given, deref(v), tt.want)
			}
		}
		// Round trip: sending back what was read keeps it.
		upd, err := e.client.UpdateQueue(ctx, name, got.QueueProperties, nil)
		if err != nil || upd.ForwardTo == nil || *upd.ForwardTo != tt.want {
			t.Errorf("update given %q: %v, %v", tt.given, upd, err)
		}
		// The broker resolves the URL to the entity it names.
		qi, err := e.ns.Queue(name)
		if err != nil || broker.ForwardTarget(qi.Properties.ForwardTo) != "dst" {
			t.Errorf("broker target of %q = %q, %v", tt.given, qi.Properties.ForwardTo, err)
		}
	}
	// A URL naming no entity is refused like a missing name.
	_, err := e.client.CreateQueue(ctx, "bad", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		ForwardTo: to.Ptr("sb://127.0.0.1:5300/nowhere"),
	}})
	if statusOf(err) != http.StatusBadRequest {
		t.Errorf("forward to a missing entity: %v", err)
	}

	// Subscriptions too.
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	sub, err := e.client.CreateSubscription(ctx, "t", "s", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		ForwardTo: to.Ptr("sb://127.0.0.1:5300/dst"), ForwardDeadLetteredMessagesTo: to.Ptr("dst"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if *sub.ForwardTo != "sb://127.0.0.1:5300/dst" || *sub.ForwardDeadLetteredMessagesTo != "sb://127.0.0.1:5300/dst" {
		t.Errorf("subscription forwarding = %q, %q", *sub.ForwardTo, *sub.ForwardDeadLetteredMessagesTo)
	}
}

// A partitioned entity reports MaxSizeInMegabytes as 16 partitions of the
// size given, and a client sending that total back on update keeps it
// (TestAdminClient_CreateQueue_Standard, ..._TopicAndSubscription_Standard).
func TestPartitionedMaxSize(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	q, err := e.client.CreateQueue(ctx, "pq", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		EnablePartitioning: to.Ptr(true), MaxSizeInMegabytes: to.Ptr(int32(4096)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if *q.MaxSizeInMegabytes != 16*4096 {
		t.Errorf("created partitioned queue: MaxSizeInMegabytes %d, want %d", *q.MaxSizeInMegabytes, 16*4096)
	}
	upd, err := e.client.UpdateQueue(ctx, "pq", q.QueueProperties, nil)
	if err != nil || *upd.MaxSizeInMegabytes != 16*4096 {
		t.Fatalf("round trip: %v, %v", upd, err)
	}
	if qi, _ := e.ns.Queue("pq"); qi.Properties.MaxSizeInMegabytes != 4096 {
		t.Errorf("broker stores %d MB per partition, want 4096", qi.Properties.MaxSizeInMegabytes)
	}
	plain, err := e.client.CreateQueue(ctx, "plain", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		MaxSizeInMegabytes: to.Ptr(int32(2048)),
	}})
	if err != nil || *plain.MaxSizeInMegabytes != 2048 {
		t.Errorf("unpartitioned queue: %v, %v", plain, err)
	}

	tp, err := e.client.CreateTopic(ctx, "pt", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{
		EnablePartitioning: to.Ptr(true), MaxSizeInMegabytes: to.Ptr(int32(2048)),
	}})
	if err != nil || *tp.MaxSizeInMegabytes != 16*2048 {
		t.Fatalf("partitioned topic: %v, %v", tp, err)
	}
	tu, err := e.client.UpdateTopic(ctx, "pt", tp.TopicProperties, nil)
	if err != nil || *tu.MaxSizeInMegabytes != 16*2048 {
		t.Errorf("topic round trip: %v, %v", tu, err)
	}
}

// Partitioning and RequiresSession cannot change after creation, refused
// in the service's words (TestAdminClient_UpdateTopic,
// TestAdminClient_UpdateSubscription match on them).
func TestUnchangeableProperties(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	q, err := e.client.CreateQueue(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	q.EnablePartitioning = to.Ptr(true)
	_, err = e.client.UpdateQueue(ctx, "q", q.QueueProperties, nil)
	if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "Partitioning cannot be changed for Queue. ") {
		t.Errorf("queue partitioning change: %v", err)
	}
	q.EnablePartitioning = to.Ptr(false)
	q.RequiresSession = to.Ptr(true)
	_, err = e.client.UpdateQueue(ctx, "q", q.QueueProperties, nil)
	if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "The value for the RequiresSession property of an existing Queue cannot be changed") {
		t.Errorf("queue session change: %v", err)
	}

	tp, err := e.client.CreateTopic(ctx, "t", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{EnablePartitioning: to.Ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	tp.EnablePartitioning = to.Ptr(false)
	_, err = e.client.UpdateTopic(ctx, "t", tp.TopicProperties, nil)
	if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "Partitioning cannot be changed for Topic. ") {
		t.Errorf("topic partitioning change: %v", err)
	}
	if ti, _ := e.ns.Topic("t"); !ti.Properties.EnablePartitioning {
		t.Error("the refused update changed the topic")
	}

	s, err := e.client.CreateSubscription(ctx, "t", "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.RequiresSession = to.Ptr(true)
	_, err = e.client.UpdateSubscription(ctx, "t", "s", s.SubscriptionProperties, nil)
	if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "The value for the RequiresSession property of an existing Subscription cannot be changed") {
		t.Errorf("subscription session change: %v", err)
	}
}

// Entity authorization rules are stored and returned as given, with keys
// generated when left out; an update with rules replaces them
// (TestAdminClient_QueueWithMaxValues, ..._UpdateQueue, ..._UpdateTopic).
func TestAuthorizationRulesStored(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	primary, secondary := strings.Repeat("a", 43)+"=", strings.Repeat("b", 43)+"="
	rules := []admin.AuthorizationRule{{
		AccessRights: []admin.AccessRight{admin.AccessRightSend},
		KeyName:      to.Ptr("sender"), PrimaryKey: &primary, SecondaryKey: &secondary,
	}}
	created, err := e.client.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AuthorizationRules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, "created", created.AuthorizationRules, rules)
	got, err := e.client.GetQueue(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, "get", got.AuthorizationRules, rules)

	// Update: a second rule without keys gets generated ones.
	got.AuthorizationRules = append(got.AuthorizationRules, admin.AuthorizationRule{
		AccessRights: []admin.AccessRight{admin.AccessRightManage, admin.AccessRightSend, admin.AccessRightListen},
		KeyName:      to.Ptr("admin"),
	})
	upd, err := e.client.UpdateQueue(ctx, "q", got.QueueProperties, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(upd.AuthorizationRules) != 2 || *upd.AuthorizationRules[1].KeyName != "admin" {
		t.Fatalf("updated rules = %+v", upd.AuthorizationRules)
	}
	gen := upd.AuthorizationRules[1]
	if gen.PrimaryKey == nil || len(*gen.PrimaryKey) != 44 || gen.SecondaryKey == nil || *gen.SecondaryKey == *gen.PrimaryKey {
		t.Errorf("generated keys = %v, %v", gen.PrimaryKey, gen.SecondaryKey)
	}
	// An update without the element keeps the rules (the SDK always sends
	// it; a hand-written client may not), one with rules replaces them.
	upd.AuthorizationRules = rules
	again, err := e.client.UpdateQueue(ctx, "q", upd.QueueProperties, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, "replaced", again.AuthorizationRules, rules)

	// Rights are Manage, Send and Listen, and Manage needs both others.
	for _, bad := range [][]admin.AccessRight{{"Read"}, {admin.AccessRightManage}} {
		_, err := e.client.CreateQueue(ctx, "bad", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			AuthorizationRules: []admin.AuthorizationRule{{AccessRights: bad, KeyName: to.Ptr("k")}},
		}})
		if statusOf(err) != http.StatusBadRequest {
			t.Errorf("rights %v: %v", bad, err)
		}
	}

	// Topics too.
	tp, err := e.client.CreateTopic(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.AuthorizationRules) != 0 {
		t.Errorf("new topic rules = %+v", tp.AuthorizationRules)
	}
	tp.AuthorizationRules = rules
	tu, err := e.client.UpdateTopic(ctx, "t", tp.TopicProperties, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, "topic", tu.AuthorizationRules, rules)
}

// A new queue or topic has never been accessed; a new subscription has
// (TestAdminClient_QueueWithMaxValues, TestAdminClient_ListSubscriptions);
// a send marks the queue or topic accessed.
func TestAccessedAtAtCreation(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	qr, err := e.client.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil || !qr.AccessedAt.IsZero() || qr.CreatedAt.IsZero() {
		t.Errorf("new queue: %+v, %v", qr, err)
	}
	tr, err := e.client.GetTopicRuntimeProperties(ctx, "t", nil)
	if err != nil || !tr.AccessedAt.IsZero() {
		t.Errorf("new topic: %+v, %v", tr, err)
	}
	sr, err := e.client.GetSubscriptionRuntimeProperties(ctx, "t", "s", nil)
	if err != nil || sr.AccessedAt.IsZero() {
		t.Errorf("new subscription: %+v, %v", sr, err)
	}
	if err := e.ns.Send("q", &goamqp.Message{Data: [][]byte{[]byte("hello")}}); err != nil {
		t.Fatal(err)
	}
	if err := e.ns.Send("t", &goamqp.Message{Data: [][]byte{[]byte("hello")}}); err != nil {
		t.Fatal(err)
	}
	qr, _ = e.client.GetQueueRuntimeProperties(ctx, "q", nil)
	tr, _ = e.client.GetTopicRuntimeProperties(ctx, "t", nil)
	if qr.AccessedAt.IsZero() || tr.AccessedAt.IsZero() {
		t.Errorf("after a send: queue AccessedAt %v, topic %v", qr.AccessedAt, tr.AccessedAt)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
