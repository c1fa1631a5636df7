package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var excerpt = regexp.MustCompile("(?s)<!-- excerpt: (\\S+) -->\n```[a-z]*\n(.*?)```")

// TestExcerptsAreTheirFiles: a code block a page marks as an excerpt of a
// file (<!-- excerpt: PATH -->) is lines of that file, in its order
// (indentation aside, lines between left out), so the page shows the code
// the tests run, not a copy that drifts.
func TestExcerptsAreTheirFiles(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range excerpt.FindAllStringSubmatch(string(text), -1) {
			n++
			src, err := os.ReadFile(m[1])
			if err != nil {
				t.Errorf("%s: excerpt of %s: %v", page, m[1], err)
				continue
			}
			if missing := notInOrder(m[2], string(src)); missing != "" {
				t.Errorf("%s: the excerpt of %s has %q, which is not the file's next line of that text", page, m[1], missing)
			}
		}
	}
	if n == 0 {
		t.Fatal("no excerpt found: the marker or this test is broken")
	}
}

// notInOrder is the first non-blank line of block that does not appear in
// src after the lines before it ("": every line does).
func notInOrder(block, src string) string {
	lines := strings.Split(src, "\n")
	at := 0
	for _, want := range strings.Split(block, "\n") {
		want = strings.TrimSpace(want)
		if want == "" {
			continue
		}
		for at < len(lines) && strings.TrimSpace(lines[at]) != want {
			at++
		}
		if at == len(lines) {
			return want
		}
		at++
	}
	return ""
}
