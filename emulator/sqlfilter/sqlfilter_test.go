package sqlfilter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// msg is a Message over two maps; user names are matched without regard
// to case, as the broker does.
type msg struct {
	sys  map[string]any
	user map[string]any
}

func (m *msg) System(name string) (any, bool) {
	v, ok := m.sys[name]
	return v, ok
}

func (m *msg) User(name string) (any, bool) {
	if v, ok := m.user[name]; ok {
		return v, true
	}
	for k, v := range m.user {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

func (m *msg) SetSystem(name string, v any) error {
	if name == SysTimeToLive {
		if _, ok := v.(time.Duration); !ok && v != nil {
			return errors.New("time to live must be a time span")
		}
	}
	if v == nil {
		delete(m.sys, name)
		return nil
	}
	m.sys[name] = v
	return nil
}

func (m *msg) SetUser(name string, v any) { m.user[name] = v }
func (m *msg) RemoveUser(name string)     { delete(m.user, name) }

var enqueued = time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)

func sample() *msg {
	return &msg{
		sys: map[string]any{
			SysMessageID: "m-1", SysLabel: "big bus", SysCorrelationID: "abc-7", SysTo: "Store5",
			SysSequenceNumber: int64(42), SysDeliveryCount: int64(0), SysEnqueuedTimeUtc: enqueued,
			SysTimeToLive: 90 * time.Second,
		},
		user: map[string]any{
			"color": "red", "quantity": int32(10), "price": 2.5, "flag": true, "nothing": nil,
			"Property With Space": "x", "HR-EmployeeID": int64(7), "path": `ABC%`, "big": uint64(1 << 63),
			"when": enqueued.Add(time.Hour), "small": int8(-3),
		},
	}
}

func TestMatch(t *testing.T) {
	params := map[string]any{
		"@s": "red", "i": 10, "@f": 2.5, "@b": true, "@dt": enqueued, "@span": time.Hour, "@Mixed": "Store5",
	}
	tests := []struct {
		expr string
		want bool
	}{
		// comparisons, keywords in any case, numeric promotion
		{"color = 'red'", true},
		{"color = 'Red'", false}, // case-sensitive
		{"color <> 'blue'", true},
		{"color != 'red'", false},
		{"quantity = 10", true},
		{"quantity = 10.0", true},
		{"quantity > 9.5 and quantity < 10.5", true},
		{"quantity >= 10 AND quantity <= 10", true},
		{"price > 2", true},
		{"price = 2.5", true},
		{"price = 25E-1", true},
		{"small < 0", true},
		{"big > 9000000000000000000", true},
		{"flag = TRUE", true},
		{"flag", true},
		{"NOT flag", false},
		{"flag = false", false},
		{"'b' > 'a'", true},
		{"when > sys.EnqueuedTimeUtc", true},
		// arithmetic and precedence
		{"quantity + 5 * 2 = 20", true},
		{"(quantity + 5) * 2 = 30", true},
		{"quantity / 4 = 2", true}, // integer division
		{"quantity / 4.0 = 2.5", true},
		{"quantity % 3 = 1", true},
		{"-quantity = -10", true},
		{"- -quantity = 10", true},
		{"+quantity = 10", true},
		{"quantity - 3 - 2 = 5", true},
		{"color + '-' + 'x' = 'red-x'", true},
		{"sys.SequenceNumber - 2 = 40", true},
		{"when - sys.EnqueuedTimeUtc = @span", true},
		{"sys.EnqueuedTimeUtc + @span = when", true},
		// AND / OR / NOT precedence and parentheses
		{"color = 'blue' OR color = 'red' AND quantity = 10", true},
		{"(color = 'blue' OR color = 'red') AND quantity = 11", false},
		{"NOT color = 'blue' AND quantity = 10", true},
		{"NOT (color = 'red' AND quantity = 10)", false},
		// three-valued logic: a missing property is unknown
		{"missing = 1", false},
		{"NOT (missing = 1)", false},
		{"missing <> 1", false},
		{"missing = 1 OR color = 'red'", true},
		{"missing = 1 AND color = 'blue'", false},
		{"NOT (missing = 1 AND color = 'blue')", true}, // U AND F = F
		{"NOT (missing = 1 OR color = 'blue')", false}, // U OR F = U
		{"missing + 1 > 0", false},
		{"nothing = 1", false},
		{"color = NULL", false},
		{"NOT (color = NULL)", false},
		// IS NULL, EXISTS
		{"missing IS NULL", true},
		{"nothing IS NULL", true},
		{"color IS NULL", false},
		{"color IS NOT NULL", true},
		{"sys.ReplyTo IS NULL", true},
		{"sys.To IS NOT NULL", true},
		{"EXISTS(color)", true},
		{"EXISTS(nothing)", true},
		{"EXISTS(missing)", false},
		{"NOT EXISTS(missing)", true},
		{"exists(sys.ReplyTo)", false},
		{"EXISTS(sys.To)", true},
		// IN
		{"color IN ('blue', 'red')", true},
		{"color IN ('blue')", false},
		{"color NOT IN ('blue', 'green')", true},
		{"color NOT IN ('red')", false},
		{"quantity IN (1, 10.0)", true},
		{"missing IN ('a')", false},
		{"NOT (missing IN ('a'))", false},
		{"color IN ('blue', NULL)", false},
		{"NOT (color IN ('blue', NULL))", false},
		{"color IN ('red', NULL)", true},
		{"color IN ('x', 1, 'red')", true}, // a value of another type is just not equal
		{"sys.To IN ('Store5','Store6','Store7') OR StoreId = 'Store8'", true},
		// LIKE
		{"color LIKE 'r%'", true},
		{"color LIKE 'R%'", false},
		{"color LIKE '_e_'", true},
		{"color LIKE '__'", false},
		{"color LIKE '%'", true},
		{"color LIKE '%d'", true},
		{"color LIKE '%e%'", true},
		{"color NOT LIKE 'b%'", true},
		{"sys.Label LIKE '%bus%'", true},
		{"sys.label like '%BUS%'", false},
		{"path LIKE 'ABC\\%' ESCAPE '\\'", true},
		{"path LIKE 'ABC!%' ESCAPE '!'", true},
		{"'ABCD' LIKE 'ABC!%' ESCAPE '!'", false},
		{"'ABCD' LIKE 'ABC%'", true},
		{"'a_c' LIKE 'a!_c' ESCAPE '!'", true},
		{"'abc' LIKE 'a!_c' ESCAPE '!'", false},
		{"'aXbXc' LIKE 'a%b%c'", true},
		{"'aXbXd' LIKE 'a%b%c'", false},
		{"'héllo' LIKE 'h_llo'", true}, // by character, not byte
		{"missing LIKE '%'", false},
		{"NOT (missing LIKE '%')", false},
		// properties: scopes, delimited and quoted names, case-insensitive names
		{"user.color = 'red'", true},
		{"USER.COLOR = 'red'", true},
		{"[Property With Space] = 'x'", true},
		{"[HR-EmployeeID] = 7", true},
		{`"HR-EmployeeID" = 7`, true},
		{"user.[HR-EmployeeID] = 7", true},
		{"sys.MessageId = 'm-1'", true},
		{"SYS.MESSAGEID = 'm-1'", true},
		{"sys.Subject = 'big bus'", true},
		{"sys.correlationid like 'abc-%'", true},
		{"sys.DeliveryCount = 0", true},
		{"sys.TimeToLive < @span", true},
		{"MessageId = 'm-1'", false}, // bare names are user properties
		{"property('color') = 'red'", true},
		{"p('sys.To') = 'Store5'", true},
		{"p('user.' + 'color') = 'red'", true},
		// parameters
		{"color = @s", true},
		{"color = @S", true},
		{"quantity = @i", true},
		{"price = @f", true},
		{"flag = @b", true},
		{"sys.EnqueuedTimeUtc = @dt", true},
		{"sys.To = @mixed", true},
		// constants
		{"1=1", true},
		{"1=0", false},
		{"TRUE", true},
		{"false", false},
		{"1 = 1.0", true},
		{"'it''s' = 'it' + '''s'", true},
		{"0.5E1 = 5", true},
		{".5 = 0.5", true},
		{"-9223372036854775808 < 0", true},
		{"newid() <> newid()", true},
	}
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, params)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.expr, err)
			continue
		}
		got, err := f.Match(sample())
		if err != nil && tt.want {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

func TestEvaluationErrors(t *testing.T) {
	for _, expr := range []string{
		"color = 10",         // string with integer
		"color > 1",          // string ordered against a number
		"flag < TRUE",        // booleans are not ordered
		"quantity / 0 = 1",   // integer division by zero
		"color - 1 = 0",      // no arithmetic on strings
		"NOT color",          // not a condition
		"color",              // a bare property must be a boolean
		"quantity LIKE '1%'", // LIKE needs strings
		"path LIKE 'a' ESCAPE sys.To",
		"path LIKE 'ABC!' ESCAPE '!'", // pattern ends with the escape
		"p(1) = 1",
	} {
		f, err := ParseFilter(expr, nil)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", expr, err)
			continue
		}
		ok, err := f.Match(sample())
		if ok || !errors.Is(err, ErrEvaluation) {
			t.Errorf("%q = %v, %v; want false and an evaluation error", expr, ok, err)
		}
	}
	// FALSE AND <error> is FALSE: the right side is never needed.
	f, err := ParseFilter("color = 'blue' AND color = 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Match(sample()); ok || err != nil {
		t.Errorf("short circuit: %v, %v", ok, err)
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		expr         string
		line, column int
		token        string
		detail       string
	}{
		{"", 1, 1, "", "empty"},
		{"   ", 1, 1, "", "empty"},
		{"color =", 1, 8, "", "unexpected end of expression"},
		{"color = 'red", 1, 9, "'red", "unterminated string"},
		{"[color = 1", 1, 1, "[color = 1", "unterminated identifier"},
		{"color == 'red'", 1, 8, "=", "unexpected '='"},
		{"color = 'red' AND", 1, 18, "", "unexpected end"},
		{"color 'red'", 1, 7, "'red'", "expecting an operator"},
		{"color # 1", 1, 7, "#", "unrecognized character '#'"},
		{"a = 1\n AND b = ", 2, 10, "", "unexpected end"},
		{"foo.bar = 1", 1, 1, "foo", "unknown property scope"},
		{"sys.Colour = 1", 1, 5, "Colour", "unknown system property sys.Colour"},
		{"sys. = 1", 1, 6, "=", "a property name after sys."},
		{"color IN 'red'", 1, 10, "'red'", "expecting '('"},
		{"color IN ('red'", 1, 16, "", "expecting ')'"},
		{"color IN ()", 1, 11, ")", "unexpected ')'"},
		{"color NOT 'x'", 1, 11, "'x'", "expecting IN or LIKE"},
		{"color IS 1", 1, 10, "1", "expecting NULL"},
		{"color LIKE 1", 1, 12, "1", "string pattern"},
		{"color LIKE 'a' ESCAPE 'ab'", 1, 23, "'ab'", "length 1"},
		{"EXISTS color", 1, 8, "color", "expecting '('"},
		{"EXISTS(1)", 1, 8, "1", "a property name"},
		{"upper(color) = 'RED'", 1, 1, "upper", "unknown function"},
		{"99999999999999999999 = 1", 1, 1, "99999999999999999999", "out of range"},
		{"1e = 1", 1, 1, "1e", "exponent"},
		{"12abc = 1", 1, 1, "12a", "followed by a letter"},
		{"'red'", 1, 1, "'red'", "a condition, not a constant"},
		{"color = @missing", 1, 9, "@missing", "@missing has no value"},
		{"@ = 1", 1, 1, "@", "parameter needs a name"},
		{"(color = 'red'", 1, 15, "", "expecting ')'"},
		{"color = 'red')", 1, 14, ")", "unexpected ')'"},
		{"AND = 1", 1, 1, "AND", "unexpected AND"},
		{"héllo = 'x' AND ?", 1, 17, "?", "unrecognized character"},
		{strings.Repeat("(", 300) + "1=1" + strings.Repeat(")", 300), 1, 201, "(", "nests too deeply"},
	}
	for _, tt := range tests {
		_, err := ParseFilter(tt.expr, map[string]any{"@known": 1})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseFilter(%q) = %v, want a *SyntaxError", tt.expr, err)
			continue
		}
		if se.Line != tt.line || se.Column != tt.column || se.Token != tt.token || !strings.Contains(se.Detail, tt.detail) {
			t.Errorf("ParseFilter(%q) = line %d column %d token %q detail %q; want line %d column %d token %q detail containing %q",
				tt.expr, se.Line, se.Column, se.Token, se.Detail, tt.line, tt.column, tt.token, tt.detail)
		}
		if !strings.HasPrefix(se.Azure(), "There was an error parsing the SQL expression. [Token line=") {
			t.Errorf("Azure() = %q", se.Azure())
		}
	}
}

