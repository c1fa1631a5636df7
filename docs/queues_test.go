// Package docs holds tests that keep the documentation true to the code
// it shows.
package docs

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "copy the recipes of examples/queues into docs/queues.md")

const (
	queuesDoc     = "queues.md"
	recipeSection = "## Work queues: return the item at the notice"
)

// recipeBlock is a file embedded in docs/queues.md: a marker naming it,
// then a Go code block that holds it.
var recipeBlock = regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```go\n(.*?)```\n")

// moduleVersion is a module at a version, as `go get` names it.
var moduleVersion = regexp.MustCompile(`\b((?:github\.com|golang\.org|k8s\.io)/[\w./-]+)@(v[\w.+-]+)`)

// TestQueueRecipesInDocs: the recipes of the section "Work queues: return
// the item at the notice" are the files the recipes' tests build and run,
// byte for byte, every recipe of examples/queues is there, and every
// version the section names is one the recipes' modules require.
func TestQueueRecipesInDocs(t *testing.T) {
	root := ".."
	b, err := os.ReadFile(queuesDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n"+recipeSection+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", queuesDoc, recipeSection)
	}
	start++
	end := len(doc)
	if i := strings.Index(doc[start+len(recipeSection):], "\n## "); i >= 0 {
		end = start + len(recipeSection) + i + 1
	}
	section := doc[start:end]

	recipes, err := filepath.Glob(filepath.Join(root, "examples", "queues", "*", "main.go"))
	if err != nil || len(recipes) == 0 {
		t.Fatalf("no recipes in examples/queues: %v", err)
	}
	var want []string
	for _, r := range recipes {
		rel, _ := filepath.Rel(root, r)
		want = append(want, filepath.ToSlash(rel))
	}

	var embedded []string
	var stale []string
	newSection := recipeBlock.ReplaceAllStringFunc(section, func(block string) string {
		m := recipeBlock.FindStringSubmatch(block)
		path, shown := m[1], m[2]
		embedded = append(embedded, path)
		file, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("%s embeds %s, which cannot be read: %v", queuesDoc, path, err)
			return block
		}
		if shown != string(file) {
			stale = append(stale, path)
		}
		return "<!-- file: " + path + " -->\n```go\n" + string(file) + "```\n"
	})
	for _, path := range want {
		if !slices.Contains(embedded, path) {
			t.Errorf("%s does not show the recipe %s: add a block marked <!-- file: %s --> to its section", queuesDoc, path, path)
		}
	}
	if len(stale) > 0 {
		if *update {
			if err := os.WriteFile(queuesDoc, []byte(doc[:start]+newSection+doc[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("copied %v into %s", stale, queuesDoc)
		} else {
			t.Errorf("%s shows %v otherwise than the files the tests run; copy them in with: go test ./docs -run TestQueueRecipesInDocs -update", queuesDoc, stale)
		}
	}

	// The versions the section names are the ones the recipes are built
	// with: the module's go.mod, or the current SQS SDK's modfile.
	required := map[string]bool{}
	for _, mod := range []string{"go.mod", "sqs-current-sdk.mod"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", "queues", mod))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
			if len(f) >= 2 && strings.HasPrefix(f[1], "v") {
				required[f[0]+"@"+f[1]] = true
			}
		}
	}
	named := moduleVersion.FindAllString(section, -1)
	if len(named) == 0 {
		t.Errorf("the section names no module version")
	}
	for _, mv := range named {
		if !required[mv] {
			t.Errorf("%s names %s, which neither examples/queues/go.mod nor sqs-current-sdk.mod requires", queuesDoc, mv)
		}
	}
}
