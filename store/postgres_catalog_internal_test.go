package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// decodedPropertyValues is propertyValues through encoding/json's Decoder:
// what it did before it walked the object itself, kept as the reference.
func decodedPropertyValues(js []byte) [][2]string {
	if !json.Valid(js) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out [][2]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		var value string
		if len(raw) > 0 && raw[0] == '"' {
			if err := json.Unmarshal(raw, &value); err != nil {
				return nil
			}
		} else {
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return nil
			}
			value = b.String()
		}
		out = append(out, [2]string{key, value})
	}
	return out
}

// TestPropertyValuesAsDecoded: propertyValues gives what encoding/json's
// Decoder gives, for hand-picked objects and non-objects and for 20,000
// random objects (nested values, whitespace, escapes, invalid UTF-8,
// repeated keys).
func TestPropertyValuesAsDecoded(t *testing.T) {
	cases := []string{
		``, `null`, `[]`, `"x"`, `12`, `{`, `{"a":1,}`, `{} x`, `{}`, ` { } `,
		`{"a":1}`, `{"a": "b", "a": "b"}`, "{\"t\":\"a\\tb\", \"u\":\"\\u00e9\\ud83d\\ude00\"}",
		"{\"bad\":\"\xff\xfe\", \"\xff\":1}", `{"n": -1.50e+10, "t": true, "f": false, "z": null}`,
		"{ \"o\" : { \"x\" : [ 1 , \"a b\" , { } ] } ,\n\"s\":\"q\\\"}\"}", `{"a":"}","b":"]","c":"\\"}`,
		`{"deep":[[[["x"]]]],"e":{}}`, "{\"ws\":\"a\tb\"}",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		cases = append(cases, randomObject(r, 0))
	}
	for _, c := range cases {
		got, want := propertyValues([]byte(c)), decodedPropertyValues([]byte(c))
		if !slices.Equal(got, want) {
			t.Fatalf("%q: %q, want %q", c, got, want)
		}
	}
}

func randomObject(r *rand.Rand, depth int) string {
	var b strings.Builder
	ws := func() {
		if r.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[r.IntN(4)])
		}
	}
	ws()
	b.WriteByte('{')
	n := r.IntN(6)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		ws()
		b.WriteString(randomJSONString(r))
		ws()
		b.WriteByte(':')
		ws()
		b.WriteString(randomValue(r, depth))
		ws()
	}
	b.WriteByte('}')
	ws()
	return b.String()
}

func randomValue(r *rand.Rand, depth int) string {
	switch k := r.IntN(8); {
	case k == 0 && depth < 3:
		return randomObject(r, depth+1)
	case k == 1 && depth < 3:
		parts := []string{}
		for range r.IntN(4) {
			parts = append(parts, randomValue(r, depth+1))
		}
		sep := []string{",", " , ", ",\n"}[r.IntN(3)]
		return "[" + strings.Join(parts, sep) + "]"
	case k == 2:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case k == 3:
		return []string{"0", "-12", "3.25", "1e9", "-0.5E-3", "12345678901234567890"}[r.IntN(6)]
	default:
		return randomJSONString(r)
	}
}

func randomJSONString(r *rand.Rand) string {
	pieces := []string{"a", "key", " ", "é", "😀", `\"`, `\\`, `\n`, `\t`, `\u00e9`, `\ud83d\ude00`, `\/`, "\xff", "}", "]", ",", ":", "{", "["}
	var b strings.Builder
	b.WriteByte('"')
	for range r.IntN(6) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	b.WriteByte('"')
	return b.String()
}

// BenchmarkPropertyValues: a message's properties as the synthetic catalog
// has them, walked (propertyValues) and through the Decoder (before).
func BenchmarkPropertyValues(b *testing.B) {
	js := []byte(`{"tenant":"tenant-0042","region":"westeurope","priority":"high","attempt":3,` +
		`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","amount":1234.5,"orderType":"express"}`)
	b.Run("walked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			propertyValues(js)
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodedPropertyValues(js)
		}
	})
}
