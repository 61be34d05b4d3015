package dlq

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
)

// TimeFormat is how the stable interface writes times: RFC 3339, UTC,
// milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// EncodeProperties turns application properties, as the Service Bus SDK
// decodes them, into the JSON of the stable interface: keys sorted; integers
// with every digit (never through a float); floats as JSON numbers, or as the
// strings "NaN", "+Inf", "-Inf"; booleans; strings; times as RFC 3339 UTC
// with milliseconds; byte slices as {"base64": "..."}; 16-byte arrays (AMQP
// UUIDs) as their canonical text; lists as arrays and maps as objects (keys
// sorted, nesting cut at 64 levels); nil as null; anything else as its %v
// text.
// A nil or empty map gives {}.
func EncodeProperties(props map[string]any) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, k)
		b.WriteByte(':')
		writeJSONValue(&b, props[k], 0)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// EncodeValue is the JSON of one AMQP value in the style of EncodeProperties
// (for bodies that are an AMQP value rather than bytes).
func EncodeValue(v any) []byte {
	var b bytes.Buffer
	writeJSONValue(&b, v, 0)
	return b.Bytes()
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
		writeJSONString(buf, x.UTC().Format(TimeFormat))
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
			writeJSONString(buf, IdentifierText(v))
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
				ks = IdentifierText(k)
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

// IdentifierText writes a non-string AMQP message or correlation id the way
// the .NET client shows it: a ulong in decimal, a uuid in its canonical
// form, binary in hex.
func IdentifierText(v any) string {
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
func writeJSONString(buf *bytes.Buffer, s string) {
	// json.Marshal of a string cannot fail; it replaces invalid UTF-8 with
	// U+FFFD and escapes <, > and & so the text is safe inside HTML too.
	out, _ := json.Marshal(s)
	buf.Write(out)
}

// The application properties Service Bus itself sets on a message it
// dead-letters: a replayed or edited copy must not carry them, or the fresh
// copy would look dead-lettered (the reason travels as
// dlqdash.dead_letter_reason instead).
const (
	PropBrokerDeadLetterReason      = "DeadLetterReason"
	PropBrokerDeadLetterDescription = "DeadLetterErrorDescription"
)

// IsBrokerDeadLetterProperty reports whether an application property is
// one the broker set when it dead-lettered the message.
func IsBrokerDeadLetterProperty(key string) bool {
	return key == PropBrokerDeadLetterReason || key == PropBrokerDeadLetterDescription
}
