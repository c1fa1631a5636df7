package bound

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestText: short valid text comes back as it is; long text is cut to
// the bound on a character boundary and marked; invalid bytes never
// reach the result.
func TestText(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven…"},
		{"ab\xffcd", 10, "abcd"},
		{"ééééé", 7, "éé…"}, // 10 bytes: a cut never splits é
		{strings.Repeat("x", 5<<20), 8, "xxxxx…"},
		{strings.Repeat("\xff", 100) + "tail", 10, "…"},
		{"anything", 2, ""},
	} {
		got := Text(c.in, c.n)
		if got != c.want {
			t.Errorf("Text(%.20q, %d) = %q; want %q", c.in, c.n, got, c.want)
		}
		if len(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("Text(%.20q, %d) = %q: over the bound or not UTF-8", c.in, c.n, got)
		}
	}
}

// TestLine: the first line only, without control or bidirectional
// characters, trimmed and bounded.
func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"  error: no such node\nsecond line\n": "error: no such node",
		"\x1b[31mred\x1b[0m text":              "[31mred[0m text",
		"abc\u202edef":                         "abcdef",
		strings.Repeat("y", 1000):              strings.Repeat("y", 17) + "…",
	} {
		if got := Line(in, 20); got != want {
			t.Errorf("Line(%.30q) = %q; want %q", in, got, want)
		}
	}
}
