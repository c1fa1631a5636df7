package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const layoutDoc = "layout.md"

// TestLayoutListsEveryPackage: the tables of docs/layout.md have a row for
// every Go package under internal/ (every directory holding a .go file
// that is not a test) and for every top-level directory of the
// repository, and every path they name exists.
func TestLayoutListsEveryPackage(t *testing.T) {
	const root = ".."
	b, err := os.ReadFile(layoutDoc)
	if err != nil {
		t.Fatal(err)
	}
	listed := layoutPaths(string(b))
	if len(listed) == 0 {
		t.Fatalf("%s: no paths in the first column of its tables", layoutDoc)
	}

	for _, p := range listed {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("%s lists %s, which does not exist: remove its row or fix its path", layoutDoc, p)
		}
	}

	pkgs, err := goPackages(filepath.Join(root, "internal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no packages found under internal/")
	}
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("%s has no row for the package %s: add one (read its doc comment)", layoutDoc, p)
		}
	}

	tops, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tops {
		name := e.Name()
		if !e.IsDir() || name == ".git" || (strings.HasPrefix(name, ".") && name != ".ci") || name == "bin" {
			continue
		}
		if name == "internal" {
			continue // its packages, above
		}
		if !slices.ContainsFunc(listed, func(p string) bool { return p == name || strings.HasPrefix(p, name+"/") }) {
			t.Errorf("%s has no row for the directory %s/: add one", layoutDoc, name)
		}
	}
}

var (
	// tableRowRE is a row of a Markdown table, its first cell captured.
	tableRowRE = regexp.MustCompile(`^\|([^|]*)\|`)
	// codePathRE is a path in a code span.
	codePathRE = regexp.MustCompile("`([^`\\s]+)`")
)

// layoutPaths returns the paths named in code spans in the first cell of
// the page's table rows (header and separator rows have none), with the
// directory of the pages written "docs".
func layoutPaths(page string) []string {
	var paths []string
	for _, line := range proseLines(page) {
		m := tableRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, c := range codePathRE.FindAllStringSubmatch(m[1], -1) {
			paths = append(paths, strings.TrimSuffix(c[1], "/"))
		}
	}
	return paths
}

// goPackages returns, relative to dir's parent and with slashes, every
// directory under dir (dir included) that holds a .go file other than a
// test; testdata directories are not packages.
func goPackages(dir string) ([]string, error) {
	base := filepath.Dir(dir)
	seen := map[string]bool{}
	var pkgs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || (path != dir && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(base, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !seen[rel] {
			seen[rel] = true
			pkgs = append(pkgs, rel)
		}
		return nil
	})
	return pkgs, err
}

// TestLayoutPaths pins how the page's rows are read.
func TestLayoutPaths(t *testing.T) {
	page := "| Path | What |\n|---|---|\n| [`internal/a`](../internal/a) | the `x` package |\n" +
		"| [`Makefile`](../Makefile), [`Dockerfile`](../Dockerfile) | files |\n```\n| `internal/b` | in code |\n```\n"
	got := layoutPaths(page)
	if want := []string{"internal/a", "Makefile", "Dockerfile"}; !slices.Equal(got, want) {
		t.Errorf("paths %q, want %q", got, want)
	}
}
