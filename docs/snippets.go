// Package docs holds what keeps the documentation true: tests of the
// pages themselves, and Snippet, through which other packages' tests use
// the very text a page tells users to copy.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
)

// snippetRE is a snippet in a page: a marker naming it, then a fenced
// code block (```yaml, ```sh, ...) holding it.
var snippetRE = regexp.MustCompile("(?s)<!-- snippet: (\\S+) -->\n```\\w*\n(.*?)```\n")

// Snippet returns the code block of page (a file of this directory, e.g.
// "queues.md") marked <!-- snippet: name -->. A page with no such
// snippet, or two, is an error: a test must not run something else than
// what users read.
func Snippet(page, name string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), page))
	if err != nil {
		return "", err
	}
	var found []string
	for _, m := range snippetRE.FindAllStringSubmatch(string(b), -1) {
		if m[1] == name {
			found = append(found, m[2])
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("docs/%s has %d snippets named %q, want 1", page, len(found), name)
	}
	return found[0], nil
}

// Snippets lists the names of page's snippets, in order.
func Snippets(page string) ([]string, error) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), page))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range snippetRE.FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	return names, nil
}
