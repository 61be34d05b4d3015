package sqlfilter

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// normalize maps a property or parameter value onto the evaluator's types:
// nil, bool, int64, float64, string, time.Time, time.Duration, UUID,
// []byte; other values pass through and compare only for equality.
func normalize(v any) any {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint:
		if uint64(v) > math.MaxInt64 {
			return float64(v)
		}
		return int64(v)
	case uint64:
		if v > math.MaxInt64 {
			return float64(v)
		}
		return int64(v)
	case float32:
		return float64(v)
	case [16]byte:
		return UUID(v)
	case time.Time:
		return v
	}
	return v
}

// env is what an evaluation reads.
type env struct {
	msg    Message
	params map[string]any // by lower-cased name with the @
}

// truth is SQL's three-valued logic.
type truth int

const (
	unknown truth = iota
	isFalse
	isTrue
)

// eval computes e; a nil result is NULL (unknown).
func (v *env) eval(e expr) (any, error) {
	switch e := e.(type) {
	case *literal:
		return e.val, nil
	case *property:
		return v.lookup(e.scope, e.name), nil
	case *param:
		return normalize(v.params[strings.ToLower(e.name)]), nil
	case *call:
		if e.name == "newid" {
			var u UUID
			_, _ = rand.Read(u[:])
			u[6] = u[6]&0x0f | 0x40
			u[8] = u[8]&0x3f | 0x80
			return u, nil
		}
		x, err := v.eval(e.arg)
		if err != nil || x == nil {
			return nil, err
		}
		name, ok := x.(string)
		if !ok {
			return nil, evalErr("property() needs a string name, got %s", typeName(x))
		}
		scope, pname := User, name
		if low := strings.ToLower(name); strings.HasPrefix(low, "sys.") {
			canon, _, ok := SystemProperty(name[4:])
			if !ok {
				return nil, evalErr("unknown system property %s", name)
			}
			scope, pname = System, canon
		} else if strings.HasPrefix(low, "user.") {
			pname = name[5:]
		}
		return v.lookup(scope, pname), nil
	case *unary:
		x, err := v.eval(e.x)
		if err != nil || x == nil {
			return nil, err
		}
		switch e.op {
		case "NOT":
			b, ok := x.(bool)
			if !ok {
				return nil, evalErr("NOT needs a condition, got %s", typeName(x))
			}
			return !b, nil
		case "-":
			switch x := x.(type) {
			case int64:
				return -x, nil
			case float64:
				return -x, nil
			case time.Duration:
				return -x, nil
			}
			return nil, evalErr("unary minus needs a number, got %s", typeName(x))
		default: // "+"
			switch x.(type) {
			case int64, float64, time.Duration:
				return x, nil
			}
			return nil, evalErr("unary plus needs a number, got %s", typeName(x))
		}
	case *binary:
		switch e.op {
		case "AND", "OR":
			return v.logical(e)
		}
		l, err := v.eval(e.l)
		if err != nil {
			return nil, err
		}
		r, err := v.eval(e.r)
		if err != nil || l == nil || r == nil {
			return nil, err
		}
		if isComparison(e.op) {
			return compare(e.op, l, r)
		}
		return arith(e.op, l, r)
	case *isNull:
		x, err := v.eval(e.x)
		if err != nil {
			return nil, err
		}
		return (x == nil) != e.not, nil
	case *exists:
		if e.p.scope == System {
			_, ok := v.msg.System(e.p.name)
			return ok, nil
		}
		_, ok := v.msg.User(e.p.name)
		return ok, nil
	case *inList:
		x, err := v.eval(e.x)
		if err != nil || x == nil {
			return nil, err
		}
		sawNull := false
		for _, item := range e.list {
			y, err := v.eval(item)
			if err != nil {
				return nil, err
			}
			if y == nil {
				sawNull = true
				continue
			}
			if eq, ok := equal(x, y); ok && eq {
				return !e.not, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return e.not, nil
	case *like:
		x, err := v.eval(e.x)
		if err != nil {
			return nil, err
		}
		pat, err := v.eval(e.pattern)
		if err != nil {
			return nil, err
		}
		var esc any
		if e.escape != nil {
			if esc, err = v.eval(e.escape); err != nil {
				return nil, err
			}
			if esc == nil {
				return nil, nil
			}
		}
		if x == nil || pat == nil {
			return nil, nil
		}
		s, ok1 := x.(string)
		ps, ok2 := pat.(string)
		if !ok1 || !ok2 {
			return nil, evalErr("LIKE needs strings, got %s LIKE %s", typeName(x), typeName(pat))
		}
		escape := rune(-1)
		if esc != nil {
			es, ok := esc.(string)
			if r := []rune(es); !ok || len(r) != 1 {
				return nil, evalErr("the ESCAPE character must be a string of length 1")
			} else {
				escape = r[0]
			}
		}
		m, err := likeMatch(s, ps, escape)
		if err != nil {
			return nil, err
		}
		return m != e.not, nil
	}
	return nil, evalErr("unknown expression node %T", e)
}

// logical evaluates AND and OR with three-valued logic, short-circuiting
// the way the truth tables allow (FALSE AND x is FALSE even when x fails).
func (v *env) logical(e *binary) (any, error) {
	l, err := v.cond(e.l)
	if err != nil {
		return nil, err
	}
	if e.op == "AND" && l == isFalse {
		return false, nil
	}
	if e.op == "OR" && l == isTrue {
		return true, nil
	}
	r, err := v.cond(e.r)
	if err != nil {
		return nil, err
	}
	switch {
	case e.op == "AND" && r == isFalse:
		return false, nil
	case e.op == "OR" && r == isTrue:
		return true, nil
	case l == unknown || r == unknown:
		return nil, nil
	}
	return e.op == "AND", nil
}

// cond evaluates e as a condition.
func (v *env) cond(e expr) (truth, error) {
	x, err := v.eval(e)
	if err != nil {
		return unknown, err
	}
	switch x := x.(type) {
	case nil:
		return unknown, nil
	case bool:
		if x {
			return isTrue, nil
		}
		return isFalse, nil
	}
	return unknown, evalErr("a condition must be TRUE or FALSE, got %s", typeName(x))
}

func (v *env) lookup(scope Scope, name string) any {
	var (
		x  any
		ok bool
	)
	if scope == System {
		x, ok = v.msg.System(name)
	} else {
		x, ok = v.msg.User(name)
	}
	if !ok {
		return nil
	}
	return normalize(x)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NULL"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a decimal"
	case string:
		return "a string"
	case time.Time:
		return "a date-time"
	case time.Duration:
		return "a time span"
	case UUID:
		return "a GUID"
	case []byte:
		return "binary"
	}
	return fmt.Sprintf("%T", v)
}

// promote converts two numbers to a common type as C# does: int64 with
// int64 stays integral, anything with a float64 becomes float64.
func promote(l, r any) (li, ri int64, lf, rf float64, isInt, ok bool) {
	switch l := l.(type) {
	case int64:
		switch r := r.(type) {
		case int64:
			return l, r, 0, 0, true, true
		case float64:
			return 0, 0, float64(l), r, false, true
		}
	case float64:
		switch r := r.(type) {
		case int64:
			return 0, 0, l, float64(r), false, true
		case float64:
			return 0, 0, l, r, false, true
		}
	}
	return 0, 0, 0, 0, false, false
}

// equal reports whether two non-NULL values are equal; ok is false when
// the types cannot be compared.
func equal(l, r any) (eq, ok bool) {
	if li, ri, lf, rf, isInt, ok := promote(l, r); ok {
		if isInt {
			return li == ri, true
		}
		return lf == rf, true
	}
	switch l := l.(type) {
	case string:
		r, ok := r.(string)
		return ok && l == r, ok
	case bool:
		r, ok := r.(bool)
		return ok && l == r, ok
	case time.Time:
		r, ok := r.(time.Time)
		return ok && l.Equal(r), ok
	case time.Duration:
		r, ok := r.(time.Duration)
		return ok && l == r, ok
	case UUID:
		r, ok := r.(UUID)
		return ok && l == r, ok
	case []byte:
		r, ok := r.([]byte)
		return ok && bytes.Equal(l, r), ok
	}
	if fmt.Sprintf("%T", l) != fmt.Sprintf("%T", r) {
		return false, false
	}
	return fmt.Sprint(l) == fmt.Sprint(r), true
}

// compare applies a comparison operator to two non-NULL values.
func compare(op string, l, r any) (any, error) {
	if op == "=" || op == "<>" {
		eq, ok := equal(l, r)
		if !ok {
			return nil, evalErr("cannot compare %s with %s", typeName(l), typeName(r))
		}
		return eq == (op == "="), nil
	}
	if isNaN(l) || isNaN(r) { // NaN is unordered: <, <=, >, >= are false, as in C#
		if _, _, _, _, _, ok := promote(l, r); ok {
			return false, nil
		}
	}
	c, ok := order(l, r)
	if !ok {
		return nil, evalErr("cannot order %s and %s with %s", typeName(l), typeName(r), op)
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil // ">="
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f)
}

// order compares ordered values (numbers, strings ordinally, date-times,
// time spans).
func order(l, r any) (int, bool) {
	if li, ri, lf, rf, isInt, ok := promote(l, r); ok {
		if isInt {
			return cmp3(li < ri, li > ri), true
		}
		return cmp3(lf < rf, lf > rf), true
	}
	switch l := l.(type) {
	case string:
		if r, ok := r.(string); ok {
			return strings.Compare(l, r), true
		}
	case time.Time:
		if r, ok := r.(time.Time); ok {
			return l.Compare(r), true
		}
	case time.Duration:
		if r, ok := r.(time.Duration); ok {
			return cmp3(l < r, l > r), true
		}
	}
	return 0, false
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

// arith applies + - * / % to two non-NULL values.
func arith(op string, l, r any) (any, error) {
	if li, ri, lf, rf, isInt, ok := promote(l, r); ok {
		if isInt {
			switch op {
			case "+":
				return li + ri, nil
			case "-":
				return li - ri, nil
			case "*":
				return li * ri, nil
			}
			if ri == 0 {
				return nil, evalErr("division by zero")
			}
			if ri == -1 { // MinInt64 / -1 overflows; C# would throw, wrap instead
				if op == "/" {
					return -li, nil
				}
				return int64(0), nil
			}
			if op == "/" {
				return li / ri, nil
			}
			return li % ri, nil
		}
		switch op {
		case "+":
			return lf + rf, nil
		case "-":
			return lf - rf, nil
		case "*":
			return lf * rf, nil
		case "/":
			return lf / rf, nil
		}
		return math.Mod(lf, rf), nil
	}
	if op == "+" {
		ls, lok := l.(string)
		rs, rok := r.(string)
		if lok || rok { // C# concatenates a string with anything
			if !lok {
				ls = text(l)
			}
			if !rok {
				rs = text(r)
			}
			return ls + rs, nil
		}
	}
	switch l := l.(type) {
	case time.Time:
		switch r := r.(type) {
		case time.Duration:
			switch op {
			case "+":
				return l.Add(r), nil
			case "-":
				return l.Add(-r), nil
			}
		case time.Time:
			if op == "-" {
				return l.Sub(r), nil
			}
		}
	case time.Duration:
		switch r := r.(type) {
		case time.Duration:
			switch op {
			case "+":
				return l + r, nil
			case "-":
				return l - r, nil
			}
		case time.Time:
			if op == "+" {
				return r.Add(l), nil
			}
		}
	}
	return nil, evalErr("cannot apply %s to %s and %s", op, typeName(l), typeName(r))
}

// text formats a value for string concatenation.
func text(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		if v {
			return "True"
		}
		return "False"
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case UUID:
		return v.String()
	}
	return fmt.Sprint(v)
}

func (u UUID) String() string {
	const hexDigits = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return string(b)
}

// likeMatch matches s against a LIKE pattern: % is any run of characters,
// _ any one character, escape (when >= 0) makes the next character
// literal. Matching is by character and case-sensitive.
func likeMatch(s, pattern string, escape rune) (bool, error) {
	type elem struct {
		r    rune
		kind byte // 'l' literal, '%' any run, '_' one
	}
	var pat []elem
	pr := []rune(pattern)
	for i := 0; i < len(pr); i++ {
		c := pr[i]
		switch {
		case escape >= 0 && c == escape:
			if i+1 >= len(pr) {
				return false, evalErr("the LIKE pattern ends with its escape character")
			}
			i++
			pat = append(pat, elem{pr[i], 'l'})
		case c == '%':
			if len(pat) == 0 || pat[len(pat)-1].kind != '%' {
				pat = append(pat, elem{0, '%'})
			}
		case c == '_':
			pat = append(pat, elem{0, '_'})
		default:
			pat = append(pat, elem{c, 'l'})
		}
	}
	str := []rune(s)
	// Greedy match with one backtrack point (the last %): linear in
	// practice, quadratic at worst.
	si, pi, starP, starS := 0, 0, -1, 0
	for si < len(str) {
		switch {
		case pi < len(pat) && (pat[pi].kind == '_' || pat[pi].kind == 'l' && pat[pi].r == str[si]):
			si++
			pi++
		case pi < len(pat) && pat[pi].kind == '%':
			starP, starS = pi, si
			pi++
		case starP >= 0:
			starS++
			si, pi = starS, starP+1
		default:
			return false, nil
		}
	}
	for pi < len(pat) && pat[pi].kind == '%' {
		pi++
	}
	return pi == len(pat), nil
}
