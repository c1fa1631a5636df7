package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEverySnippetIsTested: every snippet a page marks for users to copy
// (<!-- snippet: NAME -->) is named by a test somewhere in the repository,
// which runs that very text (through Snippet), so none is left untested.
func TestEverySnippetIsTested(t *testing.T) {
	var tests []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") && filepath.Dir(path) != "." {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "Snippet(") || strings.Contains(string(b), "apply(") {
				tests = append(tests, string(b))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, page := range pages {
		names, err := Snippets(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			found++
			used := false
			for _, src := range tests {
				if strings.Contains(src, strconv.Quote(name)) {
					used = true
					break
				}
			}
			if !used {
				t.Errorf("docs/%s's snippet %q is used by no test", page, name)
			}
			if _, err := Snippet(page, name); err != nil {
				t.Error(err)
			}
		}
	}
	if found == 0 {
		t.Fatal("no snippets found: the marker changed?")
	}
}
