package sqlfilter

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Filter is a parsed SQL filter with its parameters bound. It is immutable
// and safe for concurrent use.
type Filter struct {
	src    string
	e      expr
	params map[string]any
}

// ParseFilter parses a SqlFilter expression and binds its parameters
// (keys with or without the leading @, matched without regard to case).
// A *SyntaxError reports bad syntax, an unknown system property or a
// parameter without a value.
func ParseFilter(src string, params map[string]any) (*Filter, error) {
	e, used, err := parseExpr(src)
	if err != nil {
		return nil, err
	}
	bound, err := bind(src, used, params)
	if err != nil {
		return nil, err
	}
	return &Filter{src: src, e: e, params: bound}, nil
}

// String returns the expression as written.
func (f *Filter) String() string { return f.src }

// Match reports whether the filter selects m: only when the expression is
// TRUE (FALSE and unknown do not match). An error wraps ErrEvaluation.
func (f *Filter) Match(m Message) (bool, error) {
	v := env{msg: m, params: f.params}
	t, err := v.cond(f.e)
	return t == isTrue, err
}

// Action is a parsed SqlRuleAction with its parameters bound. It is
// immutable and safe for concurrent use.
type Action struct {
	src    string
	stmts  []statement
	params map[string]any
}

// ParseAction parses SqlRuleAction statements (SET prop = expr, REMOVE
// prop; separated by commas, semicolons or white space) and binds their
// parameters as ParseFilter does. Setting a system property the broker
// owns (sys.SequenceNumber, …) is refused here.
func ParseAction(src string, params map[string]any) (*Action, error) {
	stmts, used, err := parseAction(src)
	if err != nil {
		return nil, err
	}
	bound, err := bind(src, used, params)
	if err != nil {
		return nil, err
	}
	return &Action{src: src, stmts: stmts, params: bound}, nil
}

// String returns the action as written.
func (a *Action) String() string { return a.src }

// Apply runs the statements in order on m, each seeing the effect of the
// ones before. It stops at the first failure (an error wrapping
// ErrEvaluation, or SetSystem's refusal); the statements before it stay
// applied.
func (a *Action) Apply(m MutableMessage) error {
	v := env{msg: m, params: a.params}
	for _, st := range a.stmts {
		var val any
		if st.value != nil {
			x, err := v.eval(st.value)
			if err != nil {
				return err
			}
			val = x
		}
		switch {
		case st.prop.scope == System:
			if err := m.SetSystem(st.prop.name, val); err != nil {
				return fmt.Errorf("set sys.%s: %w", st.prop.name, err)
			}
		case st.value == nil:
			m.RemoveUser(st.prop.name)
		default:
			m.SetUser(st.prop.name, val)
		}
	}
	return nil
}

// bind checks that every parameter the expression uses has a value and
// returns the values by lower-cased name with the @.
func bind(src string, used map[string]token, params map[string]any) (map[string]any, error) {
	bound := make(map[string]any, len(params))
	for k, val := range params {
		key := strings.ToLower(k)
		if !strings.HasPrefix(key, "@") {
			key = "@" + key
		}
		switch val.(type) {
		case nil, string, bool, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64, uint,
			float32, float64, time.Time, time.Duration:
		default:
			return nil, &SyntaxError{Line: 1, Column: 1, Token: k,
				Detail: fmt.Sprintf("the parameter %s has a value of type %T (want string, integer, decimal, boolean, date-time or time span)", k, val)}
		}
		bound[key] = normalize(val)
	}
	var missing []token
	for name, t := range used {
		if _, ok := bound[name]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		t := slices.MinFunc(missing, func(a, b token) int { return a.pos - b.pos })
		return nil, syntaxErr(src, t.pos, t.raw, "the parameter "+t.raw+" has no value: add it to the parameters")
	}
	return bound, nil
}
