package store

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
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
// most 256 positions and is at most 2,046 bytes long in a literal (its
// parser refuses 2,047: "word is too long", which failed the indexer's
// whole batch, again at every retry; longer tokens are
// left out of the PostgreSQL index).
const (
	maxTSPosition  = 16383
	maxTSPositions = 256
	maxTSLexeme    = 2046
)

// tsvector is the search document of one message, as a tsvector literal:
// reason (B), description (C) and properties (D) first, so that their
// positions are exact whatever the body's length, then the body (A). A
// gap of positions between columns keeps a phrase from matching across
// two of them, as in FTS5. Lexemes come in the order of their first
// occurrence, each with its positions in increasing order.
func tsvector(body, reason, description, properties string) string {
	b := tsBuilders.Get().(*tsBuilder)
	defer tsBuilders.Put(b)
	b.build(body, reason, description, properties)
	b.out = b.appendLiteral(b.out[:0])
	return string(b.out)
}

// appendTSVectorBinary appends the search document of one message to dst
// in tsvector's binary format (PostgreSQL's tsvectorrecv): the lexemes'
// count, then each lexeme (NUL-terminated, encoded as the driver encodes
// text), its positions' count and its positions (the weight in the top two
// bits: A 3, B 2, C 1, D 0). The server then stores the document the
// literal (tsvector) parses into without parsing it: the same lexemes, in
// the order it sorts them into, and the same positions, those repeated at
// the last position (maxTSPosition) once, with the highest weight.
func appendTSVectorBinary(dst []byte, body, reason, description, properties string) []byte {
	b := tsBuilders.Get().(*tsBuilder)
	defer tsBuilders.Put(b)
	b.build(body, reason, description, properties)
	return b.appendBinary(dst)
}

// tsWeightBits are the weights of WordEntryPos.
var tsWeightBits = [256]uint16{'A': 3 << 14, 'B': 2 << 14, 'C': 1 << 14, 'D': 0}

func (b *tsBuilder) appendBinary(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.lexemes)))
	for _, l := range b.lexemes {
		lex := b.arena[l.off : l.off+l.n]
		if b.special {
			dst = append(dst, encodePGText(string(lex))...)
		} else {
			dst = append(dst, lex...)
		}
		dst = append(dst, 0)
		at := len(dst)
		dst = append(dst, 0, 0)
		n, last := 0, -1
		for o := l.first; o >= 0; o = b.occ[o].next {
			pos, w := int(b.occ[o].pos), tsWeightBits[b.occ[o].weight]
			if pos == last { // only at maxTSPosition: keep the highest weight
				i := len(dst) - 2
				if prev := binary.BigEndian.Uint16(dst[i:]); prev&0xc000 < w {
					binary.BigEndian.PutUint16(dst[i:], prev&0x3fff|w)
				}
				continue
			}
			dst = binary.BigEndian.AppendUint16(dst, uint16(pos)|w)
			n, last = n+1, pos
		}
		binary.BigEndian.PutUint16(dst[at:], uint16(n))
	}
	return dst
}

// tsBuilders keeps the builders between documents: the indexer builds
// thousands a batch, and a builder's buffers are what they allocate.
var tsBuilders = sync.Pool{New: func() any { return new(tsBuilder) }}

// tsBuilder builds a tsvector literal with no allocation per token once its
// buffers have grown: the distinct lexemes' bytes are appended to one arena
// and found again through an open-addressing table of their hashes (a
// generation number empties it at once), and every position is an entry of
// one slice, linked to its lexeme's next.
type tsBuilder struct {
	arena   []byte     // the lexemes' bytes, one after the other
	lexemes []tsLexeme // in the order of their first occurrence
	occ     []tsOcc    // every position kept
	slots   []tsSlot   // the table: a power of two long
	gen     uint32     // the slots of this generation are in use
	tok     []byte     // the token being read, folded
	out     []byte     // the literal (tsvector)
	pos     int
	special bool // a lexeme holds a rune encodePGText or copyText would change
}

type tsLexeme struct {
	off, n      uint32 // its bytes: arena[off : off+n]
	hash        uint32
	first, last int32 // its first and last position (occ)
	count       int32
}

type tsOcc struct {
	next   int32 // the lexeme's next position (occ), -1 for none
	pos    uint16
	weight byte
}

