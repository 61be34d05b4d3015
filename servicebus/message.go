package servicebus

import (
	"bytes"
	"reflect"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
)

// convertMessage turns a peeked message into the domain's. The caller has
// checked that it has a sequence number. See the package documentation for
// the rules where the SDK's fields are not the whole story (bodies that are
// not one data section, identifiers that are not strings, time-to-live).
func convertMessage(rm *azservicebus.ReceivedMessage) dlq.Message {
	m := dlq.Message{
		SequenceNumber:             *rm.SequenceNumber,
		State:                      convertState(rm.State),
		MessageID:                  rm.MessageID,
		CorrelationID:              rm.CorrelationID,
		SessionID:                  rm.SessionID,
		PartitionKey:               rm.PartitionKey,
		Subject:                    rm.Subject,
		ContentType:                rm.ContentType,
		ReplyTo:                    rm.ReplyTo,
		ReplyToSessionID:           rm.ReplyToSessionID,
		To:                         rm.To,
		DeadLetterReason:           rm.DeadLetterReason,
		DeadLetterErrorDescription: rm.DeadLetterErrorDescription,
		DeadLetterSource:           rm.DeadLetterSource,
		DeliveryCount:              rm.DeliveryCount,
		EnqueuedAt:                 utc(rm.EnqueuedTime),
		ScheduledEnqueueAt:         utc(rm.ScheduledEnqueueTime),
		ApplicationProperties:      dlq.EncodeProperties(rm.ApplicationProperties),
		Body:                       rm.Body,
	}
	raw := rm.RawAMQPMessage
	if raw != nil && raw.Properties != nil {
		// The SDK keeps only string identifiers; AMQP also allows ulong,
		// uuid and binary ones, which other clients (JMS, Qpid) send.
		if m.MessageID == "" && raw.Properties.MessageID != nil {
			m.MessageID = dlq.IdentifierText(raw.Properties.MessageID)
		}
		if m.CorrelationID == nil && raw.Properties.CorrelationID != nil {
			s := dlq.IdentifierText(raw.Properties.CorrelationID)
			m.CorrelationID = &s
		}
	}
	// An AMQP header without a ttl decodes as 0, which the SDK reports as a
	// time-to-live of 0 and an expiry equal to the enqueued time. A message
	// that lives 0 s does not exist: treat it as unset.
	if rm.TimeToLive != nil && *rm.TimeToLive > 0 {
		ttl := *rm.TimeToLive
		m.TimeToLive = &ttl
		m.ExpiresAt = utc(rm.ExpiresAt)
	} else if raw != nil && raw.Properties != nil && raw.Properties.AbsoluteExpiryTime != nil && !raw.Properties.AbsoluteExpiryTime.IsZero() {
		m.ExpiresAt = utc(raw.Properties.AbsoluteExpiryTime)
	}
	if raw != nil {
		m.Body = bodyBytes(raw.Body, rm.Body)
	}
	if m.Body == nil {
		m.Body = []byte{}
	}
	return m
}

func convertState(s azservicebus.MessageState) dlq.State {
	switch s {
	case azservicebus.MessageStateDeferred:
		return dlq.StateDeferred
	case azservicebus.MessageStateScheduled:
		return dlq.StateScheduled
	}
	return dlq.StateActive
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// bodyBytes picks the bytes that stand for an AMQP body:
//
//   - one data section: its bytes (what the SDK's Body is);
//   - several data sections: their concatenation, as the .NET client reads
//     them;
//   - an amqp-value: a string as its UTF-8 bytes, binary as itself, anything
//     else (numbers, lists, maps, times, uuids) as JSON in the style of the
//     application properties;
//   - amqp-sequence sections: one JSON array of all their items in order.
//
// Only the first two are exact; replaying a value or sequence body as data
// changes its encoding.
func bodyBytes(b azservicebus.AMQPAnnotatedMessageBody, sdk []byte) []byte {
	switch {
	case len(b.Data) == 1:
		return sdk
	case len(b.Data) > 1:
		return bytes.Join(b.Data, nil)
	case b.Value != nil:
		if v, ok := b.Value.([]byte); ok {
			return v
		}
		if rv := reflect.ValueOf(b.Value); rv.Kind() == reflect.String { // string, amqp.Symbol
			return []byte(rv.String())
		}
		return dlq.EncodeValue(b.Value)
	case b.Sequence != nil:
		var buf bytes.Buffer
		buf.WriteByte('[')
		n := 0
		for _, section := range b.Sequence {
			for _, item := range section {
				if n > 0 {
					buf.WriteByte(',')
				}
				buf.Write(dlq.EncodeValue(item))
				n++
			}
		}
		buf.WriteByte(']')
		return buf.Bytes()
	}
	return sdk
}
