package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/internal/isodur"
)

// maxFileSize bounds what Parse reads; real files are a few kilobytes.
const maxFileSize = 16 << 20

// Error is one problem in a configuration file.
type Error struct {
	File   string // set by Load
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based, in characters
	Path   string // JSON path such as UserConfig.Namespaces[0].Queues[2].Name; "" for syntax errors
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and parses the file at path. Errors name the file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return nil, withFile(err, filepath.Base(path))
	}
	return c, nil
}

func withFile(err error, file string) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ce *Error
		if errors.As(e, &ce) {
			ce.File = file
		}
	}
	return err
}

// Parse reads a Config.json document, applies defaults and validates it.
// The error, if any, joins one *Error per problem found.
func Parse(r io.Reader) (*Config, error) {
	src, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: read: %w", err)
	}
	if len(src) > maxFileSize {
		return nil, &Error{Msg: fmt.Sprintf("file is larger than %d bytes", maxFileSize)}
	}
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf")) // a UTF-8 BOM, as Windows editors write
	root, err := parseTree(src)
	if err != nil {
		return nil, err
	}
	w := &walker{src: src, pos: map[string]int{}}
	c := w.config(root)
	if len(w.errs) == 0 {
		w.errs = c.validate(w.locate)
	}
	if len(w.errs) > 0 {
		return nil, errors.Join(w.errs...)
	}
	return c, nil
}

// ---- a JSON tree that remembers where every value starts ----

type kind int

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

type node struct {
	kind    kind
	off     int
	b       bool
	s       string // string value, or the number's text
	elems   []*node
	members []member
}

type member struct {
	key string
	off int
	val *node
}

type treeParser struct {
	src []byte
	dec *json.Decoder
}

// maxDepth bounds nesting so a hostile file cannot exhaust the stack.
const maxDepth = 64

func parseTree(src []byte) (*node, error) {
	p := &treeParser{src: src, dec: json.NewDecoder(bytes.NewReader(src))}
	p.dec.UseNumber()
	if len(bytes.TrimSpace(src)) == 0 {
		return nil, &Error{Line: 1, Column: 1, Msg: "empty file: expected a JSON object with UserConfig"}
	}
	root, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		off := p.next()
		line, col := lineCol(src, off)
		return nil, &Error{Line: line, Column: col, Msg: "unexpected data after the top-level JSON value"}
	}
	return root, nil
}

// next is the offset of the next token: the decoder's offset may sit before
// whitespace or a ',' or ':' separator.
func (p *treeParser) next() int {
	off := int(p.dec.InputOffset())
	for off < len(p.src) {
		switch p.src[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *treeParser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(se.Offset) - 1
		if off < 0 {
			off = 0
		}
		line, col := lineCol(p.src, off)
		return &Error{Line: line, Column: col, Msg: "JSON syntax error: " + strings.TrimPrefix(se.Error(), "json: ")}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		line, col := lineCol(p.src, len(p.src))
		return &Error{Line: line, Column: col, Msg: "JSON syntax error: unexpected end of file"}
	}
	return &Error{Msg: "JSON syntax error: " + err.Error()}
}

func (p *treeParser) value(depth int) (*node, error) {
	if depth > maxDepth {
		line, col := lineCol(p.src, p.next())
		return nil, &Error{Line: line, Column: col, Msg: fmt.Sprintf("nesting deeper than %d levels", maxDepth)}
	}
	off := p.next()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(err)
	}
	n := &node{off: off}
	switch v := tok.(type) {
	case nil:
		n.kind = kNull
	case bool:
		n.kind, n.b = kBool, v
	case json.Number:
		n.kind, n.s = kNumber, string(v)
	case string:
		n.kind, n.s = kString, v
	case json.Delim:
		switch v {
		case '[':
			n.kind = kArray
			for p.dec.More() {
				e, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, e)
			}
		case '{':
			n.kind = kObject
			for p.dec.More() {
				koff := p.next()
				kt, err := p.dec.Token()
				if err != nil {
					return nil, p.syntax(err)
				}
				key, _ := kt.(string) // the decoder only yields string keys
				val, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, member{key: key, off: koff, val: val})
			}
		}
		if _, err := p.dec.Token(); err != nil { // the closing delimiter
			return nil, p.syntax(err)
		}
	}
	return n, nil
}