type tsSlot struct {
	gen uint32
	lex int32
}

func (b *tsBuilder) build(body, reason, description, properties string) {
	b.arena, b.lexemes, b.occ, b.tok, b.pos, b.special = b.arena[:0], b.lexemes[:0], b.occ[:0], b.tok[:0], 0, false
	b.gen++
	if b.gen == 0 || len(b.slots) == 0 {
		if len(b.slots) == 0 {
			b.slots = make([]tsSlot, 256)
		} else {
			clear(b.slots)
		}
		b.gen = 1
	}
	b.column(reason, 'B')
	b.column(description, 'C')
	b.column(properties, 'D')
	b.column(body, 'A')
}

// column adds the tokens of text (searchTokens' tokens, read in place),
// then a gap of one position.
func (b *tsBuilder) column(text string, weight byte) {
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				b.tok = append(b.tok, c)
				continue
			case 'A' <= c && c <= 'Z':
				b.tok = append(b.tok, c+'a'-'A')
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(text[i:])
			i += size
			if isTokenRune(r) {
				f := foldRune(r)
				if f >= byteRuneBase || f < ' ' || f == '\\' || f == '\'' {
					b.special = true
				}
				b.tok = utf8.AppendRune(b.tok, f)
				continue
			}
		}
		if len(b.tok) > 0 {
			b.add(weight)
		}
	}
	if len(b.tok) > 0 {
		b.add(weight)
	}
	b.pos = min(b.pos+1, maxTSPosition)
}

// add records the token b.tok at the next position, and empties b.tok.
func (b *tsBuilder) add(weight byte) {
	b.pos = min(b.pos+1, maxTSPosition)
	tok := b.tok
	b.tok = b.tok[:0]
	if len(tok) > maxTSLexeme {
		return
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range tok {
		h = (h ^ uint32(c)) * 16777619
	}
	mask := uint32(len(b.slots) - 1)
	i := h & mask
	var l *tsLexeme
	for {
		s := &b.slots[i]
		if s.gen != b.gen {
			if 2*(len(b.lexemes)+1) > len(b.slots) {
				b.grow()
				b.tok = tok
				b.pos--
				b.add(weight)
				return
			}
			*s = tsSlot{gen: b.gen, lex: int32(len(b.lexemes))}
			b.lexemes = append(b.lexemes, tsLexeme{off: uint32(len(b.arena)), n: uint32(len(tok)), hash: h, first: -1, last: -1})
			b.arena = append(b.arena, tok...)
			l = &b.lexemes[len(b.lexemes)-1]
			break
		}
		if c := &b.lexemes[s.lex]; c.hash == h && string(b.arena[c.off:c.off+c.n]) == string(tok) {
			l = c
			break
		}
		i = (i + 1) & mask
	}
	if l.count >= maxTSPositions {
		return
	}
	l.count++
	o := int32(len(b.occ))
	b.occ = append(b.occ, tsOcc{next: -1, pos: uint16(b.pos), weight: weight})
	if l.last >= 0 {
		b.occ[l.last].next = o
	} else {
		l.first = o
	}
	l.last = o
}

// grow doubles the table and places the lexemes again.
func (b *tsBuilder) grow() {
	b.slots = make([]tsSlot, 2*len(b.slots))
	b.gen = 1
	mask := uint32(len(b.slots) - 1)
	for k, l := range b.lexemes {
		i := l.hash & mask
		for b.slots[i].gen == b.gen {
			i = (i + 1) & mask
		}
		b.slots[i] = tsSlot{gen: b.gen, lex: int32(k)}
	}
}

// appendLiteral appends the built document's tsvector literal to dst.
func (b *tsBuilder) appendLiteral(dst []byte) []byte {
	for k, l := range b.lexemes {
		if k > 0 {
			dst = append(dst, ' ')
		}
		dst = appendTSQuoted(dst, b.arena[l.off:l.off+l.n])
		dst = append(dst, ':')
		for o := l.first; o >= 0; o = b.occ[o].next {
			if o != l.first {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, uint64(b.occ[o].pos), 10)
			dst = append(dst, b.occ[o].weight)
		}
	}
	return dst
}

// appendTSQuoted is tsQuote appending to b.
func appendTSQuoted(b []byte, t []byte) []byte {
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
