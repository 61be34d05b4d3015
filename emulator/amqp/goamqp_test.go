package amqp

import (
	"reflect"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// decodeSections decodes a marshalled message with Unmarshal and returns its
// sections by descriptor.
func decodeSections(t *testing.T, b []byte) map[uint64]any {
	t.Helper()
	sections := map[uint64]any{}
	for len(b) > 0 {
		v, n, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal section: %v (remaining % x)", err, b)
		}
		d, ok := v.(*Described)
		if !ok {
			t.Fatalf("section is %T, want *Described", v)
		}
		code, ok := d.Descriptor.(uint64)
		if !ok {
			t.Fatalf("section descriptor %#v is not a uint64", d.Descriptor)
		}
		if _, dup := sections[code]; dup && code != 0x75 {
			t.Fatalf("duplicate section 0x%x", code)
		}
		if code == 0x75 {
			// Several data sections: collect them in order.
			prev, _ := sections[code].([]any)
			sections[code] = append(prev, d.Value)
		} else {
			sections[code] = d.Value
		}
		b = b[n:]
	}
	return sections
}

// TestUnmarshalGoAMQPMessage checks that every section go-amqp writes for a
// Service Bus style message decodes with this package.
func TestUnmarshalGoAMQPMessage(t *testing.T) {
	created := time.UnixMilli(1_763_776_000_000).UTC()
	expiry := created.Add(time.Hour)
	lockToken := goamqp.UUID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	str := func(s string) *string { return &s }
	groupSeq := uint32(7)
	m := &goamqp.Message{
		Header: &goamqp.MessageHeader{Durable: true, Priority: 9, TTL: 90 * time.Second, FirstAcquirer: true, DeliveryCount: 3},
		DeliveryAnnotations: goamqp.Annotations{
			"x-opt-lock-token": lockToken,
		},
		Annotations: goamqp.Annotations{
			"x-opt-sequence-number": int64(42),
			"x-opt-enqueued-time":   created,
			"x-opt-message-state":   int64(0),
			"x-opt-partition-key":   "pk",
			int64(5):                "int key",
		},
		Properties: &goamqp.MessageProperties{
			MessageID:          "message-1",
			UserID:             []byte("user"),
			To:                 str("queue1"),
			Subject:            str("subject"),
			ReplyTo:            str("replies"),
			CorrelationID:      lockToken,
			ContentType:        str("application/json"),
			ContentEncoding:    str("gzip"),
			AbsoluteExpiryTime: &expiry,
			CreationTime:       &created,
			GroupID:            str("session-1"),
			GroupSequence:      &groupSeq,
			ReplyToGroupID:     str("reply-session"),
		},
		ApplicationProperties: map[string]any{
			"string":  "s",
			"int32":   int32(-5),
			"int64":   int64(1) << 40,
			"uint64":  uint64(1) << 63,
			"bool":    true,
			"double":  1.25,
			"float":   float32(2.5),
			"time":    created,
			"uuid":    lockToken,
			"binary":  []byte{0, 1},
			"nil":     nil,
			"int8":    int8(-1),
			"uint16":  uint16(65535),
			"strings": []string{"a", "b"},
		},
		Data:   [][]byte{[]byte(`{"hello":"world"}`), []byte("second")},
		Footer: goamqp.Annotations{"x-footer": "f"},
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s := decodeSections(t, b)

	wantHeader := []any{true, uint8(9), uint32(90000), true, uint32(3)}
	if !reflect.DeepEqual(s[0x70], wantHeader) {
		t.Errorf("header = %#v, want %#v", s[0x70], wantHeader)
	}
	wantDA := map[any]any{Symbol("x-opt-lock-token"): UUID(lockToken)}
	if !reflect.DeepEqual(s[0x71], wantDA) {
		t.Errorf("delivery-annotations = %#v, want %#v", s[0x71], wantDA)
	}
	wantMA := map[any]any{
		Symbol("x-opt-sequence-number"): int64(42),
		Symbol("x-opt-enqueued-time"):   created,
		Symbol("x-opt-message-state"):   int64(0),
		Symbol("x-opt-partition-key"):   "pk",
		int64(5):                        "int key",
	}
	if !reflect.DeepEqual(s[0x72], wantMA) {
		t.Errorf("message-annotations = %#v, want %#v", s[0x72], wantMA)
	}
	wantProps := []any{"message-1", []byte("user"), "queue1", "subject", "replies", UUID(lockToken),
		Symbol("application/json"), Symbol("gzip"), expiry, created, "session-1", uint32(7), "reply-session"}
	if !reflect.DeepEqual(s[0x73], wantProps) {
		t.Errorf("properties =\n%#v\nwant\n%#v", s[0x73], wantProps)
	}
	wantApp := map[any]any{
		"string": "s", "int32": int32(-5), "int64": int64(1) << 40, "uint64": uint64(1) << 63, "bool": true,
		"double": 1.25, "float": float32(2.5), "time": created, "uuid": UUID(lockToken), "binary": []byte{0, 1},
		"nil": nil, "int8": int8(-1), "uint16": uint16(65535), "strings": Array{"a", "b"},
	}
	if !reflect.DeepEqual(s[0x74], wantApp) {
		t.Errorf("application-properties =\n%#v\nwant\n%#v", s[0x74], wantApp)
	}
	wantData := []any{[]byte(`{"hello":"world"}`), []byte("second")}
	if !reflect.DeepEqual(s[0x75], wantData) {
		t.Errorf("data = %#v, want %#v", s[0x75], wantData)
	}
	if want := map[any]any{Symbol("x-footer"): "f"}; !reflect.DeepEqual(s[0x78], want) {
		t.Errorf("footer = %#v, want %#v", s[0x78], want)
	}
}

func TestUnmarshalGoAMQPBodies(t *testing.T) {
	tests := []struct {
		name string
		msg  *goamqp.Message
		code uint64
		want any
	}{
		{"amqp-value map", &goamqp.Message{Value: map[string]any{"statusCode": int32(200), "expirations": []time.Time{testTime}}},
			0x77, map[any]any{"statusCode": int32(200), "expirations": Array{testTime}}},
		{"amqp-value list", &goamqp.Message{Value: []any{int64(1), "x", []int64{1, 2}}},
			0x77, []any{int64(1), "x", Array{int64(1), int64(2)}}},
		{"amqp-value uuid array", &goamqp.Message{Value: []goamqp.UUID{{1}, {2}}},
			0x77, Array{UUID{1}, UUID{2}}},
		{"amqp-sequence", &goamqp.Message{Sequence: [][]any{{"a", int32(1)}}}, 0x76, []any{"a", int32(1)}},
		{"empty data", &goamqp.Message{Data: [][]byte{{}}}, 0x75, []any{[]byte{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.msg.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			s := decodeSections(t, b)
			if !reflect.DeepEqual(s[tt.code], tt.want) {
				t.Fatalf("section 0x%x = %#v, want %#v", tt.code, s[tt.code], tt.want)
			}
		})
	}
}

// TestGoAMQPUnmarshalsOurEncoding goes the other way: message sections built
// with AppendValue are read by go-amqp, the decoder the SDK uses.
func TestGoAMQPUnmarshalsOurEncoding(t *testing.T) {
	created := time.UnixMilli(1_763_776_000_000).UTC()
	token := UUID{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6}
	sections := []any{
		&Described{Descriptor: uint64(0x70), Value: []any{true, nil, uint32(5000), nil, uint32(2)}},
		&Described{Descriptor: uint64(0x71), Value: map[Symbol]any{"x-opt-lock-token": token}},
		&Described{Descriptor: uint64(0x72), Value: map[Symbol]any{
			"x-opt-sequence-number": int64(1) << 33,
			"x-opt-enqueued-time":   created,
			"x-opt-locked-until":    created.Add(time.Minute),
		}},
		&Described{Descriptor: uint64(0x73), Value: []any{"id-1", nil, "to", nil, nil, nil, Symbol("text/plain"), nil, nil, created, "sess"}},
		&Described{Descriptor: uint64(0x74), Value: map[string]any{
			"DeadLetterReason": "MaxDeliveryCountExceeded", "n": int64(3), "big": "x", "seqs": []int64{1, 2},
		}},
		&Described{Descriptor: uint64(0x75), Value: []byte("body")},
	}
	var b []byte
	for _, s := range sections {
		var err error
		if b, err = AppendValue(b, s); err != nil {
			t.Fatal(err)
		}
	}
	var m goamqp.Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatalf("go-amqp UnmarshalBinary: %v", err)
	}
	if m.Header == nil || !m.Header.Durable || m.Header.TTL != 5*time.Second || m.Header.DeliveryCount != 2 || m.Header.Priority != 4 {
		t.Errorf("header = %+v", m.Header)
	}
	if got := m.DeliveryAnnotations["x-opt-lock-token"]; got != goamqp.UUID(token) {
		t.Errorf("lock token = %#v", got)
	}
	if got := m.Annotations["x-opt-sequence-number"]; got != int64(1)<<33 {
		t.Errorf("sequence number = %#v", got)
	}
	if got, ok := m.Annotations["x-opt-enqueued-time"].(time.Time); !ok || !got.Equal(created) {
		t.Errorf("enqueued time = %#v", m.Annotations["x-opt-enqueued-time"])
	}
	p := m.Properties
	if p == nil || p.MessageID != "id-1" || p.To == nil || *p.To != "to" || p.ContentType == nil || *p.ContentType != "text/plain" ||
		p.CreationTime == nil || !p.CreationTime.Equal(created) || p.GroupID == nil || *p.GroupID != "sess" {
		t.Errorf("properties = %+v", p)
	}
	if m.ApplicationProperties["DeadLetterReason"] != "MaxDeliveryCountExceeded" || m.ApplicationProperties["n"] != int64(3) ||
		!reflect.DeepEqual(m.ApplicationProperties["seqs"], []int64{1, 2}) {
		t.Errorf("application properties = %#v", m.ApplicationProperties)
	}
	if len(m.Data) != 1 || string(m.Data[0]) != "body" {
		t.Errorf("data = %q", m.Data)
	}
}
