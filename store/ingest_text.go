package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Limits of what the catalog derives from a body for lists and search.
const (
	// previewRunes is how much of a text body a list shows.
	previewRunes = 160
	// maxIndexedBody is how much of a text body full-text search indexes:
	// a 200 KiB JSON document is searchable by what its first 32 KiB say.
	maxIndexedBody = 32 << 10
)

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// bodyText returns the part of a body worth indexing and previewing, and
// whether the body is text at all: valid UTF-8 without NUL bytes.
func bodyText(b []byte) (string, bool) {
	text, ok := textPart(b)
	return string(text), ok
}

// textPart is bodyText's part of b, without copying it.
func textPart(b []byte) ([]byte, bool) {
	if len(b) > maxIndexedBody {
		b = b[:maxIndexedBody]
		// Do not let the cut split a rune and turn a text body into "binary".
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return nil, false
	}
	return b, true
}

// bodyPreview is the start of a text body with whitespace collapsed, and
// "" for a binary body (bodyText). It copies only what the preview shows.
func bodyPreview(body []byte) string {
	text, isText := textPart(body)
	if !isText {
		return ""
	}
	var b strings.Builder
	b.Grow(min(len(text), previewRunes+len("…")))
	n := 0
	space := false
	for len(text) > 0 {
		r, size := utf8.DecodeRune(text)
		text = text[size:]
		if n >= previewRunes {
			b.WriteString("…")
			break
		}
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
			n++
		}
		space = false
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// ReplayCountProperty is the application property a replayed copy carries
// (docs/api.md): how many times its lineage was replayed.
const ReplayCountProperty = "dlqdash.replay_count"

// replayCountOf reads ReplayCountProperty from a properties object; 0 when
// absent or not a whole number. Only copies carry it, so the common case is
// one substring test.
func replayCountOf(props string) int64 {
	if !strings.Contains(props, ReplayCountProperty) {
		return 0
	}
	dec := json.NewDecoder(strings.NewReader(props))
	dec.UseNumber()
	var all map[string]any
	if dec.Decode(&all) != nil {
		return 0
	}
	n, ok := all[ReplayCountProperty].(json.Number)
	if !ok {
		return 0
	}
	v, err := n.Int64()
	if err != nil || v < 0 {
		return 0
	}
	return v
}
