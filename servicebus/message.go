package servicebus

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
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
			m.MessageID = identifierText(raw.Properties.MessageID)
		}
		if m.CorrelationID == nil && raw.Properties.CorrelationID != nil {
			s := identifierText(raw.Properties.CorrelationID)
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

// identifierText writes a non-string AMQP message or correlation id the way
// the .NET client shows it: a ulong in decimal, a uuid in its canonical
// form, binary in hex.
func identifierText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return fmt.Sprintf("%x", x)
	case [16]byte:
		return uuidText(x)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Array && rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
		var u [16]byte
		reflect.Copy(reflect.ValueOf(u[:]), rv)
		return uuidText(u)
	}
	return fmt.Sprint(v)
}

func uuidText(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
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
		var buf bytes.Buffer
		writeJSONValue(&buf, b.Value, 0)
		return buf.Bytes()
	case b.Sequence != nil:
		var buf bytes.Buffer
		buf.WriteByte('[')
		n := 0
		for _, section := range b.Sequence {
			for _, item := range section {
				if n > 0 {
					buf.WriteByte(',')
				}
				writeJSONValue(&buf, item, 0)
				n++
			}
		}
		buf.WriteByte(']')
		return buf.Bytes()
	}
	return sdk
}

// maxJSONDepth bounds the recursion over attacker-controlled nesting.
const maxJSONDepth = 64

// writeJSONValue writes an AMQP value as JSON: integers with every digit,
// floats as numbers (or "NaN", "+Inf", "-Inf"), times as RFC 3339 UTC with
// milliseconds, binary as {"base64": "..."}, uuids in canonical form, maps
// as objects (non-string keys written as their text, keys sorted), lists and
// arrays as arrays.
func writeJSONValue(buf *bytes.Buffer, v any, depth int) {
	if depth > maxJSONDepth {
		buf.WriteString(`"…"`)
		return
	}
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
		return
	case time.Time:
		writeJSONString(buf, x.UTC().Format(dlq.TimeFormat))
		return
	case []byte:
		buf.WriteString(`{"base64":`)
		writeJSONString(buf, base64.StdEncoding.EncodeToString(x))
		buf.WriteByte('}')
		return
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		buf.WriteString(strconv.FormatBool(rv.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		buf.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		buf.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		switch {
		case math.IsNaN(f):
			buf.WriteString(`"NaN"`)
		case math.IsInf(f, 1):
			buf.WriteString(`"+Inf"`)
		case math.IsInf(f, -1):
			buf.WriteString(`"-Inf"`)
		default:
			bits := 64
			if rv.Kind() == reflect.Float32 {
				bits = 32
			}
			buf.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
		}
	case reflect.String:
		writeJSONString(buf, rv.String())
	case reflect.Array:
		if rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
			writeJSONString(buf, identifierText(v))
			return
		}
		writeJSONList(buf, rv, depth)
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			writeJSONValue(buf, rv.Bytes(), depth)
			return
		}
		writeJSONList(buf, rv, depth)
	case reflect.Map:
		type entry struct {
			key string
			val any
		}
		entries := make([]entry, 0, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key().Interface()
			ks, ok := k.(string)
			if !ok {
				ks = identifierText(k)
			}
			entries = append(entries, entry{ks, iter.Value().Interface()})
		}
		slices.SortFunc(entries, func(a, b entry) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		buf.WriteByte('{')
		for i, e := range entries {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, e.key)
			buf.WriteByte(':')
			writeJSONValue(buf, e.val, depth+1)
		}
		buf.WriteByte('}')
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			buf.WriteString("null")
			return
		}
		writeJSONValue(buf, rv.Elem().Interface(), depth+1)
	default:
		writeJSONString(buf, fmt.Sprint(v))
	}
}

func writeJSONList(buf *bytes.Buffer, rv reflect.Value, depth int) {
	buf.WriteByte('[')
	for i := range rv.Len() {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONValue(buf, rv.Index(i).Interface(), depth+1)
	}
	buf.WriteByte(']')
}

func writeJSONString(buf *bytes.Buffer, s string) {
	// Cannot fail for a string; invalid UTF-8 becomes U+FFFD.
	out, _ := json.Marshal(s)
	buf.Write(out)
}
