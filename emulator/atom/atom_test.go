package atom

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

const testConnStr = "Endpoint=sb://127.0.0.1:5300;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"

// rewrite is the transport of docs/servicebus-protocol.md §12.3: the SDK signs and addresses
// https://127.0.0.1:5300/..., and this sends it to the test server instead.
type rewrite struct {
	base   *url.URL
	client *http.Client

	mu       sync.Mutex
	requests []string // method + path + raw query, for paging assertions
}

func (rw *rewrite) Do(req *http.Request) (*http.Response, error) {
	rw.mu.Lock()
	rw.requests = append(rw.requests, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
	rw.mu.Unlock()
	req.URL.Scheme, req.URL.Host = rw.base.Scheme, rw.base.Host
	return rw.client.Do(req)
}

func (rw *rewrite) take() []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	r := rw.requests
	rw.requests = nil
	return r
}

type env struct {
	ns     *broker.Namespace
	srv    *httptest.Server
	client *admin.Client
	tr     *rewrite
}

func newEnv(t *testing.T, o Options) *env {
	t.Helper()
	ns := broker.New(broker.Options{})
	srv := httptest.NewServer(NewHandler(ns, o))
	t.Cleanup(srv.Close)
	c, tr := newClientTransport(t, srv, testConnStr)
	return &env{ns: ns, srv: srv, client: c, tr: tr}
}

func newClient(t *testing.T, srv *httptest.Server, connStr string) *admin.Client {
	t.Helper()
	c, _ := newClientTransport(t, srv, connStr)
	return c
}

