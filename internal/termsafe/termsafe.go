// Package termsafe makes text from the server safe to print in a
// terminal. Names and messages can carry what a tenant or an operator
// typed; printed raw, an escape sequence could rewrite the screen, hide a
// line or change the terminal's title, and a bidirectional override could
// reorder what a reader sees.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every control character (C0, DEL, C1, including
// tab and newline), every bidirectional formatting character and every
// byte that is not UTF-8 written as a Go escape (\x1b, \n, \u202e). Text
// without any comes back unchanged.
func Escape(s string) string {
	i := strings.IndexFunc(s, unsafe)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case unsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// unsafe reports whether r must not reach a terminal as it is.
func unsafe(r rune) bool {
	if r == utf8.RuneError || unicode.IsControl(r) {
		return true
	}
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f, // arabic letter mark, LRM, RLM
		r >= 0x202a && r <= 0x202e, // embeddings and overrides
		r >= 0x2066 && r <= 0x2069: // isolates
		return true
	}
	return false
}
