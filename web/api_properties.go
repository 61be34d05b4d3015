package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/dlqdash/dlqdash/dlq"
)

// propertySuggester is a catalog that can say which application property
// keys a list's messages have, and a key's common values (counted over the
// list's newest messages: dlq.PropertySample).
type propertySuggester interface {
	PropertyKeys(ctx context.Context, f dlq.Filter, n int) ([]dlq.PropertyCount, error)
	PropertyValues(ctx context.Context, f dlq.Filter, key string, n int) ([]dlq.PropertyCount, error)
}

// How many keys and values GET /api/v1/messages/properties returns.
const (
	maxPropertyKeys   = 50
	maxPropertyValues = 20
)

// messageProperties answers GET /api/v1/messages/properties: the
// application property keys of the messages matching the filters of GET
// /api/v1/messages, the most common first, or with key=K, K's most common
// values: what the list's property filter offers.
func (s *Server) messageProperties(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	f, err := parseFilter(q)
	if err != nil {
		return err
	}
	key, err := q.one("key")
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	type keyCount struct {
		Key   string `json:"key"`
		Count int64  `json:"count"`
	}
	type valueCount struct {
		Value string `json:"value"`
		Count int64  `json:"count"`
	}
	keys := struct {
		Keys   []keyCount `json:"keys"`
		Sample int        `json:"sample"`
	}{Keys: []keyCount{}, Sample: dlq.PropertySample}
	values := struct {
		Key    string       `json:"key"`
		Values []valueCount `json:"values"`
		Sample int          `json:"sample"`
	}{Key: key, Values: []valueCount{}, Sample: dlq.PropertySample}
	f = s.countFilter(r, f)
	empty, err := s.filterScope(r, &f)
	if err != nil {
		return err
	}
	src, ok := s.catalog.(propertySuggester)
	if ok && !empty {
		if key == "" {
			ks, err := src.PropertyKeys(r.Context(), f, maxPropertyKeys)
			if err != nil {
				return fmt.Errorf("property keys: %w", err)
			}
			for _, k := range ks {
				keys.Keys = append(keys.Keys, keyCount{text(k.Text), k.Count})
			}
		} else {
			vs, err := src.PropertyValues(r.Context(), f, key, maxPropertyValues)
			if err != nil {
				return fmt.Errorf("property values: %w", err)
			}
			for _, v := range vs {
				values.Values = append(values.Values, valueCount{text(v.Text), v.Count})
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	if key != "" {
		writeJSON(w, r, http.StatusOK, values)
	} else {
		writeJSON(w, r, http.StatusOK, keys)
	}
	return nil
}