func lineCol(src []byte, off int) (line, col int) {
	if off > len(src) {
		off = len(src)
	}
	before := src[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[start:])
}

// ---- from the tree to Config, with type and shape checks ----

type walker struct {
	src  []byte
	errs []error
	pos  map[string]int // JSON path → offset, for errors found after the walk
}

func (w *walker) failAt(off int, path, format string, args ...any) {
	line, col := lineCol(w.src, off)
	w.errs = append(w.errs, &Error{Line: line, Column: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (w *walker) fail(n *node, path, format string, args ...any) {
	w.failAt(n.off, path, format, args...)
}

// locate gives the position recorded for path (or its nearest recorded parent).
func (w *walker) locate(path string) (line, col int) {
	for p := path; p != ""; {
		if off, ok := w.pos[p]; ok {
			return lineCol(w.src, off)
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0, 0
}

type field struct {
	name     string
	required bool
	set      func(v *node, path string)
}

// object checks that n is an object whose keys are all known (matched
// case-insensitively, each at most once) and calls set for each present,
// non-null field.
func (w *walker) object(n *node, path string, fields []field) {
	if n.kind != kObject {
		w.fail(n, path, "must be an object, got %s", n.kind)
		return
	}
	seen := map[string]string{}
	for _, m := range n.members {
		i := slices.IndexFunc(fields, func(f field) bool { return strings.EqualFold(f.name, m.key) })
		p := join(path, m.key)
		if i < 0 {
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.name
			}
			w.failAt(m.off, p, "unknown field %q (expected one of %s)", m.key, strings.Join(names, ", "))
			continue
		}
		f := fields[i]
		p = join(path, f.name)
		if prev, dup := seen[f.name]; dup {
			w.failAt(m.off, p, "field given twice (as %q and %q)", prev, m.key)
			continue
		}
		seen[f.name] = m.key
		w.pos[p] = m.val.off
		if m.val.kind == kNull {
			continue
		}
		f.set(m.val, p)
	}
	for _, f := range fields {
		if _, ok := seen[f.name]; f.required && !ok {
			w.fail(n, join(path, f.name), "required field is missing")
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (w *walker) array(n *node, path string, each func(i int, e *node, p string)) {
	if n.kind != kArray {
		w.fail(n, path, "must be an array, got %s", n.kind)
		return
	}
	for i, e := range n.elems {
		p := fmt.Sprintf("%s[%d]", path, i)
		w.pos[p] = e.off
		each(i, e, p)
	}
}

func (w *walker) str(dst *string) func(*node, string) {
	return func(n *node, path string) {
		if n.kind != kString {
			w.fail(n, path, "must be a string, got %s", n.kind)
			return
		}
		*dst = n.s
	}
}

func (w *walker) boolean(dst *bool) func(*node, string) {
	return func(n *node, path string) {
		if n.kind != kBool {
			w.fail(n, path, "must be true or false, got %s", n.kind)
			return
		}
		*dst = n.b
	}
}

func (w *walker) int32(dst *int32) func(*node, string) {
	return func(n *node, path string) {
		if n.kind != kNumber {
			w.fail(n, path, "must be an integer, got %s", n.kind)
			return
		}
		v, err := json.Number(n.s).Int64()
		if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
			w.fail(n, path, "must be an integer between %d and %d, got %s", math.MinInt32, math.MaxInt32, n.s)
			return
		}
		*dst = int32(v)
	}
}

func (w *walker) duration(dst *Duration) func(*node, string) {
	return func(n *node, path string) {
		if n.kind != kString {
			w.fail(n, path, "must be an ISO-8601 duration string such as \"PT1M\", got %s", n.kind)
			return
		}
		d, err := isodur.Parse(n.s)
		if err != nil {
			w.fail(n, path, "%q is not an ISO-8601 duration such as \"PT30S\", \"PT1M\" or \"P1D\"", n.s)
			return
		}
		*dst = Duration(d)
	}
}

func (w *walker) config(root *node) *Config {
	c := &Config{}
	w.object(root, "", []field{{name: "UserConfig", required: true, set: func(v *node, p string) {
		w.userConfig(v, p, &c.UserConfig)
	}}})
	return c
}

func (w *walker) userConfig(n *node, path string, uc *UserConfig) {
	w.object(n, path, []field{
		{name: "Namespaces", required: true, set: func(v *node, p string) {
			w.array(v, p, func(_ int, e *node, ep string) {
				uc.Namespaces = append(uc.Namespaces, w.namespace(e, ep))
			})
			if v.kind == kArray && len(v.elems) != 1 {
				w.fail(v, p, "dlqdash emulator serves exactly one namespace; found %d", len(v.elems))
			}
		}},
		{name: "Logging", set: func(v *node, p string) {
			w.object(v, p, []field{{name: "Type", set: func(t *node, tp string) {
				w.str(&uc.Logging.Type)(t, tp)
				if t.kind == kString && !slices.Contains([]string{"File", "Console", "File,Console", "Console,File"}, t.s) {
					w.fail(t, tp, "%q is not one of \"File\", \"Console\", \"File,Console\", \"Console,File\"", t.s)
				}
			}}})
		}},
	})
}

func (w *walker) namespace(n *node, path string) Namespace {
	var ns Namespace
	w.object(n, path, []field{
		{name: "Name", required: true, set: w.str(&ns.Name)},
		{name: "Queues", set: func(v *node, p string) {
			w.array(v, p, func(_ int, e *node, ep string) { ns.Queues = append(ns.Queues, w.queue(e, ep)) })
		}},
		{name: "Topics", set: func(v *node, p string) {
			w.array(v, p, func(_ int, e *node, ep string) { ns.Topics = append(ns.Topics, w.topic(e, ep)) })
		}},
	})
	return ns
}

func (w *walker) queue(n *node, path string) Queue {
	q := Queue{Properties: QueueProperties{
		DefaultMessageTimeToLive:            Duration(DefaultMessageTimeToLive),
		DuplicateDetectionHistoryTimeWindow: Duration(DefaultDuplicateDetectionHistoryTimeWindow),
		LockDuration:                        Duration(DefaultLockDuration),
		MaxDeliveryCount:                    DefaultMaxDeliveryCount,
	}}
	qp := &q.Properties
	w.object(n, path, []field{
		{name: "Name", required: true, set: w.str(&q.Name)},
		{name: "Properties", set: func(v *node, p string) {
			w.object(v, p, []field{
				{name: "DeadLetteringOnMessageExpiration", set: w.boolean(&qp.DeadLetteringOnMessageExpiration)},
				{name: "DefaultMessageTimeToLive", set: w.duration(&qp.DefaultMessageTimeToLive)},
				{name: "DuplicateDetectionHistoryTimeWindow", set: w.duration(&qp.DuplicateDetectionHistoryTimeWindow)},
				{name: "ForwardDeadLetteredMessagesTo", set: w.str(&qp.ForwardDeadLetteredMessagesTo)},
				{name: "ForwardTo", set: w.str(&qp.ForwardTo)},
				{name: "LockDuration", set: w.duration(&qp.LockDuration)},
				{name: "MaxDeliveryCount", set: w.int32(&qp.MaxDeliveryCount)},
				{name: "RequiresDuplicateDetection", set: w.boolean(&qp.RequiresDuplicateDetection)},
				{name: "RequiresSession", set: w.boolean(&qp.RequiresSession)},
			})
		}},
	})
	return q
}

func (w *walker) topic(n *node, path string) Topic {
	t := Topic{Properties: TopicProperties{
		DefaultMessageTimeToLive:            Duration(DefaultMessageTimeToLive),
		DuplicateDetectionHistoryTimeWindow: Duration(DefaultDuplicateDetectionHistoryTimeWindow),
	}}
	tp := &t.Properties
	w.object(n, path, []field{
		{name: "Name", required: true, set: w.str(&t.Name)},
		{name: "Properties", set: func(v *node, p string) {
			w.object(v, p, []field{
				{name: "DefaultMessageTimeToLive", set: w.duration(&tp.DefaultMessageTimeToLive)},
				{name: "DuplicateDetectionHistoryTimeWindow", set: w.duration(&tp.DuplicateDetectionHistoryTimeWindow)},
				{name: "RequiresDuplicateDetection", set: w.boolean(&tp.RequiresDuplicateDetection)},
			})
		}},
		{name: "Subscriptions", set: func(v *node, p string) {
			w.array(v, p, func(_ int, e *node, ep string) { t.Subscriptions = append(t.Subscriptions, w.subscription(e, ep)) })
		}},
	})
	return t
}

func (w *walker) subscription(n *node, path string) Subscription {
	s := Subscription{Properties: SubscriptionProperties{
		DefaultMessageTimeToLive: Duration(DefaultMessageTimeToLive),
		LockDuration:             Duration(DefaultLockDuration),
		MaxDeliveryCount:         DefaultMaxDeliveryCount,
	}}
	sp := &s.Properties
	w.object(n, path, []field{
		{name: "Name", required: true, set: w.str(&s.Name)},
		{name: "Properties", set: func(v *node, p string) {
			w.object(v, p, []field{
				{name: "DeadLetteringOnMessageExpiration", set: w.boolean(&sp.DeadLetteringOnMessageExpiration)},
				{name: "DefaultMessageTimeToLive", set: w.duration(&sp.DefaultMessageTimeToLive)},
				{name: "LockDuration", set: w.duration(&sp.LockDuration)},
				{name: "MaxDeliveryCount", set: w.int32(&sp.MaxDeliveryCount)},
				{name: "ForwardDeadLetteredMessagesTo", set: w.str(&sp.ForwardDeadLetteredMessagesTo)},
				{name: "ForwardTo", set: w.str(&sp.ForwardTo)},
				{name: "RequiresSession", set: w.boolean(&sp.RequiresSession)},
			})
		}},
		{name: "Rules", set: func(v *node, p string) {
			w.array(v, p, func(_ int, e *node, ep string) { s.Rules = append(s.Rules, w.rule(e, ep)) })
		}},
	})
	return s
}

func (w *walker) rule(n *node, path string) Rule {
	var r Rule
	rp := &r.Properties
	w.object(n, path, []field{
		{name: "Name", required: true, set: w.str(&r.Name)},
		{name: "Properties", required: true, set: func(v *node, p string) {
			w.object(v, p, []field{
				{name: "FilterType", required: true, set: w.str(&rp.FilterType)},
				{name: "CorrelationFilter", set: func(c *node, cp string) {
					rp.CorrelationFilter = w.correlation(c, cp)
				}},
				{name: "SqlFilter", set: func(s *node, sp string) {
					rp.SQLFilter = &SQLFilter{}
					w.object(s, sp, []field{{name: "SqlExpression", set: w.str(&rp.SQLFilter.SQLExpression)}})
				}},
				{name: "Action", set: func(a *node, ap string) {
					rp.Action = &Action{}
					w.object(a, ap, []field{{name: "SqlExpression", set: w.str(&rp.Action.SQLExpression)}})
				}},
			})
		}},
	})
	return r
}

func (w *walker) correlation(n *node, path string) *CorrelationFilter {
	cf := &CorrelationFilter{}
	w.object(n, path, []field{
		{name: "ContentType", set: w.str(&cf.ContentType)},
		{name: "CorrelationId", set: w.str(&cf.CorrelationID)},
		{name: "Label", set: w.str(&cf.Label)},
		{name: "MessageId", set: w.str(&cf.MessageID)},
		{name: "ReplyTo", set: w.str(&cf.ReplyTo)},
		{name: "ReplyToSessionId", set: w.str(&cf.ReplyToSessionID)},
		{name: "SessionId", set: w.str(&cf.SessionID)},
		{name: "To", set: w.str(&cf.To)},
		{name: "Properties", set: func(v *node, p string) {
			if v.kind != kObject {
				w.fail(v, p, "must be an object of application properties, got %s", v.kind)
				return
			}
			cf.Properties = map[string]any{}
			for _, m := range v.members {
				mp := p + "." + m.key
				w.pos[mp] = m.val.off
				if _, dup := cf.Properties[m.key]; dup {
					w.failAt(m.off, mp, "property given twice")
					continue
				}
				switch m.val.kind {
				case kString:
					cf.Properties[m.key] = m.val.s
				case kBool:
					cf.Properties[m.key] = m.val.b
				case kNumber:
					if i, err := json.Number(m.val.s).Int64(); err == nil {
						cf.Properties[m.key] = i
					} else if f, err := json.Number(m.val.s).Float64(); err == nil {
						cf.Properties[m.key] = f
					} else {
						w.fail(m.val, mp, "number %s is out of range", m.val.s)
					}
				default:
					w.fail(m.val, mp, "must be a string, number or boolean, got %s", m.val.kind)
				}
			}
		}},
	})
	return cf
}
