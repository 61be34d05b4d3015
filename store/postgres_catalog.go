package store

import (
	"bytes"
	"encoding/json"
)

// The catalog's writes that SQLite does in SQL over what it just stored,
// done on PostgreSQL from the same values in Go: the search documents
// (tsvector, search.go) and the property rows (propertyValues), written by
// copyMessagesPG (postgres_ingest.go). Both produce what the SQLite
// statements produce; the conformance tests compare the results.

// propertyValues are the top-level (key, value) pairs of a JSON object, the
// value as the property filter compares it; none when js is not a JSON
// object.
func propertyValues(js []byte) [][2]string {
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
