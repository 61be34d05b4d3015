package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxTransformMessages bounds the messages one bulk edit applies to: each
// copy's body is worked out before the job starts (and kept with it).
const MaxTransformMessages = 1000

// Transform is one fix applied to each message of a selection before it is
// replayed (the API's "edit" of POST /api/v1/jobs): find-and-replace on the
// body's text, then JSON-path sets on the body's JSON. The result of each is
// a message's own Edit.
type Transform struct {
	// JSONSet sets values in a JSON body: a path such as $.customer.id or
	// $.items[0].sku, and the JSON value to put there. Missing object keys
	// along the path are created; array indices must exist.
	JSONSet map[string]json.RawMessage `json:"json_set,omitempty"`
	// Replace replaces every occurrence of each Find in the body's text
	// with With, in order.
	Replace []Replacement `json:"replace,omitempty"`
}

// Replacement is one find-and-replace.
type Replacement struct {
	Find string `json:"find"`
	With string `json:"with"`
}

// Empty reports whether t changes nothing.
func (t *Transform) Empty() bool { return t == nil || len(t.JSONSet) == 0 && len(t.Replace) == 0 }

// Check refuses a transform that could never apply: an empty find, a path
// that does not parse, a value that is not JSON. The error names the
// field (json_set or replace).
func (t *Transform) Check() error {
	for i, r := range t.Replace {
		if r.Find == "" {
			return &InvalidError{Param: "edit.replace", Msg: fmt.Sprintf("replacement %d has nothing to find", i+1)}
		}
	}
	for p, v := range t.JSONSet {
		if _, err := parsePath(p); err != nil {
			return &InvalidError{Param: "edit.json_set", Msg: err.Error()}
		}
		if !json.Valid(v) {
			return &InvalidError{Param: "edit.json_set", Msg: fmt.Sprintf("the value for %s is not JSON", p)}
		}
	}
	return nil
}

// Apply returns body with the transform applied. A body that is not text
// takes no replacement, and one that is not a JSON value no JSON-path set:
// the error says so (the message cannot take this fix). With JSON-path
// sets, the body is written back as compact JSON, its keys in their order.
func (t *Transform) Apply(body []byte) ([]byte, error) {
	out := body
	if len(t.Replace) > 0 {
		if !utf8.Valid(body) {
			return nil, errors.New("the body is not text, so find-and-replace does not apply")
		}
		s := string(body)
		for _, r := range t.Replace {
			s = strings.ReplaceAll(s, r.Find, r.With)
		}
		out = []byte(s)
	}
	if len(t.JSONSet) == 0 {
		return out, nil
	}
	doc, err := decodeOrdered(out)
	if err != nil {
		return nil, fmt.Errorf("the body is not JSON, so a JSON-path set does not apply: %w", err)
	}
	// In a stable order: the paths sorted.
	paths := make([]string, 0, len(t.JSONSet))
	for p := range t.JSONSet {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		steps, err := parsePath(p)
		if err != nil {
			return nil, err
		}
		v, err := decodeOrdered(t.JSONSet[p])
		if err != nil {
			return nil, fmt.Errorf("the value for %s: %w", p, err)
		}
		if doc, err = setPath(doc, steps, v, p); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	encodeOrdered(&b, doc)
	return b.Bytes(), nil
}

// A path step: an object key, or an array index (key == "" and index >= 0).
type pathStep struct {
	key   string
	index int
}

// parsePath reads $.a.b[0]["c d"]: a dollar, then .name, [n] or ["name"]
// steps.
func parsePath(p string) ([]pathStep, error) {
	bad := func(why string) error {
		return fmt.Errorf("path %q: %s (write $.customer.id, $.items[0].sku or $[\"a key\"])", p, why)
	}
	if !strings.HasPrefix(p, "$") {
		return nil, bad("it must start with $")
	}
	rest := p[1:]
	var steps []pathStep
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			if n == 0 {
				return nil, bad("a name is missing after a dot")
			}
			steps = append(steps, pathStep{key: rest[:n], index: -1})
			rest = rest[n:]
		case strings.HasPrefix(rest, `["`):
			// A quoted key, JSON string rules.
			dec := json.NewDecoder(strings.NewReader(rest[1:]))
			var k string
			if err := dec.Decode(&k); err != nil {
				return nil, bad("a quoted key does not end")
			}
			rest = rest[1+int(dec.InputOffset()):]
			if !strings.HasPrefix(rest, "]") {
				return nil, bad("a quoted key is not closed with ]")
			}
			rest = rest[1:]
			steps = append(steps, pathStep{key: k, index: -1})
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, bad("a [ is not closed")
			}
			n, err := strconv.Atoi(rest[1:end])
			if err != nil || n < 0 {
				return nil, bad("an index must be a whole number")
			}
			steps = append(steps, pathStep{index: n})
			rest = rest[end+1:]
		default:
			return nil, bad(fmt.Sprintf("unexpected %q", rest[:1]))
		}
	}
	if len(steps) == 0 {
		return nil, bad("it names the whole body; name a key inside it")
	}
	return steps, nil
}

// The ordered JSON tree: objects keep their keys' order, numbers their
// text.
type (
	jsonObject []jsonMember
	jsonMember struct {
		key string
		val any
	}
)

func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

const maxTransformDepth = 256

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxTransformDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := jsonObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj = append(obj, jsonMember{kt.(string), v})
			}
			_, err := dec.Token()
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}

func setPath(doc any, steps []pathStep, v any, p string) (any, error) {
	if len(steps) == 0 {
		return v, nil
	}
	s := steps[0]
	if s.index >= 0 && s.key == "" {
		arr, ok := doc.([]any)
		if !ok {
			return nil, fmt.Errorf("path %s: not an array where it has an index", p)
		}
		if s.index >= len(arr) {
			return nil, fmt.Errorf("path %s: index %d is past the array's end (%d items)", p, s.index, len(arr))
		}
		nv, err := setPath(arr[s.index], steps[1:], v, p)
		if err != nil {
			return nil, err
		}
		arr[s.index] = nv
		return arr, nil
	}
	var obj jsonObject
	switch d := doc.(type) {
	case jsonObject:
		obj = d
	case nil:
		obj = jsonObject{} // a missing key along the path
	default:
		return nil, fmt.Errorf("path %s: %q is not inside an object", p, s.key)
	}
	for i, m := range obj {
		if m.key == s.key {
			nv, err := setPath(m.val, steps[1:], v, p)
			if err != nil {
				return nil, err
			}
			obj[i].val = nv
			return obj, nil
		}
	}
	nv, err := setPath(nil, steps[1:], v, p)
	if err != nil {
		return nil, err
	}
	return append(obj, jsonMember{s.key, nv}), nil
}

func encodeOrdered(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case jsonObject:
		b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONText(b, m.key)
			b.WriteByte(':')
			encodeOrdered(b, m.val)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeOrdered(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(x.String())
	case string:
		writeJSONText(b, x)
	default:
		e, _ := json.Marshal(x)
		b.Write(e)
	}
}

// writeJSONText writes a JSON string without escaping <, > and & (a body
// keeps its characters).
func writeJSONText(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}
