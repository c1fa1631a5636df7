package termsafe

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain ASCII, üñíçødé and 日本":      "plain ASCII, üñíçødé and 日本",
		"\x1b[31mred\x1b[0m":               `\x1b[31mred\x1b[0m`,
		"a\nb\tc\rd":                       `a\nb\tc\rd`,
		"nul\x00del\x7fc1\u0085":           `nul\x00del\x7fc1\x85`,
		"\u202egnp.exe":                    `\u202egnp.exe`,
		"bad \xff byte":                    `bad \xff byte`,
		"title \x1b]0;pwned\x07":           `title \x1b]0;pwned\x07`,
		"isolate \u2066x\u2069 and \u200f": `isolate \u2066x\u2069 and \u200f`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzEscape: whatever the input, the output is valid UTF-8 with no
// control or bidirectional formatting character, and text that needed no
// escaping is unchanged.
func FuzzEscape(f *testing.F) {
	f.Add("\x1b[2J\u202e\xffok")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q is not UTF-8", s, out)
		}
		if i := strings.IndexFunc(out, unsafe); i >= 0 {
			t.Fatalf("Escape(%q) = %q keeps %q", s, out, out[i:])
		}
		if strings.IndexFunc(s, unsafe) < 0 && out != s {
			t.Fatalf("Escape changed safe text %q to %q", s, out)
		}
		for _, r := range out {
			if unicode.IsControl(r) {
				t.Fatalf("control %U in %q", r, out)
			}
		}
	})
}
