package dlq

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Group is a failure group: dead letters with the same reason and the same
// description once the parts that vary between occurrences (numbers, GUIDs,
// timestamps, hex ids, email addresses) are replaced by placeholders.
type Group struct {
	ID                 string // stable: derived from Reason and Pattern
	Reason             string
	DescriptionPattern string
}

// maxPatternLen bounds a group's pattern: descriptions can be huge (stack
// traces), and two that agree this far are the same failure for triage.
const maxPatternLen = 512

var normalisers = []struct {
	re   *regexp.Regexp
	with string
	// can reports whether the expression can match s at all, by a
	// character every match contains: most descriptions then skip most
	// expressions (running all eight was a tenth of the catalog's write
	// time, issue 18). It must never say no to a string re matches.
	can func(s string) bool
	// replace, when set, does what re's replacement does, without the
	// regular expression engine (the two that nearly every description
	// runs, a twentieth of the ingest's CPU at a million, issue 18;
	// TestNormaliseSkipsOnlyWhatCannotMatch compares it with re).
	replace func(s string) string
}{
	// Order matters: the specific shapes go before the digits they contain.
	// Email addresses, malformed ones too ("chen@@example"): a bounce names
	// its recipient.
	{regexp.MustCompile(`[A-Za-z0-9._%+-]+@[@A-Za-z0-9._-]*[A-Za-z0-9]`), "<email>", has("@"), nil},
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<guid>", has("-"), nil},
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?`), "<time>", has("-", ":", digit), nil},
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`), "<date>", has("-", digit), nil},
	{regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b`), "<time>", has(":", digit), nil},
	{regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`), "<hex>", has("0", "xX"), nil},
	// A run of 8+ hex characters with at least one digit and one letter:
	// trace ids, hashes, lock tokens.
	{regexp.MustCompile(`(?i)\b[0-9a-f]*(?:[0-9][a-f]|[a-f][0-9])[0-9a-f]*\b`), "<hexid>", has(digit), replaceHexIDs},
	{regexp.MustCompile(`[-+]?\d+(?:[.,]\d+)*`), "<n>", has(digit), replaceNumbers},
}

// replaceHexIDs is the <hexid> expression's replacement: a word (a run of
// ASCII letters, digits and '_', which is where \b sits) of 8 or more
// characters, all hex digits, with a digit next to a letter somewhere.
func replaceHexIDs(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b (once b is used)
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j, hex, mixed := i, true, false
		for ; j < len(s) && isWordByte(s[j]); j++ {
			if !isHexByte(s[j]) {
				hex = false
			} else if j > i && isHexByte(s[j-1]) && isDigitByte(s[j]) != isDigitByte(s[j-1]) {
				mixed = true
			}
		}
		if hex && mixed && j-i >= 8 {
			b.WriteString(s[done:i])
			b.WriteString("<hexid>")
			done = j
		}
		i = j
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// replaceNumbers is the <n> expression's replacement: an optional sign,
// digits, and any further groups of digits after a '.' or ','.
func replaceNumbers(s string) string {
	var b strings.Builder
	done, used := 0, false
	for i := 0; i < len(s); {
		start := i
		if (s[i] == '-' || s[i] == '+') && i+1 < len(s) && isDigitByte(s[i+1]) {
			i++
		} else if !isDigitByte(s[i]) {
			i++
			continue
		}
		for i < len(s) && isDigitByte(s[i]) {
			i++
		}
		for i+1 < len(s) && (s[i] == '.' || s[i] == ',') && isDigitByte(s[i+1]) {
			for i++; i < len(s) && isDigitByte(s[i]); i++ {
			}
		}
		b.WriteString(s[done:start])
		b.WriteString("<n>")
		done, used = i, true
	}
	if !used {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

func isDigitByte(c byte) bool { return '0' <= c && c <= '9' }

func isHexByte(c byte) bool {
	return isDigitByte(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func isWordByte(c byte) bool {
	return isDigitByte(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '_'
}

const digit = "0123456789"

// has is a normaliser's can: s holds at least one character of each set.
func has(sets ...string) func(string) bool {
	return func(s string) bool {
		for _, set := range sets {
			if !strings.ContainsAny(s, set) {
				return false
			}
		}
		return true
	}
}

var spaces = regexp.MustCompile(`\s+`)

// NormaliseDescription replaces what varies between occurrences of the same
// failure, so "Timeout after 30012 ms" and "Timeout after 29987 ms" both
// become "Timeout after <n> ms". Whitespace is collapsed and the result is
// cut at 512 bytes (on a rune boundary).
func NormaliseDescription(s string) string {
	// \s is ASCII whitespace: only a tab, newline, form feed, carriage
	// return or two spaces in a row can change.
	if strings.ContainsAny(s, "\t\n\f\r") || strings.Contains(s, "  ") {
		s = spaces.ReplaceAllString(s, " ")
	}
	s = strings.TrimSpace(s)
	for _, n := range normalisers {
		if !n.can(s) {
			continue
		}
		if n.replace != nil {
			s = n.replace(s)
			continue
		}
		s = n.re.ReplaceAllString(s, n.with)
	}
	if len(s) > maxPatternLen {
		cut := maxPatternLen
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// GroupOf returns the failure group of a dead letter, or false for a message
// that has neither a reason nor a description (deferred and scheduled
// messages of a main entity).
func GroupOf(m *Message, q SubQueue) (Group, bool) {
	if q == SubQueueMain {
		return Group{}, false
	}
	var reason, desc string
	if m.DeadLetterReason != nil {
		reason = *m.DeadLetterReason
	}
	if m.DeadLetterErrorDescription != nil {
		desc = *m.DeadLetterErrorDescription
	}
	g := Group{Reason: reason, DescriptionPattern: NormaliseDescription(desc)}
	sum := sha256.Sum256([]byte(g.Reason + "\x00" + g.DescriptionPattern))
	g.ID = hex.EncodeToString(sum[:8])
	return g, true
}
