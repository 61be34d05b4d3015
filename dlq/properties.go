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
// UUIDs) as their canonical text; nil as null; anything else as its %v text.
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
		writePropertyValue(&b, props[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

func writePropertyValue(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case time.Time:
		writeJSONString(b, x.UTC().Format(TimeFormat))
	case []byte:
		b.WriteString(`{"base64":`)
		writeJSONString(b, base64.StdEncoding.EncodeToString(x))
		b.WriteByte('}')
	default:
		writeReflected(b, v)
	}
}

func writeReflected(b *bytes.Buffer, v any) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(rv.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		switch {
		case math.IsNaN(f):
			b.WriteString(`"NaN"`)
		case math.IsInf(f, 1):
			b.WriteString(`"+Inf"`)
		case math.IsInf(f, -1):
			b.WriteString(`"-Inf"`)
		default:
			bits := 64
			if rv.Kind() == reflect.Float32 {
				bits = 32
			}
			b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
		}
	case reflect.String:
		writeJSONString(b, rv.String())
	case reflect.Array:
		if rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
			var u [16]byte
			reflect.Copy(reflect.ValueOf(u[:]), rv)
			writeJSONString(b, fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]))
			return
		}
		writeJSONString(b, fmt.Sprint(v))
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			writePropertyValue(b, rv.Bytes())
			return
		}
		writeJSONString(b, fmt.Sprint(v))
	default:
		writeJSONString(b, fmt.Sprint(v))
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	// json.Marshal of a string cannot fail; it replaces invalid UTF-8 with
	// U+FFFD and escapes <, > and & so the text is safe inside HTML too.
	out, _ := json.Marshal(s)
	b.Write(out)
}
