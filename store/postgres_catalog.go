package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The catalog's writes that SQLite does in SQL over what it just stored,
// done on PostgreSQL from the same values in Go: the search documents
// (tsvector, search.go) and the property rows (propertyValues), written by
// copyMessagesPG (postgres_ingest.go). Both produce what the SQLite
// statements produce; the conformance tests compare the results.

// propertyValues are the top-level (key, value) pairs of a JSON object, the
// value as the property filter compares it (a string's characters as
// encoding/json decodes them, anything else its compacted JSON text); none
// when js is not a JSON object. A repeated key gives a pair each time.
//
// It runs for every message the PostgreSQL ingest writes, so after
// json.Valid it walks the object's top level itself, and decodes with
// encoding/json only a string holding an escape or invalid UTF-8 and a
// value holding whitespace (TestPropertyValuesAsDecoded compares it with
// encoding/json's Decoder).
func propertyValues(js []byte) [][2]string {
	var out [][2]string
	if !eachPropertyValue(js, func(key, value []byte) { out = append(out, [2]string{string(key), string(value)}) }) {
		return nil
	}
	return out
}

// eachPropertyValue calls fn with each of propertyValues' pairs, in order,
// and reports whether js is a JSON object (false: fn was not called, or
// its pairs are to be dropped). key and value are valid during the call
// only: they are js's own bytes where they need no decoding, so the walk
// allocates nothing for the common property.
func eachPropertyValue(js []byte, fn func(key, value []byte)) bool {
	if !json.Valid(js) {
		return false
	}
	i := skipJSONSpace(js, 0)
	if i >= len(js) || js[i] != '{' {
		return false
	}
	i++
	for {
		i = skipJSONSpace(js, i)
		switch js[i] {
		case '}':
			return true
		case ',':
			i = skipJSONSpace(js, i+1)
		}
		end := jsonStringEnd(js, i)
		key, ok := jsonStringBytes(js[i:end])
		if !ok {
			return false
		}
		i = skipJSONSpace(js, end) + 1 // the colon
		i = skipJSONSpace(js, i)
		end = jsonValueEnd(js, i)
		value := js[i:end]
		if value[0] == '"' {
			if value, ok = jsonStringBytes(value); !ok {
				return false
			}
		} else if bytes.ContainsAny(value, " \t\n\r") {
			var b bytes.Buffer
			if err := json.Compact(&b, value); err != nil {
				return false
			}
			value = b.Bytes()
		}
		fn(key, value)
		i = end
	}
}

func skipJSONSpace(js []byte, i int) int {
	for i < len(js) && (js[i] == ' ' || js[i] == '\t' || js[i] == '\n' || js[i] == '\r') {
		i++
	}
	return i
}

// jsonStringEnd is the index after the string that starts at js[i] (valid
// JSON).
func jsonStringEnd(js []byte, i int) int {
	for i++; i < len(js); i++ {
		switch js[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(js)
}

// jsonValueEnd is the index after the value that starts at js[i] (valid
// JSON).
func jsonValueEnd(js []byte, i int) int {
	switch js[i] {
	case '"':
		return jsonStringEnd(js, i)
	case '{', '[':
		depth := 0
		for i < len(js) {
			switch js[i] {
			case '"':
				i = jsonStringEnd(js, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(js)
	}
	for i < len(js) && !strings.ContainsRune(",}] \t\n\r", rune(js[i])) {
		i++
	}
	return i
}

// jsonStringBytes is the JSON string quoted (quotes included) decoded as
// encoding/json decodes it: quoted's own bytes when it holds no escape
// and valid UTF-8.
func jsonStringBytes(quoted []byte) ([]byte, bool) {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}