func newClientTransport(t *testing.T, srv *httptest.Server, connStr string) (*admin.Client, *rewrite) {
	t.Helper()
	base, _ := url.Parse(srv.URL)
	tr := &rewrite{base: base, client: srv.Client()}
	c, err := admin.NewClientFromConnectionString(connStr, &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: tr, Retry: noRetry},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

var noRetry = policyRetry()

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func TestQueueLifecycle(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()

	infinite := "P10675199DT2H48M5.4775807S"
	created, err := e.client.CreateQueue(ctx, "orders", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		LockDuration:                        to.Ptr("PT45S"),
		MaxSizeInMegabytes:                  to.Ptr(int32(2048)),
		RequiresDuplicateDetection:          to.Ptr(true),
		RequiresSession:                     to.Ptr(true),
		DefaultMessageTimeToLive:            to.Ptr(infinite),
		DeadLetteringOnMessageExpiration:    to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT4H"),
		MaxDeliveryCount:                    to.Ptr(int32(7)),
		EnableBatchedOperations:             to.Ptr(false),
		AutoDeleteOnIdle:                    to.Ptr("PT10M"),
		UserMetadata:                        to.Ptr("some metadata"),
		MaxMessageSizeInKilobytes:           to.Ptr(int64(512)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := admin.QueueProperties{
		LockDuration:                        to.Ptr("PT45S"),
		MaxSizeInMegabytes:                  to.Ptr(int32(2048)),
		RequiresDuplicateDetection:          to.Ptr(true),
		RequiresSession:                     to.Ptr(true),
		DefaultMessageTimeToLive:            to.Ptr(infinite),
		DeadLetteringOnMessageExpiration:    to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT4H"),
		MaxDeliveryCount:                    to.Ptr(int32(7)),
		EnableBatchedOperations:             to.Ptr(false),
		Status:                              to.Ptr(admin.EntityStatusActive),
		AutoDeleteOnIdle:                    to.Ptr("PT10M"),
		EnablePartitioning:                  to.Ptr(false),
		UserMetadata:                        to.Ptr("some metadata"),
		MaxMessageSizeInKilobytes:           to.Ptr(int64(512)),
	}
	if created.QueueName != "orders" {
		t.Errorf("QueueName = %q", created.QueueName)
	}
	assertJSONEqual(t, "created", created.QueueProperties, want)

	got, err := e.client.GetQueue(ctx, "orders", nil)
	if err != nil || got == nil {
		t.Fatalf("GetQueue = %v, %v", got, err)
	}
	assertJSONEqual(t, "get", got.QueueProperties, want)

	// The broker holds the same values: AMQP clients see what admin set.
	q, err := e.ns.Queue("orders")
	if err != nil || q.Properties.LockDuration != 45*time.Second || q.Properties.MaxDeliveryCount != 7 ||
		q.Properties.DefaultMessageTimeToLive != 0 || !q.Properties.RequiresSession {
		t.Errorf("broker queue = %+v, %v", q.Properties, err)
	}

	// Update: the SDK sends the whole property set with If-Match: *.
	props := got.QueueProperties
	props.MaxDeliveryCount = to.Ptr(int32(3))
	props.Status = to.Ptr(admin.EntityStatusSendDisabled)
	props.DefaultMessageTimeToLive = to.Ptr("P14D")
	updated, err := e.client.UpdateQueue(ctx, "orders", props, nil)
	if err != nil {
		t.Fatal(err)
	}
	want.MaxDeliveryCount = to.Ptr(int32(3))
	want.Status = to.Ptr(admin.EntityStatusSendDisabled)
	want.DefaultMessageTimeToLive = to.Ptr("P14D")
	assertJSONEqual(t, "updated", updated.QueueProperties, want)
	got, err = e.client.GetQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, "get after update", got.QueueProperties, want)

	// A partial update changes only what it names.
	if _, err := e.client.UpdateQueue(ctx, "orders", admin.QueueProperties{UserMetadata: to.Ptr("v2")}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = e.client.GetQueue(ctx, "orders", nil)
	if *got.UserMetadata != "v2" || *got.MaxDeliveryCount != 3 || *got.LockDuration != "PT45S" {
		t.Errorf("after partial update: %+v", got.QueueProperties)
	}

	if _, err := e.client.DeleteQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	got, err = e.client.GetQueue(ctx, "orders", nil)
	if err != nil || got != nil {
		t.Errorf("GetQueue after delete = %v, %v; want nil, nil", got, err)
	}
	if _, err := e.client.DeleteQueue(ctx, "orders", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("second DeleteQueue = %v, want 404", err)
	}
}

func TestCreateQueueAzureDefaults(t *testing.T) {
	e := newEnv(t, Options{})
	resp, err := e.client.CreateQueue(t.Context(), "plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, "defaults", resp.QueueProperties, admin.QueueProperties{
		LockDuration:                        to.Ptr("PT1M"),
		MaxSizeInMegabytes:                  to.Ptr(int32(1024)),
		RequiresDuplicateDetection:          to.Ptr(false),
		RequiresSession:                     to.Ptr(false),
		DefaultMessageTimeToLive:            to.Ptr("P10675199DT2H48M5.4775807S"),
		DeadLetteringOnMessageExpiration:    to.Ptr(false),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT10M"),
		MaxDeliveryCount:                    to.Ptr(int32(10)),
		EnableBatchedOperations:             to.Ptr(true),
		Status:                              to.Ptr(admin.EntityStatusActive),
		AutoDeleteOnIdle:                    to.Ptr("P10675199DT2H48M5.4775807S"),
		EnablePartitioning:                  to.Ptr(false),
		MaxMessageSizeInKilobytes:           to.Ptr(int64(256)),
	})
	// Names with '/' work.
	if _, err := e.client.CreateQueue(t.Context(), "a/b/c", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.client.GetQueue(t.Context(), "a/b/c", nil); err != nil || got == nil || got.QueueName != "a/b/c" {
		t.Errorf("GetQueue(a/b/c) = %+v, %v", got, err)
	}
}

func TestTopicLifecycle(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	created, err := e.client.CreateTopic(ctx, "events", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{
		DefaultMessageTimeToLive:            to.Ptr("PT3M"),
		MaxSizeInMegabytes:                  to.Ptr(int32(2048)),
		RequiresDuplicateDetection:          to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT5M"),
		EnableBatchedOperations:             to.Ptr(false),
		AutoDeleteOnIdle:                    to.Ptr("PT7M"),
		SupportOrdering:                     to.Ptr(true),
		UserMetadata:                        to.Ptr("user metadata"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := admin.TopicProperties{
		DefaultMessageTimeToLive:            to.Ptr("PT3M"),
		MaxSizeInMegabytes:                  to.Ptr(int32(2048)),
		RequiresDuplicateDetection:          to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT5M"),
		EnableBatchedOperations:             to.Ptr(false),
		Status:                              to.Ptr(admin.EntityStatusActive),
		AutoDeleteOnIdle:                    to.Ptr("PT7M"),
		EnablePartitioning:                  to.Ptr(false),
		SupportOrdering:                     to.Ptr(true),
		UserMetadata:                        to.Ptr("user metadata"),
		MaxMessageSizeInKilobytes:           to.Ptr(int64(256)),
	}
	if created.TopicName != "events" {
		t.Errorf("TopicName = %q", created.TopicName)
	}
	assertJSONEqual(t, "created", created.TopicProperties, want)
	got, err := e.client.GetTopic(ctx, "events", nil)
	if err != nil || got == nil {
		t.Fatalf("GetTopic = %v, %v", got, err)
	}
	assertJSONEqual(t, "get", got.TopicProperties, want)

	props := got.TopicProperties
	props.Status = to.Ptr(admin.EntityStatusDisabled)
	props.DefaultMessageTimeToLive = to.Ptr("PT1H")
	upd, err := e.client.UpdateTopic(ctx, "events", props, nil)
	if err != nil {
		t.Fatal(err)
	}
	want.Status = to.Ptr(admin.EntityStatusDisabled)
	want.DefaultMessageTimeToLive = to.Ptr("PT1H")
	assertJSONEqual(t, "updated", upd.TopicProperties, want)

	if _, err := e.client.DeleteTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.client.GetTopic(ctx, "events", nil); err != nil || got != nil {
		t.Errorf("GetTopic after delete = %v, %v", got, err)
	}
}

func TestSubscriptionLifecycle(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateQueue(ctx, "fwd", nil); err != nil {
		t.Fatal(err)
	}
	created, err := e.client.CreateSubscription(ctx, "t", "s1", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		LockDuration:                                    to.Ptr("PT2M"),
		RequiresSession:                                 to.Ptr(false),
		DefaultMessageTimeToLive:                        to.Ptr("PT7M"),
		DeadLetteringOnMessageExpiration:                to.Ptr(true),
		EnableDeadLetteringOnFilterEvaluationExceptions: to.Ptr(true),
		MaxDeliveryCount:                                to.Ptr(int32(4)),
		EnableBatchedOperations:                         to.Ptr(false),
		AutoDeleteOnIdle:                                to.Ptr("PT11M"),
		UserMetadata:                                    to.Ptr("user metadata"),
		ForwardDeadLetteredMessagesTo:                   to.Ptr("fwd"),
		DefaultRule: &admin.RuleProperties{
			Name:   "only-red",
			Filter: &admin.CorrelationFilter{Subject: to.Ptr("red")},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := admin.SubscriptionProperties{
		LockDuration:                                    to.Ptr("PT2M"),
		RequiresSession:                                 to.Ptr(false),
		DefaultMessageTimeToLive:                        to.Ptr("PT7M"),
		DeadLetteringOnMessageExpiration:                to.Ptr(true),
		EnableDeadLetteringOnFilterEvaluationExceptions: to.Ptr(true),
		MaxDeliveryCount:                                to.Ptr(int32(4)),
		Status:                                          to.Ptr(admin.EntityStatusActive),
		EnableBatchedOperations:                         to.Ptr(false),
		AutoDeleteOnIdle:                                to.Ptr("PT11M"),
		UserMetadata:                                    to.Ptr("user metadata"),
		// Returned as an absolute URL on the namespace the client addressed.
		ForwardDeadLetteredMessagesTo: to.Ptr("sb://127.0.0.1:5300/fwd"),
	}
	if created.SubscriptionName != "s1" || created.TopicName != "t" {
		t.Errorf("names = %q %q", created.TopicName, created.SubscriptionName)
	}
	assertJSONEqual(t, "created", created.SubscriptionProperties, want)

	// The default rule replaced $Default.
	rules, err := e.ns.Rules("t", "s1")
	if err != nil || len(rules) != 1 || rules[0].Name != "only-red" || rules[0].Kind != broker.FilterCorrelation || rules[0].Correlation.Subject != "red" {
		t.Errorf("broker rules = %+v, %v", rules, err)
	}

	got, err := e.client.GetSubscription(ctx, "t", "s1", nil)
	if err != nil || got == nil {
		t.Fatalf("GetSubscription = %v, %v", got, err)
	}
	assertJSONEqual(t, "get", got.SubscriptionProperties, want)

	props := got.SubscriptionProperties
	props.MaxDeliveryCount = to.Ptr(int32(9))
	props.Status = to.Ptr(admin.EntityStatusReceiveDisabled)
	upd, err := e.client.UpdateSubscription(ctx, "t", "s1", props, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK (v1.11.0) does not send Status for subscriptions, so it stays Active.
	want.MaxDeliveryCount = to.Ptr(int32(9))
	assertJSONEqual(t, "updated", upd.SubscriptionProperties, want)

	if _, err := e.client.DeleteSubscription(ctx, "t", "s1", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.client.GetSubscription(ctx, "t", "s1", nil); err != nil || got != nil {
		t.Errorf("GetSubscription after delete = %v, %v", got, err)
	}
}

func TestRuleLifecycle(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	corr := &admin.CorrelationFilter{
		ContentType: to.Ptr("application/json"), CorrelationID: to.Ptr("c1"), MessageID: to.Ptr("m1"),
		ReplyTo: to.Ptr("r"), ReplyToSessionID: to.Ptr("rs"), SessionID: to.Ptr("s1"), Subject: to.Ptr("subj"), To: to.Ptr("to"),
		ApplicationProperties: map[string]any{"str": "v", "num": int64(42), "dbl": 1.5, "flag": true, "at": when},
	}
	resp, err := e.client.CreateRule(ctx, "t", "s", &admin.CreateRuleOptions{Name: to.Ptr("corr"), Filter: corr})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Name != "corr" || resp.Action != nil {
		t.Errorf("CreateRule = %+v", resp.RuleProperties)
	}
	assertJSONEqual(t, "correlation filter", resp.Filter, corr)

	sql := &admin.SQLFilter{Expression: "color = 'red'"}
	action := &admin.SQLAction{Expression: "SET handled = 1"}
	if _, err := e.client.CreateRule(ctx, "t", "s", &admin.CreateRuleOptions{Name: to.Ptr("sql"), Filter: sql, Action: action}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateRule(ctx, "t", "s", &admin.CreateRuleOptions{Name: to.Ptr("none"), Filter: &admin.FalseFilter{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateRule(ctx, "t", "s", &admin.CreateRuleOptions{Name: to.Ptr("corr")}); statusOf(err) != http.StatusConflict {
		t.Errorf("duplicate CreateRule = %v, want 409", err)
	}

	got, err := e.client.GetRule(ctx, "t", "s", "sql", nil)
	if err != nil || got == nil {
		t.Fatalf("GetRule = %v, %v", got, err)
	}
	assertJSONEqual(t, "sql filter", got.Filter, sql)
	assertJSONEqual(t, "sql action", got.Action, action)

	var names []string
	pager := e.client.NewListRulesPager("t", "s", &admin.ListRulesOptions{MaxPageSize: 3})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rules {
			names = append(names, r.Name)
			if r.Name == "$Default" {
				if _, ok := r.Filter.(*admin.TrueFilter); !ok {
					t.Errorf("$Default filter = %#v", r.Filter)
				}
			}
			if r.Name == "none" {
				if _, ok := r.Filter.(*admin.FalseFilter); !ok {
					t.Errorf("none filter = %#v", r.Filter)
				}
			}
		}
	}
	if strings.Join(names, ",") != "$Default,corr,sql,none" {
		t.Errorf("rules = %v", names)
	}

	upd, err := e.client.UpdateRule(ctx, "t", "s", admin.RuleProperties{Name: "sql", Filter: &admin.SQLFilter{Expression: "color = 'blue'"}})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := upd.Filter.(*admin.SQLFilter); !ok || f.Expression != "color = 'blue'" || upd.Action != nil {
		t.Errorf("UpdateRule = %#v %#v", upd.Filter, upd.Action)
	}
	if r, _ := e.ns.Rule("t", "s", "sql"); r.SQLExpression != "color = 'blue'" || r.Action != "" {
		t.Errorf("broker rule after update = %+v", r)
	}
	if _, err := e.client.UpdateRule(ctx, "t", "s", admin.RuleProperties{Name: "missing"}); statusOf(err) != http.StatusNotFound {
		t.Errorf("UpdateRule(missing) = %v, want 404", err)
	}

	// Without a name the SDK PUTs to .../Rules/ and names the rule $Default.
	if _, err := e.client.DeleteRule(ctx, "t", "s", "$Default", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := e.client.CreateRule(ctx, "t", "s", &admin.CreateRuleOptions{}); err != nil || r.Name != "$Default" {
		t.Errorf("CreateRule without name = %+v, %v", r, err)
	}

	if _, err := e.client.DeleteRule(ctx, "t", "s", "corr", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.client.GetRule(ctx, "t", "s", "corr", nil); err != nil || got != nil {
		t.Errorf("GetRule after delete = %v, %v", got, err)
	}
	if _, err := e.client.DeleteRule(ctx, "t", "s", "corr", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("second DeleteRule = %v, want 404", err)
	}
}

func TestListQueuesPaging(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	for i := 5; i >= 1; i-- { // created out of order: lists are sorted by name
		if _, err := e.client.CreateQueue(ctx, fmt.Sprintf("q%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	e.tr.take()

	var pages [][]string
	pager := e.client.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 2})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range page.Queues {
			names = append(names, q.QueueName)
			if q.MaxDeliveryCount == nil || *q.MaxDeliveryCount != 10 {
				t.Errorf("%s MaxDeliveryCount = %v", q.QueueName, q.MaxDeliveryCount)
			}
		}
		pages = append(pages, names)
	}
	if fmt.Sprint(pages) != "[[q1 q2] [q3 q4] [q5]]" {
		t.Errorf("pages = %v", pages)
	}
	reqs := e.tr.take()
	if len(reqs) != 3 || !strings.Contains(reqs[2], "%24skip=4") || !strings.Contains(reqs[2], "%24top=2") {
		t.Errorf("requests = %q", reqs)
	}

	// Without MaxPageSize the pager keeps asking until an empty page.
	pages = nil
	pager = e.client.NewListQueuesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range page.Queues {
			names = append(names, q.QueueName)
		}
		pages = append(pages, names)
	}
	if fmt.Sprint(pages) != "[[q1 q2 q3 q4 q5] []]" {
		t.Errorf("pages without MaxPageSize = %v", pages)
	}
	if reqs := e.tr.take(); len(reqs) != 2 || !strings.Contains(reqs[1], "%24skip=5") {
		t.Errorf("requests = %q", reqs)
	}

	// Runtime-properties listing shares the endpoint.
	var rt []string
	rpager := e.client.NewListQueuesRuntimePropertiesPager(&admin.ListQueuesRuntimePropertiesOptions{MaxPageSize: 4})
	for rpager.More() {
		page, err := rpager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range page.QueueRuntimeProperties {
			rt = append(rt, q.QueueName)
			if q.CreatedAt.IsZero() {
				t.Errorf("%s CreatedAt is zero", q.QueueName)
			}
		}
	}
	if strings.Join(rt, ",") != "q1,q2,q3,q4,q5" {
		t.Errorf("runtime list = %v", rt)
	}
}

func TestListTopicsAndSubscriptions(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	for _, name := range []string{"t3", "t1", "t2"} {
		if _, err := e.client.CreateTopic(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5; i++ {
		if _, err := e.client.CreateSubscription(ctx, "t1", fmt.Sprintf("s%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	var topics []string
	tp := e.client.NewListTopicsPager(&admin.ListTopicsOptions{MaxPageSize: 2})
	for tp.More() {
		page, err := tp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Topics {
			topics = append(topics, x.TopicName)
		}
	}
	if strings.Join(topics, ",") != "t1,t2,t3" {
		t.Errorf("topics = %v", topics)
	}
	var trt []string
	trp := e.client.NewListTopicsRuntimePropertiesPager(nil)
	for trp.More() {
		page, err := trp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.TopicRuntimeProperties {
			trt = append(trt, fmt.Sprintf("%s:%d", x.TopicName, x.SubscriptionCount))
		}
	}
	if strings.Join(trt, ",") != "t1:5,t2:0,t3:0" {
		t.Errorf("topic runtime = %v", trt)
	}

	e.tr.take()
	var subs [][]string
	sp := e.client.NewListSubscriptionsPager("t1", &admin.ListSubscriptionsOptions{MaxPageSize: 2})
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range page.Subscriptions {
			if s.TopicName != "t1" {
				t.Errorf("TopicName = %q", s.TopicName)
			}
			names = append(names, s.SubscriptionName)
		}
		subs = append(subs, names)
	}
	if fmt.Sprint(subs) != "[[s1 s2] [s3 s4] [s5]]" {
		t.Errorf("subscription pages = %v", subs)
	}
	// The SDK's stray empty parameter reaches the server and is ignored.
	if reqs := e.tr.take(); len(reqs) == 0 || !strings.Contains(reqs[0], "%3F=") {
		t.Errorf("requests = %q", reqs)
	}
	var srt []string
	srp := e.client.NewListSubscriptionsRuntimePropertiesPager("t1", nil)
	for srp.More() {
		page, err := srp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.SubscriptionRuntimeProperties {
			srt = append(srt, s.SubscriptionName)
		}
	}
	if len(srt) != 5 {
		t.Errorf("subscription runtime list = %v", srt)
	}
	// Listing subscriptions of a missing topic is a 404.
	mp := e.client.NewListSubscriptionsPager("nope", nil)
	if _, err := mp.NextPage(ctx); statusOf(err) != http.StatusNotFound {
		t.Errorf("list subscriptions of missing topic = %v", err)
	}
}

func TestRuntimeProperties(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if _, err := e.client.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := e.ns.Send("q", &goamqp.Message{Data: [][]byte{[]byte(fmt.Sprintf("message %d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := &goamqp.Message{Data: [][]byte{[]byte("later")},
		Annotations: goamqp.Annotations{"x-opt-scheduled-enqueue-time": time.Now().Add(time.Hour)}}
	if _, err := e.ns.Schedule("q", []*goamqp.Message{scheduled}); err != nil {
		t.Fatal(err)
	}
	deadLetterOne(t, e.ns, "q")

	rt, err := e.client.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil || rt == nil {
		t.Fatalf("GetQueueRuntimeProperties = %v, %v", rt, err)
	}
	if rt.ActiveMessageCount != 3 || rt.DeadLetterMessageCount != 1 || rt.ScheduledMessageCount != 1 ||
		rt.TransferDeadLetterMessageCount != 0 || rt.TransferMessageCount != 0 || rt.TotalMessageCount != 5 {
		t.Errorf("queue runtime = %+v", rt.QueueRuntimeProperties)
	}
	if rt.SizeInBytes <= 0 || rt.CreatedAt.IsZero() || rt.UpdatedAt.IsZero() || rt.AccessedAt.IsZero() {
		t.Errorf("queue runtime size/times = %+v", rt.QueueRuntimeProperties)
	}
	// Counts are read at request time.
	if err := e.ns.Send("q", &goamqp.Message{Data: [][]byte{[]byte("one more")}}); err != nil {
		t.Fatal(err)
	}
	rt, _ = e.client.GetQueueRuntimeProperties(ctx, "q", nil)
	if rt.ActiveMessageCount != 4 || rt.TotalMessageCount != 6 {
		t.Errorf("after another send: %+v", rt.QueueRuntimeProperties)
	}

	// Topic and subscription.
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if _, err := e.client.CreateSubscription(ctx, "t", s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.CreateRule(ctx, "t", "b", &admin.CreateRuleOptions{Name: to.Ptr("c"), Filter: &admin.CorrelationFilter{Subject: to.Ptr("x")}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.ns.Send("t", &goamqp.Message{Data: [][]byte{[]byte("fan out")}}); err != nil {
			t.Fatal(err)
		}
	}
	deadLetterOne(t, e.ns, "t/Subscriptions/a")
	// The topic holds its scheduled messages until they are due: they count
	// there, not in the subscriptions.
	later := &goamqp.Message{Data: [][]byte{[]byte("later")},
		Annotations: goamqp.Annotations{"x-opt-scheduled-enqueue-time": time.Now().Add(time.Hour)}}
	if _, err := e.ns.Schedule("t", []*goamqp.Message{later}); err != nil {
		t.Fatal(err)
	}

	srt, err := e.client.GetSubscriptionRuntimeProperties(ctx, "t", "a", nil)
	if err != nil || srt == nil {
		t.Fatalf("GetSubscriptionRuntimeProperties = %v, %v", srt, err)
	}
	if srt.ActiveMessageCount != 2 || srt.DeadLetterMessageCount != 1 || srt.TotalMessageCount != 3 ||
		srt.TransferDeadLetterMessageCount != 0 || srt.TransferMessageCount != 0 || srt.CreatedAt.IsZero() {
		t.Errorf("subscription runtime = %+v", srt.SubscriptionRuntimeProperties)
	}
	trt, err := e.client.GetTopicRuntimeProperties(ctx, "t", nil)
	if err != nil || trt == nil {
		t.Fatalf("GetTopicRuntimeProperties = %v, %v", trt, err)
	}
	// a: $Default (SQL-type true filter); b: $Default and correlation "c".
	if trt.SubscriptionCount != 2 || trt.SQLFilterCount != 2 || trt.CorrelationFilterCount != 1 || trt.CreatedAt.IsZero() ||
		trt.ScheduledMessageCount != 1 || trt.SizeInBytes <= 0 {
		t.Errorf("topic runtime = %+v", trt.TopicRuntimeProperties)
	}
}

// deadLetterOne receives the first message of path in peek-lock mode and
// dead-letters it, as a consumer on an AMQP link would.
func deadLetterOne(t *testing.T, ns *broker.Namespace, path string) {
	t.Helper()
	c, err := ns.NewConsumer(t.Context(), path, broker.ConsumerOptions{Mode: broker.PeekLock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, ok := c.Next()
	if !ok {
		t.Fatalf("no message to dead-letter in %s", path)
	}
	if err := ns.DeadLetter(d.LockToken, "Testing", "dead-lettered by the test", nil); err != nil {
		t.Fatal(err)
	}
}

func TestNamespaceProperties(t *testing.T) {
	e := newEnv(t, Options{})
	e.ns.SetName("sbemulatorns")
	resp, err := e.client.GetNamespaceProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Name != "sbemulatorns" || resp.SKU != "Standard" || resp.CreatedTime.IsZero() || resp.ModifiedTime.IsZero() || resp.MessagingUnits != nil {
		t.Errorf("namespace = %+v", resp.NamespaceProperties)
	}
}

func TestNotFoundAndConflict(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	if q, err := e.client.GetQueue(ctx, "missing", nil); q != nil || err != nil {
		t.Errorf("GetQueue = %v, %v", q, err)
	}
	if q, err := e.client.GetQueueRuntimeProperties(ctx, "missing", nil); q != nil || err != nil {
		t.Errorf("GetQueueRuntimeProperties = %v, %v", q, err)
	}
	if x, err := e.client.GetTopic(ctx, "missing", nil); x != nil || err != nil {
		t.Errorf("GetTopic = %v, %v", x, err)
	}
	if x, err := e.client.GetTopicRuntimeProperties(ctx, "missing", nil); x != nil || err != nil {
		t.Errorf("GetTopicRuntimeProperties = %v, %v", x, err)
	}
	if x, err := e.client.GetSubscription(ctx, "missing", "s", nil); x != nil || err != nil {
		t.Errorf("GetSubscription = %v, %v", x, err)
	}
	if x, err := e.client.GetSubscriptionRuntimeProperties(ctx, "missing", "s", nil); x != nil || err != nil {
		t.Errorf("GetSubscriptionRuntimeProperties = %v, %v", x, err)
	}
	if x, err := e.client.GetRule(ctx, "missing", "s", "r", nil); x != nil || err != nil {
		t.Errorf("GetRule = %v, %v", x, err)
	}
	if _, err := e.client.UpdateQueue(ctx, "missing", admin.QueueProperties{}, nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("UpdateQueue(missing) = %v, want 404", err)
	}
	if _, err := e.client.CreateSubscription(ctx, "missing", "s", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("CreateSubscription on a missing topic = %v, want 404", err)
	}

	if _, err := e.client.CreateQueue(ctx, "dup", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateQueue(ctx, "dup", nil); statusOf(err) != http.StatusConflict {
		t.Errorf("duplicate CreateQueue = %v, want 409", err)
	}
	if _, err := e.client.CreateQueue(ctx, "DUP", nil); statusOf(err) != http.StatusConflict {
		t.Errorf("CreateQueue with other case = %v, want 409", err)
	}
	if _, err := e.client.CreateTopic(ctx, "dup", nil); statusOf(err) != http.StatusConflict {
		t.Errorf("CreateTopic over a queue = %v, want 409", err)
	}
	if _, err := e.client.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(ctx, "t", "s", nil); statusOf(err) != http.StatusConflict {
		t.Errorf("duplicate CreateSubscription = %v, want 409", err)
	}
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	for name, connStr := range map[string]string{
		"wrong key":      strings.Replace(testConnStr, "SAS_KEY_VALUE", "wrong", 1),
		"wrong key name": strings.Replace(testConnStr, "RootManageSharedAccessKey", "Other", 1),
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, e.srv, connStr)
			_, err := c.GetQueue(ctx, "q", nil)
			if statusOf(err) != http.StatusUnauthorized {
				t.Errorf("GetQueue = %v, want 401", err)
			}
			if _, err := c.CreateQueue(ctx, "q", nil); statusOf(err) != http.StatusUnauthorized {
				t.Errorf("CreateQueue = %v, want 401", err)
			}
		})
	}
	if _, err := e.ns.Queue("q"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("an unauthorized create reached the broker: %v", err)
	}

	// A configured key: the default connection string no longer works.
	other := newEnv(t, Options{KeyName: "admin", Key: "s3cret"})
	if _, err := other.client.GetQueue(ctx, "q", nil); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("default key against a configured one = %v, want 401", err)
	}
	good := newClient(t, other.srv, "Endpoint=sb://127.0.0.1:5300;SharedAccessKeyName=admin;SharedAccessKey=s3cret;UseDevelopmentEmulator=true;")
	if _, err := good.GetQueue(ctx, "q", nil); err != nil {
		t.Errorf("configured key = %v", err)
	}

	// Tokens expire: a server clock three hours ahead rejects the SDK's two-hour tokens.
	late := newEnv(t, Options{Now: func() time.Time { return time.Now().Add(3 * time.Hour) }})
	if _, err := late.client.GetQueue(ctx, "q", nil); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("expired token = %v, want 401", err)
	}
}

func TestRawHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	if _, err := e.client.CreateQueue(t.Context(), "q", nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, auth, body string
		ifMatch                        bool
		code                           int
		want                           []string
	}{
		{"no token", "GET", "/q", "", "", false, 401, []string{"<Error><Code>401</Code><Detail>MissingToken"}},
		{"garbage token", "GET", "/q", "Basic x", "", false, 401, []string{"<Code>401</Code>", "not a SharedAccessSignature"}},
		{"bearer token without a JWT key", "GET", "/q", "Bearer x", "", false, 401, []string{"<Code>401</Code>", "no JWT key configured"}},
		{"malformed XML", "PUT", "/q2", "ok", "<entry><content>", false, 400, []string{"<Error><Code>400</Code><Detail>the request body is not a valid ATOM entry"}},
		{"empty body", "PUT", "/q2", "ok", "", false, 400, []string{"<Code>400</Code>", "request body is empty"}},
		{"no description", "PUT", "/q2", "ok", `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"></content></entry>`, false, 400, []string{"QueueDescription or a TopicDescription"}},
		{"bad duration", "PUT", "/q2", "ok", queueBody("<LockDuration>soon</LockDuration>"), false, 400, []string{`LockDuration: "soon" is not an ISO-8601 duration`}},
		{"lock too long", "PUT", "/q2", "ok", queueBody("<LockDuration>PT10M</LockDuration>"), false, 400, []string{"<Code>400</Code>"}},
		{"auto-delete below 5 minutes", "PUT", "/q2", "ok", queueBody("<AutoDeleteOnIdle>PT1M</AutoDeleteOnIdle>"), false, 400, []string{"<Code>400</Code>", "AutoDeleteOnIdle"}},
		{"bad bool", "PUT", "/q2", "ok", queueBody("<RequiresSession>maybe</RequiresSession>"), false, 400, []string{"<Code>400</Code>", "not a valid ATOM entry"}},
		{"bad status", "PUT", "/q2", "ok", queueBody("<Status>Sleeping</Status>"), false, 400, []string{`Status: "Sleeping" is not one of`}},
		{"zero delivery count", "PUT", "/q2", "ok", queueBody("<MaxDeliveryCount>0</MaxDeliveryCount>"), false, 400, []string{"MaxDeliveryCount: must be at least 1"}},
		{"bad skip", "GET", "/$Resources/Queues?$skip=x", "ok", "", false, 400, []string{"$skip must be a non-negative integer"}},
		{"bad filter type", "PUT", "/t/Subscriptions/s/Rules/r", "ok", `<entry><content><RuleDescription><Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="MagicFilter"/></RuleDescription></content></entry>`, false, 400, []string{"unsupported filter type"}},
		{"unknown resource", "GET", "/$Resources/EventHubs", "ok", "", false, 404, []string{"<Code>404</Code>"}},
		{"method", "POST", "/q", "ok", "", false, 405, []string{"<Code>405</Code>"}},
		{"get queue", "GET", "/q", "ok", "", false, 200, []string{
			`<entry xmlns="http://www.w3.org/2005/Atom">`, "<title type=\"text\">q</title>", "/q?api-version=2024-05</id>",
			`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">`,
			"<LockDuration>PT1M</LockDuration>", "<EnableExpress>false</EnableExpress>", "<EnablePartitioning>false</EnablePartitioning>",
			"<RequiresDuplicateDetection>false</RequiresDuplicateDetection>", "<DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow>",
			`<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>0</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>0</d2p1:DeadLetterMessageCount><d2p1:ScheduledMessageCount>0</d2p1:ScheduledMessageCount><d2p1:TransferMessageCount>0</d2p1:TransferMessageCount><d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount></CountDetails>`,
			"<DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive>", "<AccessedAt>",
		}},
		{"empty last page", "GET", "/$Resources/Queues?$skip=1&$top=5", "ok", "", false, 200, []string{`<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Queues</title>`, "</link></feed>"}},
		{"update missing", "PUT", "/q9", "ok", queueBody(""), true, 404, []string{"<Code>404</Code>"}},
	}
	if _, err := e.client.CreateTopic(t.Context(), "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSubscription(t.Context(), "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, e.srv.URL+tt.path, strings.NewReader(tt.body))
			q := req.URL.Query()
			q.Set("api-version", "2024-05")
			req.URL.RawQuery = q.Encode()
			switch tt.auth {
			case "ok":
				req.Header.Set("Authorization", sign(t, e.srv.URL+tt.path, "RootManageSharedAccessKey", "SAS_KEY_VALUE"))
			case "":
			default:
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.ifMatch {
				req.Header.Set("If-Match", "*")
			}
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Errorf("status = %d, want %d; body %s", resp.StatusCode, tt.code, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("body\n  %s\ndoes not contain\n  %s", body, w)
				}
			}
		})
	}
	if _, err := e.ns.Queue("q2"); err == nil {
		t.Error("a rejected PUT created q2")
	}
}

func queueBody(inner string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
		inner + `</QueueDescription></content></entry>`
}
