// Package search is the full-text search's query language: what a person
// types becomes an FTS5 expression (Parse). Its matches in a text are found
// by FTS5 itself (package highlight), so what is highlighted is exactly what
// the catalog's search index matches. It touches no database.
package search

import (
	"fmt"
	"strings"
	"unicode"
)

// Tokenize is the tokenizer of the catalog's search index (messages_fts,
// migration 0002): the highlighter's index uses the same one.
const Tokenize = "unicode61 remove_diacritics 2"

// Limits on the query, so that one request cannot make an arbitrarily
// expensive search.
const (
	MaxQueryLen   = 1000
	MaxQueryWords = 32
)

// Span is a match in a text: bytes [Start, End).
type Span struct{ Start, End int }

// Phrase is one term of a query: tokens that must follow each other, the
// last one matching as a prefix when Prefix.
type Phrase struct {
	Text   string
	Prefix bool
}

// Query is a parsed search: every phrase must match.
type Query struct {
	Phrases []Phrase
}

// Error is a search text that is not a query. The API reports it as a 400
// naming the parameter q.
type Error struct{ Msg string }

func (e *Error) Error() string { return "invalid q: " + e.Msg }

// InvalidParameter names the parameter (package web recognises errors by
// this method).
func (e *Error) InvalidParameter() string { return "q" }

// Parse reads what a person typed: whitespace-separated words, each a
// phrase of its tokens (so "order-123" matches those two tokens in a row,
// and AND, OR, NOT and column names are plain words); "double-quoted text"
// is one phrase; a word or a closing quote followed by * matches the last
// token as a prefix. Every phrase must match. Words without a letter or
// digit are left out (the tokenizer finds nothing in them).
func Parse(q string) (Query, error) {
	if len(q) > MaxQueryLen {
		return Query{}, &Error{Msg: fmt.Sprintf("the search text is longer than %d bytes", MaxQueryLen)}
	}
	var out Query
	rest := q
	for {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		var text string
		prefix := false
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return Query{}, &Error{Msg: `the search text has a quote (") that is not closed: put the phrase between two quotes, or remove it`}
			}
			text, rest = rest[1:1+end], rest[2+end:]
			if strings.HasPrefix(rest, "*") { // "a phrase"*
				prefix, rest = true, strings.TrimLeft(rest, "*")
			}
		} else {
			end := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '"' })
			if end < 0 {
				end = len(rest)
			}
			text, rest = rest[:end], rest[end:]
			if t := strings.TrimRight(text, "*"); t != text { // word*
				prefix, text = true, t
			}
		}
		if !hasToken(text) {
			continue
		}
		out.Phrases = append(out.Phrases, Phrase{Text: text, Prefix: prefix})
	}
	if len(out.Phrases) == 0 {
		return Query{}, &Error{Msg: "the search text has no letters or digits to search for"}
	}
	if len(out.Phrases) > MaxQueryWords {
		return Query{}, &Error{Msg: fmt.Sprintf("more than %d words", MaxQueryWords)}
	}
	return out, nil
}

// Match is the FTS5 expression every match satisfies: all the phrases.
func (q Query) Match() string { return q.join(" ") }

// Any is the FTS5 expression a text matches when it holds any of the
// phrases: what is highlighted in a text that is only part of a match.
func (q Query) Any() string { return q.join(" OR ") }

func (q Query) join(sep string) string {
	parts := make([]string, len(q.Phrases))
	for i, p := range q.Phrases {
		parts[i] = Quote(p.Text)
		if p.Prefix {
			parts[i] += "*"
		}
	}
	return strings.Join(parts, sep)
}

// Quote quotes s as one FTS5 phrase.
func Quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// hasToken reports whether the unicode61 tokenizer would find a token in s:
// its token characters are letters, numbers and private-use characters.
func hasToken(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r) {
			return true
		}
	}
	return false
}
