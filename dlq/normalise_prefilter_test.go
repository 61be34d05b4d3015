package dlq

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// normaliseEveryExpression is NormaliseDescription without the character
// tests that let it skip expressions: what it computed before them.
func normaliseEveryExpression(s string) string {
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	for _, n := range normalisers {
		if n.with == "<hexid>" {
			s = n.re.ReplaceAllStringFunc(s, func(m string) string {
				if len(m) < 8 {
					return m
				}
				return n.with
			})
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

// TestNormaliseSkipsOnlyWhatCannotMatch checks that skipping an expression
// whose required characters are absent never changes a pattern: on the
// benchmark's real descriptions and on 20,000 random strings made of the
// characters the expressions look for (digits, hex letters, separators,
// whitespace, '@', 'x').
func TestNormaliseSkipsOnlyWhatCannotMatch(t *testing.T) {
	for _, s := range normaliseSamples {
		if got, want := NormaliseDescription(s), normaliseEveryExpression(s); got != want {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
	}
	const alphabet = "0123456789abcdefABCDEFxXgz-:. T+,@_%\t\n\r\f  Zé"
	runes := []rune(alphabet)
	rng := rand.New(rand.NewPCG(18, 1))
	for range 20000 {
		var b strings.Builder
		for range 1 + rng.IntN(60) {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		s := b.String()
		if got, want := NormaliseDescription(s), normaliseEveryExpression(s); got != want {
			t.Fatalf("%q: %q, want %q", s, got, want)
		}
	}
}

// TestNormaliseReplacersMatchTheirExpressions compares the hand-written
// replacements of <hexid> and <n> with their regular expressions on
// 100,000 random strings of the characters that decide them (hex and other
// word characters, signs, separators, and a non-ASCII letter, which is not
// a word character for \b).
func TestNormaliseReplacersMatchTheirExpressions(t *testing.T) {
	const alphabet = "0123456789abcdefABCDEFgzGZ_-+.,: é<>"
	runes := []rune(alphabet)
	rng := rand.New(rand.NewPCG(18, 2))
	checked := 0
	for _, n := range normalisers {
		if n.replace == nil {
			continue
		}
		checked++
		want := func(s string) string {
			if n.with == "<hexid>" {
				return n.re.ReplaceAllStringFunc(s, func(m string) string {
					if len(m) < 8 {
						return m
					}
					return n.with
				})
			}
			return n.re.ReplaceAllString(s, n.with)
		}
		for range 50000 {
			var b strings.Builder
			for range 1 + rng.IntN(40) {
				b.WriteRune(runes[rng.IntN(len(runes))])
			}
			s := b.String()
			if got, want := n.replace(s), want(s); got != want {
				t.Fatalf("%s: %q: %q, want %q", n.with, s, got, want)
			}
		}
	}
	if checked != 2 {
		t.Fatalf("%d hand-written replacements, want 2 (<hexid> and <n>)", checked)
	}
}
