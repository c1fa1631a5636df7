// Package bound cuts text that came from outside the server (a tenant's
// webhook endpoint, a cluster's API, a Slurm command's output) to a size
// the server is willing to store, log or echo: whoever writes the text
// must not decide how much of the server's space or a reader's screen it
// takes.
package bound

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ellipsis ends a text that was cut.
const ellipsis = "…"

// Text returns s as valid UTF-8 of at most n bytes, cut on a character
// boundary and ended with "…" when it was cut. Invalid bytes are dropped
// first, so a cut never splits a character.
func Text(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	// Only the part that can be kept is looked at: a 5 MiB input costs
	// no more than a short one.
	long := len(s) > 4*n
	if long {
		s = s[:4*n]
	}
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n && !long {
		return s
	}
	if n < len(ellipsis) {
		return ""
	}
	cut := min(n-len(ellipsis), len(s))
	for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimRight(s[:cut], " ") + ellipsis
}

// Line returns Text of s's first line, control characters removed and
// surrounding space trimmed: for what is echoed inside a one-line message
// (a status text, a command's error).
func Line(s string, n int) string {
	if len(s) > 4*n {
		s = s[:4*n]
	}
	s, _, _ = strings.Cut(s, "\n")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	return Text(strings.TrimSpace(s), n)
}
