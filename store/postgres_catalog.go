package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
)

// The catalog's writes that SQLite does in SQL over what it just stored,
// done on PostgreSQL from the same values in Go: the search documents
// (tsvector, search.go) and the property rows. Both produce what the
// SQLite statements produce; the conformance tests compare the results.

// insertSearchRowsPG inserts the search documents args holds (pairs of
// message id and tsvector text).
func insertSearchRowsPG(ctx context.Context, tx *sql.Tx, args []any) error {
	const perStatement = 1000
	for len(args) > 0 {
		n := min(len(args)/2, perStatement)
		q := "INSERT INTO messages_fts (rowid, doc) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, CAST(? AS tsvector)), ", n), ", ")
		if _, err := tx.ExecContext(ctx, q, args[:n*2]...); err != nil {
			return fmt.Errorf("index for search: %w", err)
		}
		args = args[n*2:]
	}
	return nil
}

// indexPropertiesPG writes the message_properties rows of msgs, inserted
// with ids: what propertyRowsOf selects on SQLite, one row per top-level
// property of properties that are a JSON object, with the value as the
// property filter compares it (a string's characters, anything else its
// JSON text), values over maxIndexedValue bytes left out.
func indexPropertiesPG(ctx context.Context, tx *sql.Tx, msgs []newMessage, ids []int64) error {
	const perStatement = 1000
	args := make([]any, 0, 4*perStatement)
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		q := "INSERT INTO message_properties (key, value, at, message_id) VALUES " + placeholders(len(args)/4, 4) +
			" ON CONFLICT DO NOTHING"
		_, err := tx.ExecContext(ctx, q, args...)
		args = args[:0]
		if err != nil {
			return fmt.Errorf("index properties: %w", err)
		}
		return nil
	}
	for i, nm := range msgs {
		props := nm.m.ApplicationProperties
		if len(props) == 0 {
			continue // stored as {}: no rows
		}
		at := int64(-1)
		if nm.m.EnqueuedAt != nil {
			at = nm.m.EnqueuedAt.UTC().UnixMilli()
		}
		for _, kv := range propertyValues(props) {
			if len(kv[1]) > maxIndexedValue {
				continue
			}
			args = append(args, kv[0], kv[1], at, ids[i])
			if len(args) == 4*perStatement {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

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
