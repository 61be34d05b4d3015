package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dlqdash/dlqdash/dlq"
)

// The property filter's suggestions: which application property keys the
// messages of a list have, and a key's common values. Counting them over
// every message of a broad list would read a million JSON objects, so they
// are counted over a sample: the newest dlq.PropertySample messages of the
// list, found as a page of that many is (the list's plan, one bounded
// walk), or for a search its newest hits by id, each message's properties
// read once.

// sampleProperties is the SQL (and its arguments) of the properties of the
// newest dlq.PropertySample messages matching f, as a subquery's column
// "properties"; "" when nothing can match.
func (s *Store) sampleProperties(ctx context.Context, f dlq.Filter) (string, []any, error) {
	if strings.TrimSpace(f.Query) != "" {
		// A search's newest hits (by catalog id, nearly arrival order),
		// each row read by id, when that is cheaper than the list's plan
		// (which, for a common word, collects every hit first).
		sd, err := s.searchDrive(ctx, f, dlq.PropertySample)
		if err != nil || sd.empty {
			return "", nil, err
		}
		if !sd.declined {
			return "SELECT m.properties AS properties " + sd.from + " ORDER BY f.rowid DESC LIMIT ?", append(sd.args, dlq.PropertySample), nil
		}
	}
	p, err := s.planList(ctx, f, dlq.PropertySample)
	if err != nil || p.empty {
		return "", nil, err
	}
	where, args := p.bounded(nil)
	key, id := p.keys()
	q := "SELECT m.properties AS properties FROM " + p.from() + whereClause(where) +
		" ORDER BY " + key + " DESC, " + id + " DESC LIMIT ?"
	return q, append(args, dlq.PropertySample), nil
}

// PropertyKeys returns the application property keys of the newest
// dlq.PropertySample messages matching f, the most common first (then by key),
// at most n.
func (s *Store) PropertyKeys(ctx context.Context, f dlq.Filter, n int) ([]dlq.PropertyCount, error) {
	sample, args, err := s.sampleProperties(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("property keys: %w", err)
	}
	if sample == "" {
		return nil, nil
	}
	if s.eng.postgres {
		out, err := s.propertyCountsPG(ctx, sample, args, func(kv [2]string) (string, bool) { return kv[0], true }, n)
		if err != nil {
			return nil, fmt.Errorf("property keys: %w", err)
		}
		return out, nil
	}
	out, err := s.propertyCounts(ctx, `SELECT j.key, count(*) FROM (`+sample+`) s, json_each(s.properties) j
		WHERE json_valid(s.properties) AND json_type(s.properties) = 'object'
		GROUP BY j.key ORDER BY count(*) DESC, j.key LIMIT ?`, append(args, n)...)
	if err != nil {
		return nil, fmt.Errorf("property keys: %w", err)
	}
	return out, nil
}

// PropertyValues returns the values of the application property key among
// the newest dlq.PropertySample messages matching f, as a property filter
// compares them (a string's characters, anything else its JSON text), the
// most common first (then by value), at most n. Values longer than a
// filter indexes (256 bytes) are left out.
func (s *Store) PropertyValues(ctx context.Context, f dlq.Filter, key string, n int) ([]dlq.PropertyCount, error) {
	sample, args, err := s.sampleProperties(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("property values: %w", err)
	}
	if sample == "" {
		return nil, nil
	}
	if s.eng.postgres {
		out, err := s.propertyCountsPG(ctx, sample, args, func(kv [2]string) (string, bool) {
			return kv[1], kv[0] == key && len(kv[1]) <= maxIndexedValue
		}, n)
		if err != nil {
			return nil, fmt.Errorf("property values: %w", err)
		}
		return out, nil
	}
	args = append(args, key, maxIndexedValue, n)
	out, err := s.propertyCounts(ctx, `SELECT v, count(*) FROM (
			SELECT CASE j.type WHEN 'text' THEN j.value ELSE s.properties -> j.fullkey END AS v
			FROM (`+sample+`) s, json_each(s.properties) j
			WHERE json_valid(s.properties) AND json_type(s.properties) = 'object' AND j.key = ?)
		WHERE length(CAST(v AS BLOB)) <= ? GROUP BY v ORDER BY count(*) DESC, v LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("property values: %w", err)
	}
	return out, nil
}

func (s *Store) propertyCounts(ctx context.Context, q string, args ...any) ([]dlq.PropertyCount, error) {
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dlq.PropertyCount{}
	for rows.Next() {
		var c dlq.PropertyCount
		if err := rows.Scan(&c.Text, &c.Count); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// propertyCountsPG counts, on PostgreSQL, what of reads from each
// top-level property of the sample's messages (propertyValues: the pairs
// SQLite's json_each gives, a value as the property filter compares it),
// in Go: the sample is at most dlq.PropertySample rows. The order is
// SQLite's: the most common first, then by bytes; at most n.
func (s *Store) propertyCountsPG(ctx context.Context, sample string, args []any, of func([2]string) (string, bool), n int) ([]dlq.PropertyCount, error) {
	rows, err := s.reader.QueryContext(ctx, sample, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var props string
		if err := rows.Scan(&props); err != nil {
			return nil, err
		}
		for _, kv := range propertyValues([]byte(props)) {
			if text, ok := of(kv); ok {
				counts[text]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]dlq.PropertyCount, 0, len(counts))
	for text, c := range counts {
		out = append(out, dlq.PropertyCount{Text: text, Count: c})
	}
	slices.SortFunc(out, func(a, b dlq.PropertyCount) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return strings.Compare(a.Text, b.Text)
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}