func TestParameterBinding(t *testing.T) {
	if _, err := ParseFilter("a = @x", map[string]any{"@x": []int{1}}); err == nil {
		t.Error("a slice parameter was accepted")
	}
	f, err := ParseFilter("a = @X", map[string]any{"x": int16(3)}) // key without @, other case
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Match(&msg{user: map[string]any{"a": int64(3)}}); !ok || err != nil {
		t.Errorf("match = %v, %v", ok, err)
	}
	if ok, _ := f.Match(&msg{user: map[string]any{"a": int64(4)}}); ok {
		t.Error("a = 4 matched @X = 3")
	}
}

func TestAction(t *testing.T) {
	tests := []struct {
		action   string
		wantUser map[string]any
		wantSys  map[string]any // checked keys only
		gone     []string       // user properties removed
	}{
		{action: "SET quantity = quantity / 2; REMOVE color; SET sys.CorrelationId = 'low';",
			wantUser: map[string]any{"quantity": int64(5)}, wantSys: map[string]any{SysCorrelationID: "low"}, gone: []string{"color"}},
		{action: "SET a = 1, SET b = a + 1", wantUser: map[string]any{"a": int64(1), "b": int64(2)}},
		{action: "SET a = 1 SET b = 'x' REMOVE a", wantUser: map[string]any{"b": "x"}, gone: []string{"a"}},
		{action: "set sys.Label = sys.Label + '!'", wantSys: map[string]any{SysLabel: "big bus!"}},
		{action: "SET sys.Subject = @p", wantSys: map[string]any{SysLabel: "v"}},
		{action: "REMOVE sys.To", wantSys: map[string]any{SysTo: nil}},
		{action: "SET copy = missing", wantUser: map[string]any{"copy": nil}},
		{action: "SET [new prop] = sys.SequenceNumber * 2", wantUser: map[string]any{"new prop": int64(84)}},
		{action: "SET seen = EXISTS(color) AND color LIKE 'r%'", wantUser: map[string]any{"seen": true}},
	}
	for _, tt := range tests {
		a, err := ParseAction(tt.action, map[string]any{"@p": "v"})
		if err != nil {
			t.Errorf("ParseAction(%q): %v", tt.action, err)
			continue
		}
		m := sample()
		if err := a.Apply(m); err != nil {
			t.Errorf("%q: Apply: %v", tt.action, err)
			continue
		}
		for k, want := range tt.wantUser {
			if got, ok := m.user[k]; !ok || got != want {
				t.Errorf("%q: user %s = %#v (present %v), want %#v", tt.action, k, got, ok, want)
			}
		}
		for k, want := range tt.wantSys {
			if got := m.sys[k]; got != want {
				t.Errorf("%q: sys %s = %#v, want %#v", tt.action, k, got, want)
			}
		}
		for _, k := range tt.gone {
			if _, ok := m.user[k]; ok {
				t.Errorf("%q: user %s still present", tt.action, k)
			}
		}
	}

	// A failing statement stops the action; the ones before it stay.
	a, err := ParseAction("SET a = 1; SET sys.TimeToLive = 'soon'; SET b = 2", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := sample()
	if err := a.Apply(m); err == nil {
		t.Error("setting TimeToLive to a string succeeded")
	}
	if _, ok := m.user["a"]; !ok {
		t.Error("the statement before the failure was undone")
	}
	if _, ok := m.user["b"]; ok {
		t.Error("the statement after the failure ran")
	}
}

func TestActionSyntaxErrors(t *testing.T) {
	tests := []struct {
		action string
		column int
		detail string
	}{
		{"", 1, "empty"},
		{"a = 1", 1, "expecting SET or REMOVE"},
		{"SET a 1", 7, "expecting '='"},
		{"SET = 1", 5, "a property name"},
		{"SET sys.SequenceNumber = 1", 5, "set by the broker"},
		{"REMOVE sys.EnqueuedTimeUtc", 8, "set by the broker"},
		{"SET a = 1,, SET b = 2", 11, "expecting SET or REMOVE"},
		{"SET a = @p", 9, "@p has no value"},
		{"SET a = 1 DELETE b", 11, "expecting SET or REMOVE"},
	}
	for _, tt := range tests {
		_, err := ParseAction(tt.action, nil)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseAction(%q) = %v, want a *SyntaxError", tt.action, err)
			continue
		}
		if se.Column != tt.column || !strings.Contains(se.Detail, tt.detail) {
			t.Errorf("ParseAction(%q): column %d detail %q; want column %d detail containing %q", tt.action, se.Column, se.Detail, tt.column, tt.detail)
		}
	}
}
