package servicebus

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
)

func TestConvertMessageTimes(t *testing.T) {
	enq := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	seq := int64(5)
	zero, hour := time.Duration(0), time.Hour
	expAt := enq.Add(hour)
	abs := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

	// The SDK's view of a message whose header had no ttl: 0 and an expiry
	// equal to the enqueued time.
	m := convertMessage(&azservicebus.ReceivedMessage{SequenceNumber: &seq, EnqueuedTime: &enq, TimeToLive: &zero, ExpiresAt: &enq})
	if m.TimeToLive != nil || m.ExpiresAt != nil {
		t.Errorf("ttl 0: TimeToLive %v ExpiresAt %v, want both unset", m.TimeToLive, m.ExpiresAt)
	}
	if m.EnqueuedAt.Location() != time.UTC || !m.EnqueuedAt.Equal(enq) {
		t.Errorf("EnqueuedAt %v, want %v in UTC", m.EnqueuedAt, enq)
	}
	if m.Body == nil || len(m.Body) != 0 || string(m.ApplicationProperties) != "{}" || m.State != dlq.StateActive {
		t.Errorf("empty message: body %v props %s state %s", m.Body, m.ApplicationProperties, m.State)
	}

	m = convertMessage(&azservicebus.ReceivedMessage{SequenceNumber: &seq, EnqueuedTime: &enq, TimeToLive: &hour, ExpiresAt: &expAt})
	if m.TimeToLive == nil || *m.TimeToLive != hour || m.ExpiresAt == nil || !m.ExpiresAt.Equal(expAt) {
		t.Errorf("ttl 1h: %v %v", m.TimeToLive, m.ExpiresAt)
	}

	m = convertMessage(&azservicebus.ReceivedMessage{SequenceNumber: &seq, TimeToLive: &zero,
		RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Properties: &azservicebus.AMQPAnnotatedMessageProperties{AbsoluteExpiryTime: &abs}}})
	if m.TimeToLive != nil || m.ExpiresAt == nil || !m.ExpiresAt.Equal(abs) {
		t.Errorf("absolute expiry: %v %v", m.TimeToLive, m.ExpiresAt)
	}

	for s, want := range map[azservicebus.MessageState]dlq.State{
		azservicebus.MessageStateActive: dlq.StateActive, azservicebus.MessageStateDeferred: dlq.StateDeferred,
		azservicebus.MessageStateScheduled: dlq.StateScheduled, 9: dlq.StateActive,
	} {
		if got := convertMessage(&azservicebus.ReceivedMessage{SequenceNumber: &seq, State: s}).State; got != want {
			t.Errorf("state %d: %s, want %s", s, got, want)
		}
	}
}

func TestConvertMessageIdentifiers(t *testing.T) {
	seq := int64(1)
	u := amqp.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	for _, tt := range []struct {
		id   any
		want string
	}{
		{uint64(42), "42"},
		{u, "12345678-9abc-def0-0123-456789abcdef"},
		{[16]byte(u), "12345678-9abc-def0-0123-456789abcdef"},
		{[]byte{0xca, 0xfe}, "cafe"},
		{"s", "s"},
	} {
		m := convertMessage(&azservicebus.ReceivedMessage{SequenceNumber: &seq, RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: tt.id, CorrelationID: tt.id}}})
		if m.MessageID != tt.want || m.CorrelationID == nil || *m.CorrelationID != tt.want {
			t.Errorf("id %#v: MessageID %q CorrelationID %v, want %q", tt.id, m.MessageID, m.CorrelationID, tt.want)
		}
	}
	// The SDK's string id wins.
	s := "sdk"
	m := convertMessage(&azservicebus.ReceivedMessage{SequenceNumber: &seq, MessageID: s, CorrelationID: &s,
		RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: uint64(1), CorrelationID: uint64(2)}}})
	if m.MessageID != "sdk" || *m.CorrelationID != "sdk" {
		t.Errorf("got %q %q", m.MessageID, *m.CorrelationID)
	}
}

func TestBodyBytes(t *testing.T) {
	deep := any("leaf")
	for range 100 {
		deep = []any{deep}
	}
	for _, tt := range []struct {
		name string
		body azservicebus.AMQPAnnotatedMessageBody
		sdk  []byte
		want string
	}{
		{"one data section", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("x")}}, []byte("x"), "x"},
		{"data sections", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("a"), {}, []byte("bc")}}, nil, "abc"},
		{"string value", azservicebus.AMQPAnnotatedMessageBody{Value: "héllo"}, nil, "héllo"},
		{"symbol value", azservicebus.AMQPAnnotatedMessageBody{Value: amqp.Symbol("sym")}, nil, "sym"},
		{"binary value", azservicebus.AMQPAnnotatedMessageBody{Value: []byte{0xff, 0}}, nil, "\xff\x00"},
		{"int value", azservicebus.AMQPAnnotatedMessageBody{Value: int64(math.MaxInt64)}, nil, "9223372036854775807"},
		{"float values", azservicebus.AMQPAnnotatedMessageBody{Value: []any{math.NaN(), math.Inf(1), math.Inf(-1), 0.5, float32(0.1)}}, nil, `["NaN","+Inf","-Inf",0.5,0.1]`},
		{"map with any keys", azservicebus.AMQPAnnotatedMessageBody{Value: map[any]any{"b": nil, int64(1): true, amqp.Symbol("a"): time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}}, nil,
			`{"1":true,"a":"2026-01-02T03:04:05.006Z","b":null}`},
		{"typed array", azservicebus.AMQPAnnotatedMessageBody{Value: []int32{1, -2}}, nil, `[1,-2]`},
		{"uuid and binary in a list", azservicebus.AMQPAnnotatedMessageBody{Value: []any{amqp.UUID{15: 1}, []byte("hi")}}, nil, `["00000000-0000-0000-0000-000000000001",{"base64":"aGk="}]`},
		{"html-ish string in a map", azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"<k>": "a&b"}}, nil, `{"\u003ck\u003e":"a\u0026b"}`},
		{"sequences", azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a", int64(1)}, {}, {true}}}, nil, `["a",1,true]`},
		{"empty", azservicebus.AMQPAnnotatedMessageBody{}, nil, ""},
	} {
		if got := string(bodyBytes(tt.body, tt.sdk)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	// Attacker-controlled nesting is bounded.
	got := string(bodyBytes(azservicebus.AMQPAnnotatedMessageBody{Value: deep}, nil))
	if !strings.Contains(got, `"…"`) || strings.Contains(got, "leaf") {
		t.Errorf("deep nesting not cut: %.80s", got)
	}
}

func TestSplitSubscription(t *testing.T) {
	for _, tt := range []struct {
		path, topic, sub string
		ok               bool
	}{
		{"payments/Subscriptions/audit", "payments", "audit", true},
		{"payments/subscriptions/audit", "payments", "audit", true},
		{"a/b/Subscriptions/c", "a/b", "c", true},
		{"orders", "", "", false},
		{"a/b", "", "", false},
		{"/Subscriptions/x", "", "", false},
		{"t/Subscriptions/", "", "", false},
		{"Subscriptions/x", "", "", false},
	} {
		topic, sub, ok := splitSubscription(tt.path)
		if topic != tt.topic || sub != tt.sub || ok != tt.ok {
			t.Errorf("splitSubscription(%q) = %q, %q, %v", tt.path, topic, sub, ok)
		}
	}
}
