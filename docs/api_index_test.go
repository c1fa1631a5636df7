package docs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	spec "github.com/sparecap/sparecap/api"
)

// operation is what the route index of api.md says of an operation.
type operation struct{ method, path, who, id string }

// documented is every operation of the OpenAPI document, by path then
// method.
func documented(t *testing.T) []operation {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Access      string `json:"x-access"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(spec.Document, &doc); err != nil {
		t.Fatal(err)
	}
	who := map[string]string{"public": "no token", "token": "any token", "admin": "admin"}
	var out []operation
	for path, item := range doc.Paths {
		for method, op := range item {
			out = append(out, operation{strings.ToUpper(method), path, who[op.Access], op.OperationID})
		}
	}
	order := map[string]int{"GET": 0, "POST": 1, "PUT": 2, "PATCH": 3, "DELETE": 4}
	slices.SortFunc(out, func(a, b operation) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return order[a.method] - order[b.method]
	})
	return out
}

func indexTable(ops []operation) string {
	var b strings.Builder
	b.WriteString("| Method | Path | Who | Operation |\n|--------|------|-----|-----------|\n")
	for _, o := range ops {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | `%s` |\n", o.method, o.path, o.who, o.id)
	}
	return b.String()
}

var indexBlock = regexp.MustCompile(`(?s)<!-- route index: from api/openapi\.json -->\n(.*?)\n<!-- end of the route index -->`)

// TestTheRouteIndexIsTheDocument: api.md's route index lists exactly the
// OpenAPI document's operations, with the same path parameter names.
func TestTheRouteIndexIsTheDocument(t *testing.T) {
	page, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	want := indexTable(documented(t))
	m := indexBlock.FindSubmatch(page)
	if m == nil {
		t.Fatalf("api.md has no route index between its markers; it should read:\n%s", want)
	}
	if string(m[1])+"\n" != want {
		t.Errorf("api.md's route index is not the document's operations; it should read:\n%s", want)
	}
}

var templatedPath = regexp.MustCompile("(/v1/[a-z0-9{}_/.-]*\\{[a-z_]+\\}[a-z0-9{}_/.-]*)")

// TestPagesNameTheDocumentsPaths: a path with parameters anywhere in the
// pages is one the document has, parameter names included (a path cut
// with … is a prefix of one).
func TestPagesNameTheDocumentsPaths(t *testing.T) {
	var paths []string
	for _, o := range documented(t) {
		paths = append(paths, o.path)
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range templatedPath.FindAllStringIndex(line, -1) {
				p := strings.TrimRight(line[m[0]:m[1]], ".")
				cut := strings.HasPrefix(line[m[1]:], "…")
				if !slices.ContainsFunc(paths, func(q string) bool { return q == p || cut && strings.HasPrefix(q, p) }) {
					t.Errorf("%s:%d names %s, which the OpenAPI document does not have", page, i+1, p)
				}
			}
		}
	}
}
