package store

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A full-text search as the store builds it (from what a person typed, or
// from a property filter), rendered for the engine at the last moment:
// an FTS5 expression on SQLite, a tsquery on PostgreSQL. Both match the
// same rows: the tokens are unicode61's (runs of letters, numbers and
// private-use characters, case-folded, diacritics removed), every word is a
// phrase of its tokens, and all words must match.

// searchColumns are the columns of the search index a clause looks in.
type searchColumns int

const (
	allColumns       searchColumns = iota // body, reason, description, properties
	notBodyColumns                        // reason, description, properties
	propertiesColumn                      // properties only
)

// searchWord is one word: a phrase of its tokens, the last a prefix if
// prefix.
type searchWord struct {
	text   string
	prefix bool
}

// clause is words that must all match, in cols.
type clause struct {
	cols  searchColumns
	words []searchWord
}

// match is clauses that must all match; empty for no search.
type match []clause

func (m match) and(o match) match { return append(append(match(nil), m...), o...) }

// fts5 is m as an FTS5 expression.
func (m match) fts5() string {
	parts := make([]string, 0, len(m))
	for _, c := range m {
		words := make([]string, 0, len(c.words))
		for _, w := range c.words {
			p := ftsPhrase(w.text)
			if w.prefix {
				p += "*"
			}
			words = append(words, p)
		}
		expr := strings.Join(words, " ")
		switch c.cols {
		case notBodyColumns:
			expr = "{reason description properties} : (" + expr + ")"
		case propertiesColumn:
			expr = "properties : " + expr
		}
		parts = append(parts, expr)
	}
	return strings.Join(parts, " AND ")
}

// The PostgreSQL search index (messages_fts.doc) is a tsvector with a
// weight per column of FTS5's index: body A, reason B, description C,
// properties D. A clause on some columns asks for those weights.
var columnWeights = map[searchColumns]string{allColumns: "", notBodyColumns: "BCD", propertiesColumn: "D"}

// tsquery is m as a tsquery: each word a phrase of its tokens (<->), the
// last with :* if a prefix, every token restricted to the clause's weights,
// all words and clauses joined by &.
func (m match) tsquery() string {
	var parts []string
	for _, c := range m {
		weights := columnWeights[c.cols]
		for _, w := range c.words {
			toks := searchTokens(w.text)
			if len(toks) == 0 {
				continue
			}
			lexemes := make([]string, len(toks))
			for i, t := range toks {
				suffix := weights
				if w.prefix && i == len(toks)-1 {
					suffix = "*" + suffix
				}
				if suffix != "" {
					suffix = ":" + suffix
				}
				lexemes[i] = tsQuote(t) + suffix
			}
			parts = append(parts, "("+strings.Join(lexemes, " <-> ")+")")
		}
	}
	return strings.Join(parts, " & ")
}

// tsQuote quotes a lexeme for tsvector and tsquery input. Tokens are
// letters and digits, but quote and backslash are escaped all the same.
func tsQuote(t string) string {
	t = strings.ReplaceAll(t, `\`, `\\`)
	return "'" + strings.ReplaceAll(t, "'", "''") + "'"
}

// searchTokens are the tokens FTS5's unicode61 tokenizer (remove_diacritics
// 2) finds in s: maximal runs of letters, numbers and private-use
// characters, lower-cased, with the diacritics of Latin letters removed.
func searchTokens(s string) []string {
	var toks []string
	var b strings.Builder
	for _, r := range s {
		if isTokenRune(r) {
			b.WriteRune(foldRune(r))
			continue
		}
		if b.Len() > 0 {
			toks = append(toks, b.String())
			b.Reset()
		}
	}
	if b.Len() > 0 {
		toks = append(toks, b.String())
	}
	return toks
}

func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
}

// foldRune lower-cases r and removes a Latin letter's diacritic.
func foldRune(r rune) rune {
	r = unicode.ToLower(r)
	if r >= 0xe0 && r <= 0x17f {
		if f, ok := latinBase[r]; ok {
			return f
		}
	}
	return r
}

// latinBase maps the lower-case letters of Latin-1 and Latin Extended-A
// with a diacritic to their base letter, as unicode61's remove_diacritics
// does.
var latinBase = func() map[rune]rune {
	m := map[rune]rune{}
	for base, letters := range map[rune]string{
		'a': "àáâãäåāăą", 'c': "çćĉċč", 'd': "ďđ", 'e': "èéêëēĕėęě", 'g': "ĝğġģ", 'h': "ĥħ",
		'i': "ìíîïĩīĭįı", 'j': "ĵ", 'k': "ķ", 'l': "ĺļľŀł", 'n': "ñńņňŉ", 'o': "òóôõöøōŏő",
		'r': "ŕŗř", 's': "śŝşš", 't': "ţťŧ", 'u': "ùúûüũūŭůűų", 'w': "ŵ", 'y': "ýÿŷ", 'z': "źżž",
	} {
		for _, l := range letters {
			m[l] = base
		}
	}
	return m
}()

// Limits of PostgreSQL's tsvector: positions go up to 16,383 (later
// tokens share the last position, as to_tsvector does), a lexeme keeps at
// most 256 positions and is at most 2,047 bytes long (longer tokens are
// left out of the PostgreSQL index).
const (
	maxTSPosition  = 16383
	maxTSPositions = 256
	maxTSLexeme    = 2047
)

// tsvector is the search document of one message, as a tsvector literal:
// reason (B), description (C) and properties (D) first, so that their
// positions are exact whatever the body's length, then the body (A). A
// gap of positions between columns keeps a phrase from matching across
// two of them, as in FTS5. It runs once per message the catalog inserts,
// so it allocates little: a token is folded into one reused buffer and
// looked up without a copy; a lexeme and its positions are stored once.
func tsvector(body, reason, description, properties string) string {
	type lexeme struct {
		pos []byte // "1A,5A"
		n   int
	}
	index := make(map[string]int, 64)
	var lexemes []lexeme
	var order []string
	pos := 0
	var tok []byte
	add := func(weight byte) {
		pos = min(pos+1, maxTSPosition)
		if len(tok) > maxTSLexeme {
			return
		}
		i, ok := index[string(tok)]
		if !ok {
			i = len(lexemes)
			t := string(tok)
			index[t] = i
			order = append(order, t)
			lexemes = append(lexemes, lexeme{})
		}
		l := &lexemes[i]
		if l.n >= maxTSPositions {
			return
		}
		if l.n > 0 {
			l.pos = append(l.pos, ',')
		}
		l.pos = strconv.AppendInt(l.pos, int64(pos), 10)
		l.pos = append(l.pos, weight)
		l.n++
	}
	column := func(text string, weight byte) {
		for _, r := range text {
			if isTokenRune(r) {
				tok = utf8.AppendRune(tok, foldRune(r))
				continue
			}
			if len(tok) > 0 {
				add(weight)
				tok = tok[:0]
			}
		}
		if len(tok) > 0 {
			add(weight)
			tok = tok[:0]
		}
		pos = min(pos+1, maxTSPosition)
	}
	column(reason, 'B')
	column(description, 'C')
	column(properties, 'D')
	column(body, 'A')
	size := 0
	for i, t := range order {
		size += len(t) + len(lexemes[i].pos) + 4
	}
	out := make([]byte, 0, size)
	for i, t := range order {
		if i > 0 {
			out = append(out, ' ')
		}
		out = appendTSQuoted(out, t)
		out = append(out, ':')
		out = append(out, lexemes[i].pos...)
	}
	return string(out)
}

// appendTSQuoted is tsQuote appending to b.
func appendTSQuoted(b []byte, t string) []byte {
	b = append(b, '\'')
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case '\'':
			b = append(b, '\'', '\'')
		case '\\':
			b = append(b, '\\', '\\')
		default:
			b = append(b, c)
		}
	}
	return append(b, '\'')
}
