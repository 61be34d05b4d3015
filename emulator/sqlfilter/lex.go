package sqlfilter

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind int

const (
	tokEOF     tokKind = iota
	tokIdent           // regular identifier (not a keyword)
	tokDelim           // [delimited] or "quoted" identifier, text unescaped
	tokString          // 'string', text unescaped
	tokInt             // integer constant
	tokDecimal         // decimal or approximate number constant
	tokParam           // @name, text includes the @
	tokKeyword         // reserved word, text upper-cased
	tokOp              // operator or punctuation: = <> != < <= > >= + - * / % ( ) , . ;
)

func (k tokKind) String() string {
	switch k {
	case tokEOF:
		return "end of expression"
	case tokIdent, tokDelim:
		return "identifier"
	case tokString:
		return "string constant"
	case tokInt:
		return "integer constant"
	case tokDecimal:
		return "decimal constant"
	case tokParam:
		return "parameter"
	case tokKeyword:
		return "keyword"
	}
	return "operator"
}

// token is one lexical token; pos is its byte offset in the source, raw its
// source text.
type token struct {
	kind tokKind
	text string
	raw  string
	pos  int
}

// keywords are the reserved words; a regular identifier cannot be one.
var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IN": true, "LIKE": true, "ESCAPE": true,
	"IS": true, "NULL": true, "EXISTS": true, "TRUE": true, "FALSE": true,
	"SET": true, "REMOVE": true,
}

// lex splits src into tokens, ending with tokEOF.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(src) {
			r, n := utf8.DecodeRuneInString(src[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		if i >= len(src) {
			toks = append(toks, token{kind: tokEOF, pos: len(src)})
			return toks, nil
		}
		start := i
		r, n := utf8.DecodeRuneInString(src[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return nil, syntaxErr(src, start, src[start:start+1], "the expression is not valid UTF-8")
		case unicode.IsLetter(r):
			i += n
			for i < len(src) {
				r, n := utf8.DecodeRuneInString(src[i:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				i += n
			}
			word := src[start:i]
			if up := strings.ToUpper(word); keywords[up] {
				toks = append(toks, token{kind: tokKeyword, text: up, raw: word, pos: start})
			} else {
				toks = append(toks, token{kind: tokIdent, text: word, raw: word, pos: start})
			}
		case r >= '0' && r <= '9' || r == '.' && i+1 < len(src) && isDigit(src[i+1]):
			kind := tokInt
			for i < len(src) && isDigit(src[i]) {
				i++
			}
			if i < len(src) && src[i] == '.' {
				kind = tokDecimal
				i++
				for i < len(src) && isDigit(src[i]) {
					i++
				}
			}
			if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
				j := i + 1
				if j < len(src) && (src[j] == '+' || src[j] == '-') {
					j++
				}
				if j >= len(src) || !isDigit(src[j]) {
					return nil, syntaxErr(src, start, src[start:min(j, len(src))], "the exponent of a number needs digits")
				}
				for j < len(src) && isDigit(src[j]) {
					j++
				}
				kind, i = tokDecimal, j
			}
			if i < len(src) {
				if r, _ := utf8.DecodeRuneInString(src[i:]); unicode.IsLetter(r) || r == '_' {
					return nil, syntaxErr(src, start, src[start:i+1], "a number cannot be followed by a letter")
				}
			}
			toks = append(toks, token{kind: kind, text: src[start:i], raw: src[start:i], pos: start})
		case r == '\'' || r == '"' || r == '[':
			closer, kind := byte('\''), tokString
			switch r {
			case '"':
				closer, kind = '"', tokDelim
			case '[':
				closer, kind = ']', tokDelim
			}
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					what := "string constant"
					if kind == tokDelim {
						what = "identifier"
					}
					return nil, syntaxErr(src, start, src[start:], "unterminated "+what+": missing closing "+string(closer))
				}
				if src[i] == closer {
					if i+1 < len(src) && src[i+1] == closer { // doubled: an escaped closer
						b.WriteByte(closer)
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(src[i])
				i++
			}
			if kind == tokDelim && b.Len() == 0 {
				return nil, syntaxErr(src, start, src[start:i], "an identifier cannot be empty")
			}
			toks = append(toks, token{kind: kind, text: b.String(), raw: src[start:i], pos: start})
		case r == '@':
			i++
			for i < len(src) {
				r, n := utf8.DecodeRuneInString(src[i:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				i += n
			}
			if i == start+1 {
				return nil, syntaxErr(src, start, "@", "a parameter needs a name after @")
			}
			toks = append(toks, token{kind: tokParam, text: src[start:i], raw: src[start:i], pos: start})
		default:
			op := ""
			for _, cand := range []string{"<>", "!=", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".", ";"} {
				if strings.HasPrefix(src[i:], cand) {
					op = cand
					break
				}
			}
			if op == "" {
				return nil, syntaxErr(src, start, string(r), "unrecognized character "+quoteRune(r))
			}
			i += len(op)
			toks = append(toks, token{kind: tokOp, text: op, raw: op, pos: start})
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func quoteRune(r rune) string { return "'" + string(r) + "'" }
