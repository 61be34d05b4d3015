package amqpserver

import (
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

// encodeMessage encodes a stamped broker delivery for the wire, for link
// transfers and $management replies alike.
//
// go-amqp's MarshalBinary leaves delivery-count (and other default values)
// out of the header section. The Go SDK applies the AMQP defaults, but some
// other clients do not and read a missing delivery-count as absent
// (docs/servicebus-protocol.md §17), so the header is written here with every field present and
// the rest of the message by go-amqp.
func encodeMessage(m *goamqp.Message) ([]byte, error) {
	if m.Header == nil {
		return m.MarshalBinary()
	}
	h := m.Header
	var ttl any // null: no time-to-live
	if h.TTL > 0 {
		ttl = uint32(h.TTL / time.Millisecond)
	}
	out, err := amqp.AppendValue(nil, &amqp.Described{
		Descriptor: uint64(0x70),
		Value:      []any{h.Durable, h.Priority, ttl, h.FirstAcquirer, h.DeliveryCount},
	})
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	rest := *m
	rest.Header = nil
	tail, err := rest.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return append(out, tail...), nil
}
