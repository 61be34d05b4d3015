package amqpserver

import (
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

func TestEncodeMessageWritesEveryHeaderField(t *testing.T) {
	tests := []struct {
		name   string
		header goamqp.MessageHeader
		ttl    any
	}{
		{"first delivery, no TTL", goamqp.MessageHeader{Priority: 4}, nil},
		{"redelivered with TTL", goamqp.MessageHeader{Durable: true, Priority: 7, TTL: 90 * time.Second, DeliveryCount: 3}, uint32(90000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			m := &goamqp.Message{
				Header:                &h,
				Properties:            &goamqp.MessageProperties{MessageID: "m-1"},
				Annotations:           goamqp.Annotations{"x-opt-sequence-number": int64(42)},
				ApplicationProperties: map[string]any{"k": "v"},
				Data:                  [][]byte{[]byte("body")},
			}
			b, err := encodeMessage(m)
			if err != nil {
				t.Fatal(err)
			}

			// The header section on the wire carries all five fields,
			// delivery-count included even when it is 0.
			v, _, err := amqp.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := v.(*amqp.Described)
			if !ok || d.Descriptor != uint64(0x70) {
				t.Fatalf("first section = %#v, want the header (0x70)", v)
			}
			fields, _ := d.Value.([]any)
			if len(fields) != 5 || fields[4] != h.DeliveryCount || fields[2] != tt.ttl {
				t.Fatalf("header fields = %#v, want 5 with ttl %v and delivery-count %d", fields, tt.ttl, h.DeliveryCount)
			}

			// And the whole message still decodes to what went in.
			var got goamqp.Message
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if *got.Header != h || got.Properties.MessageID != "m-1" || got.Annotations["x-opt-sequence-number"] != int64(42) ||
				got.ApplicationProperties["k"] != "v" || string(got.Data[0]) != "body" {
				t.Errorf("round trip: header %+v, properties %+v, annotations %v, app %v, data %q",
					*got.Header, got.Properties, got.Annotations, got.ApplicationProperties, got.Data)
			}
		})
	}
}
