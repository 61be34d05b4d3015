package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The JSON API under /api/v1 (docs/api.md). Handlers are the same shape as the
// pages' (they return errors); s.api adapts them with serveAPIError instead
// of the error pages (handler.go). Objects are written by package apijson,
// which export shares.

// apiNotFound answers paths under /api/ that name no endpoint.
func (s *Server) apiNotFound(w http.ResponseWriter, r *http.Request) error {
	return notFound("no API endpoint %s %s; the endpoints are listed in the API documentation", r.Method, r.URL.Path)
}

// writeJSON writes v with status. Encoding happens first, so a value that
// cannot be encoded becomes a 500 rather than half an answer.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// encoding/json escapes <, > and & by default: message data stays inert
	// even if something renders the JSON as HTML.
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"the answer could not be encoded"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
}

// query is a request's query parameters, read once each: names nobody read
// are reported by done, so a misspelt filter is an error rather than a
// silently wider result (which a bulk replay of "the filter" would act on).
type query struct {
	values url.Values
	read   map[string]bool
	// form marks the query of an HTML form (GET): empty fields mean
	// absent, and times may be a datetime-local input's value, taken as UTC.
	form bool
}

// newFormQuery reads the query of a page's GET form with the API's rules,
// except that empty fields are left out and times may be written as a
// datetime-local input writes them (2026-11-22T10:42 or with seconds), in UTC.
func newFormQuery(r *http.Request) (*query, error) {
	q, err := newQuery(r)
	if err != nil {
		return nil, err
	}
	q.form = true
	for name, vs := range q.values {
		vs = slices.DeleteFunc(vs, func(v string) bool { return strings.TrimSpace(v) == "" })
		if len(vs) == 0 {
			delete(q.values, name)
		} else {
			q.values[name] = vs
		}
	}
	return q, nil
}

func newQuery(r *http.Request) (*query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalidArgument("query", "the query string is malformed: %v", err)
	}
	return &query{values: v, read: map[string]bool{}}, nil
}

// one returns the single value of name ("" if absent); repeating it is an
// error.
func (q *query) one(name string) (string, error) {
	q.read[name] = true
	vs := q.values[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], textParam(name, vs[0])
	}
	return "", invalidArgument(name, "%s is given %d times; give it once", name, len(vs))
}

// textParam refuses a parameter value no text of dlqdash holds: a NUL byte
// (dlq's filter refuses it in its own keys the same way).
func textParam(name, v string) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return invalidArgument(name, "%s holds a NUL byte (at byte %d): remove it", name, i)
	}
	return nil
}

// mark records names as read by a parser of their own (dlq's filter).
func (q *query) mark(names ...string) {
	for _, name := range names {
		q.read[name] = true
	}
}

// all returns every value of a repeatable parameter.
func (q *query) all(name string) []string {
	q.read[name] = true
	return q.values[name]
}

// done reports the first parameter no one asked for.
func (q *query) done() error {
	var unknown []string
	for name := range q.values {
		if !q.read[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	var names []string
	for name := range q.read {
		names = append(names, name)
	}
	sort.Strings(names)
	return invalidArgument(unknown[0], "unknown parameter %q; this endpoint takes %s", unknown[0], strings.Join(names, ", "))
}

// boolean reads true/false/1/0.
func (q *query) boolean(name string) (bool, error) {
	v, err := q.one(name)
	if err != nil {
		return false, err
	}
	switch v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, invalidArgument(name, "%s must be true, false, 1 or 0, not %q", name, v)
}

// time reads an RFC 3339 time; nil when absent.
func (q *query) time(name string) (*time.Time, error) {
	v, err := q.one(name)
	if err != nil || v == "" {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil && q.form {
		for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999"} {
			if t, err = time.ParseInLocation(layout, v, time.UTC); err == nil {
				break
			}
		}
	}
	if err != nil {
		if q.form {
			return nil, invalidArgument(name, "%s must be a date and time in UTC such as 2026-11-22T10:42, not %q", name, v)
		}
		return nil, invalidArgument(name, "%s must be an RFC 3339 time such as 2026-11-22T10:42:07Z, not %q", name, v)
	}
	return &t, nil
}

// page reads a keyset page's limit (def when absent, at most max) and
// cursor.
func (q *query) page(def, max int) (int, string, error) {
	limit, err := q.limit(def, max)
	if err != nil {
		return 0, "", err
	}
	cursor, err := q.one("cursor")
	return limit, cursor, err
}

// nextCursor is the next_cursor of a page: null after the last.
func nextCursor(next string) *string {
	if next == "" {
		return nil
	}
	return &next
}

// limit reads a page size: def when absent, at most max.
func (q *query) limit(def, max int) (int, error) {
	v, err := q.one("limit")
	if err != nil || v == "" {
		return def, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, invalidArgument("limit", "limit must be a whole number from 1 to %d, not %q", max, v)
	}
	return n, nil
}
