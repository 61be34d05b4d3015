package sqlfilter

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a rejected expression: what is wrong (Detail) and where
// (Line and Column, both from 1, Column counted in characters; Offset in
// bytes), with the text of the offending token.
type SyntaxError struct {
	Line, Column, Offset int
	Token                string
	Detail               string
}

func (e *SyntaxError) Error() string {
	tok := e.Token
	if tok == "" {
		tok = "end of expression"
	}
	return fmt.Sprintf("line %d, column %d, at %q: %s", e.Line, e.Column, tok, e.Detail)
}

// Azure words the fault the way the service does ("There was an error
// parsing the SQL expression. [Token line=…, column=…, Token in error=…,
// Additional details=…]"), which is what a user of Azure searches for.
func (e *SyntaxError) Azure() string {
	return fmt.Sprintf("There was an error parsing the SQL expression. [Token line=%d, column=%d, Token in error= %s, Additional details= %s]",
		e.Line, e.Column, e.Token, e.Detail)
}

func syntaxErr(src string, off int, tok, detail string) *SyntaxError {
	off = min(max(off, 0), len(src))
	before := src[:off]
	line := strings.Count(before, "\n") + 1
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return &SyntaxError{Line: line, Column: utf8.RuneCountInString(before) + 1, Offset: off, Token: tok, Detail: detail}
}

// ErrEvaluation marks a failure while evaluating an expression against a
// message: an operator applied to values of types it does not take, a
// division by zero, a bad LIKE escape. Azure raises a filter exception
// then; the rule does not select the message.
var ErrEvaluation = errors.New("sql filter evaluation failed")

func evalErr(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrEvaluation)
}
