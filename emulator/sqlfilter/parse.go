package sqlfilter

import (
	"strconv"
	"strings"
)

// expr is a node of the syntax tree.
type expr interface{ position() int }

type (
	literal struct {
		val any // nil (NULL), bool, int64, float64, string
		pos int
	}
	property struct {
		scope Scope
		name  string // canonical for System
		pos   int
	}
	param struct {
		name string // with the @
		pos  int
	}
	unary struct {
		op  string // "-", "+", "NOT"
		x   expr
		pos int
	}
	binary struct {
		op   string // "OR", "AND", comparison or arithmetic operator
		l, r expr
		pos  int
	}
	inList struct {
		x    expr
		list []expr
		not  bool
		pos  int
	}
	like struct {
		x, pattern, escape expr // escape may be nil
		not                bool
		pos                int
	}
	isNull struct {
		x   expr
		not bool
		pos int
	}
	exists struct {
		p   property
		pos int
	}
	call struct {
		name string // "newid" or "property"
		arg  expr
		pos  int
	}
)

func (e *literal) position() int  { return e.pos }
func (e *property) position() int { return e.pos }
func (e *param) position() int    { return e.pos }
func (e *unary) position() int    { return e.pos }
func (e *binary) position() int   { return e.pos }
func (e *inList) position() int   { return e.pos }
func (e *like) position() int     { return e.pos }
func (e *isNull) position() int   { return e.pos }
func (e *exists) position() int   { return e.pos }
func (e *call) position() int     { return e.pos }

// maxDepth bounds nesting so that a hostile expression cannot exhaust the
// stack.
const maxDepth = 200

type parser struct {
	src    string
	toks   []token
	i      int
	depth  int
	params map[string]token // parameters referenced: lower-cased name → first use
}

func newParser(src string) (*parser, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	return &parser{src: src, toks: toks, params: map[string]token{}}, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isKeyword(kw string) bool {
	t := p.peek()
	return t.kind == tokKeyword && t.text == kw
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == op
}

// errAt reports an unexpected token t.
func (p *parser) errAt(t token, expecting string) error {
	detail := "syntax error, unexpected " + describe(t)
	if expecting != "" {
		detail += ", expecting " + expecting
	}
	return syntaxErr(p.src, t.pos, t.raw, detail)
}

func describe(t token) string {
	switch t.kind {
	case tokKeyword:
		return t.text
	case tokOp:
		return "'" + t.text + "'"
	case tokEOF:
		return "end of expression"
	}
	return t.kind.String() + " " + t.raw
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.errAt(p.peek(), "'"+op+"'")
	}
	p.next()
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		t := p.peek()
		return syntaxErr(p.src, t.pos, t.raw, "the expression nests too deeply")
	}
	return nil
}

// orExpr: andExpr { OR andExpr }
func (p *parser) orExpr() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("OR") {
		t := p.next()
		r, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		l = &binary{op: "OR", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

// andExpr: notExpr { AND notExpr }
func (p *parser) andExpr() (expr, error) {
	l, err := p.notExpr()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("AND") {
		t := p.next()
		r, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		l = &binary{op: "AND", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

// notExpr: NOT notExpr | predicate
func (p *parser) notExpr() (expr, error) {
	if p.isKeyword("NOT") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		t := p.next()
		x, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		return &unary{op: "NOT", x: x, pos: t.pos}, nil
	}
	return p.predicate()
}

// predicate: additive [ compOp additive | IS [NOT] NULL | [NOT] IN (...) |
// [NOT] LIKE additive [ESCAPE additive] ]
func (p *parser) predicate() (expr, error) {
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case t.kind == tokOp && isComparison(t.text):
		p.next()
		r, err := p.additive()
		if err != nil {
			return nil, err
		}
		op := t.text
		if op == "!=" {
			op = "<>"
		}
		return &binary{op: op, l: l, r: r, pos: t.pos}, nil
	case t.kind == tokKeyword && t.text == "IS":
		p.next()
		not := false
		if p.isKeyword("NOT") {
			p.next()
			not = true
		}
		if !p.isKeyword("NULL") {
			return nil, p.errAt(p.peek(), "NULL")
		}
		p.next()
		return &isNull{x: l, not: not, pos: t.pos}, nil
	case t.kind == tokKeyword && (t.text == "IN" || t.text == "LIKE" || t.text == "NOT"):
		not := false
		if t.text == "NOT" {
			p.next()
			not = true
			if !p.isKeyword("IN") && !p.isKeyword("LIKE") {
				return nil, p.errAt(p.peek(), "IN or LIKE")
			}
		}
		kw := p.next()
		if kw.text == "IN" {
			return p.inTail(l, not, t.pos)
		}
		pat, err := p.additive()
		if err != nil {
			return nil, err
		}
		lk := &like{x: l, pattern: pat, not: not, pos: t.pos}
		if p.isKeyword("ESCAPE") {
			p.next()
			if lk.escape, err = p.additive(); err != nil {
				return nil, err
			}
		}
		if err := p.checkLikeConstants(lk); err != nil {
			return nil, err
		}
		return lk, nil
	}
	return l, nil
}

// checkLikeConstants rejects, when parsing, a constant pattern or escape
// that is not a string or an escape that is not one character.
func (p *parser) checkLikeConstants(lk *like) error {
	for _, e := range []expr{lk.pattern, lk.escape} {
		if c, ok := e.(*literal); ok && c.val != nil {
			if _, isStr := c.val.(string); !isStr {
				return syntaxErr(p.src, c.pos, tokenText(p, c.pos), "LIKE needs a string pattern and a string escape character")
			}
		}
	}
	if c, ok := lk.escape.(*literal); ok {
		if s, ok := c.val.(string); ok && len([]rune(s)) != 1 {
			return syntaxErr(p.src, c.pos, tokenText(p, c.pos), "the ESCAPE character must be a string of length 1")
		}
	}
	return nil
}

// tokenText returns the raw text of the token at byte offset pos.
func tokenText(p *parser, pos int) string {
	for _, t := range p.toks {
		if t.pos == pos {
			return t.raw
		}
	}
	return ""
}

func (p *parser) inTail(x expr, not bool, pos int) (expr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	in := &inList{x: x, not: not, pos: pos}
	for {
		e, err := p.additive()
		if err != nil {
			return nil, err
		}
		in.list = append(in.list, e)
		if p.isOp(",") {
			p.next()
			continue
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return in, nil
	}
}

func isComparison(op string) bool {
	switch op {
	case "=", "<>", "!=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

// additive: multiplicative { (+|-) multiplicative }
func (p *parser) additive() (expr, error) {
	l, err := p.multiplicative()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		r, err := p.multiplicative()
		if err != nil {
			return nil, err
		}
		l = &binary{op: t.text, l: l, r: r, pos: t.pos}
	}
	return l, nil
}

// multiplicative: unaryExpr { (*|/|%) unaryExpr }
func (p *parser) multiplicative() (expr, error) {
	l, err := p.unaryExpr()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("%") {
		t := p.next()
		r, err := p.unaryExpr()
		if err != nil {
			return nil, err
		}
		l = &binary{op: t.text, l: l, r: r, pos: t.pos}
	}
	return l, nil
}

// unaryExpr: (+|-) unaryExpr | primary
func (p *parser) unaryExpr() (expr, error) {
	if p.isOp("+") || p.isOp("-") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		t := p.next()
		// A minus directly before a number is part of the constant, so
		// that -9223372036854775808 is a valid integer.
		if n := p.peek(); t.text == "-" && (n.kind == tokInt || n.kind == tokDecimal) {
			p.next()
			return p.number(n, "-")
		}
		x, err := p.unaryExpr()
		if err != nil {
			return nil, err
		}
		return &unary{op: t.text, x: x, pos: t.pos}, nil
	}
	return p.primary()
}

func (p *parser) number(t token, sign string) (expr, error) {
	if t.kind == tokInt {
		v, err := strconv.ParseInt(sign+t.text, 10, 64)
		if err != nil {
			return nil, syntaxErr(p.src, t.pos, t.raw, "the integer constant is out of range (a 64-bit integer)")
		}
		return &literal{val: v, pos: t.pos}, nil
	}
	v, err := strconv.ParseFloat(sign+t.text, 64)
	if err != nil {
		return nil, syntaxErr(p.src, t.pos, t.raw, "the decimal constant is out of range (a 64-bit float)")
	}
	return &literal{val: v, pos: t.pos}, nil
}

func (p *parser) primary() (expr, error) {
	t := p.peek()
	switch t.kind {
	case tokInt, tokDecimal:
		p.next()
		return p.number(t, "")
	case tokString:
		p.next()
		return &literal{val: t.text, pos: t.pos}, nil
	case tokParam:
		p.next()
		if _, seen := p.params[strings.ToLower(t.text)]; !seen {
			p.params[strings.ToLower(t.text)] = t
		}
		return &param{name: t.text, pos: t.pos}, nil
	case tokKeyword:
		switch t.text {
		case "TRUE", "FALSE":
			p.next()
			return &literal{val: t.text == "TRUE", pos: t.pos}, nil
		case "NULL":
			p.next()
			return &literal{val: nil, pos: t.pos}, nil
		case "EXISTS":
			p.next()
			if err := p.expectOp("("); err != nil {
				return nil, err
			}
			prop, err := p.property()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return &exists{p: *prop, pos: t.pos}, nil
		}
	case tokOp:
		if t.text == "(" {
			p.next()
			e, err := p.orExpr()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return e, nil
		}
	case tokIdent:
		// newid(), property(name) and p(name) are functions when a
		// parenthesis follows; otherwise the word is a property name.
		if nt := p.toks[p.i+1]; nt.kind == tokOp && nt.text == "(" {
			switch strings.ToLower(t.text) {
			case "newid":
				p.next()
				p.next()
				if err := p.expectOp(")"); err != nil {
					return nil, err
				}
				return &call{name: "newid", pos: t.pos}, nil
			case "property", "p":
				p.next()
				p.next()
				arg, err := p.additive()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(")"); err != nil {
					return nil, err
				}
				return &call{name: "property", arg: arg, pos: t.pos}, nil
			default:
				return nil, syntaxErr(p.src, t.pos, t.raw, "unknown function "+t.raw+" (the functions are newid(), property(name) and p(name))")
			}
		}
		return p.property()
	case tokDelim:
		return p.property()
	}
	return nil, p.errAt(t, "a constant, a property, a parameter or '('")
}

// property: [sys|user .] name
func (p *parser) property() (*property, error) {
	t := p.next()
	if t.kind != tokIdent && t.kind != tokDelim {
		return nil, p.errAt(t, "a property name")
	}
	if t.kind == tokIdent && p.isOp(".") {
		scope := strings.ToLower(t.text)
		if scope != "sys" && scope != "user" {
			return nil, syntaxErr(p.src, t.pos, t.raw, "unknown property scope "+t.raw+" (the scopes are sys and user)")
		}
		p.next()
		n := p.next()
		if n.kind != tokIdent && n.kind != tokDelim {
			return nil, p.errAt(n, "a property name after "+t.raw+".")
		}
		if scope == "user" {
			return &property{scope: User, name: n.text, pos: t.pos}, nil
		}
		name, _, ok := SystemProperty(n.text)
		if !ok {
			return nil, syntaxErr(p.src, n.pos, n.raw, "unknown system property sys."+n.text)
		}
		return &property{scope: System, name: name, pos: t.pos}, nil
	}
	return &property{scope: User, name: t.text, pos: t.pos}, nil
}

// parseExpr parses a whole filter expression.
func parseExpr(src string) (expr, map[string]token, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, nil, err
	}
	if p.peek().kind == tokEOF {
		return nil, nil, syntaxErr(src, 0, "", "the expression is empty")
	}
	e, err := p.orExpr()
	if err != nil {
		return nil, nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, nil, p.errAt(t, "an operator or end of expression")
	}
	if c, ok := e.(*literal); ok {
		if _, isBool := c.val.(bool); !isBool && c.val != nil {
			return nil, nil, syntaxErr(src, c.pos, tokenText(p, c.pos), "a filter must be a condition, not a constant")
		}
	}
	return e, p.params, nil
}

// statement is one action statement: SET prop = value, or REMOVE prop
// (value nil).
type statement struct {
	prop  property
	value expr
}

// parseAction parses SQL rule action statements: SET p = e or REMOVE p,
// each optionally ended by a semicolon, separated by commas or white space.
func parseAction(src string) ([]statement, map[string]token, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, nil, err
	}
	var stmts []statement
	for {
		t := p.peek()
		if t.kind != tokKeyword || t.text != "SET" && t.text != "REMOVE" {
			if t.kind == tokEOF && len(stmts) == 0 {
				return nil, nil, syntaxErr(src, t.pos, "", "the action is empty, expecting SET or REMOVE")
			}
			return nil, nil, p.errAt(t, "SET or REMOVE")
		}
		p.next()
		prop, err := p.property()
		if err != nil {
			return nil, nil, err
		}
		if prop.scope == System {
			if _, settable, _ := SystemProperty(prop.name); !settable {
				return nil, nil, syntaxErr(src, prop.pos, tokenText(p, prop.pos), "the system property sys."+prop.name+" is set by the broker and cannot be changed")
			}
		}
		st := statement{prop: *prop}
		if t.text == "SET" {
			if err := p.expectOp("="); err != nil {
				return nil, nil, err
			}
			if st.value, err = p.orExpr(); err != nil {
				return nil, nil, err
			}
		}
		stmts = append(stmts, st)
		if p.isOp(";") {
			p.next()
		}
		if p.isOp(",") {
			p.next() // a statement must follow
		} else if p.peek().kind == tokEOF {
			return stmts, p.params, nil
		}
	}
}
