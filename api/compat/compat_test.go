// Package compat holds the compatibility test of the API's contract, in a
// module of its own so that oasdiff's dependencies stay out of the
// product's go.mod (they would change the CLI's --help, for one).
package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/oasdiff/checker"
	"github.com/oasdiff/oasdiff/diff"
	"github.com/oasdiff/oasdiff/load"
)

// document is the committed OpenAPI document, api/openapi.json.
func document(t *testing.T) []byte {
	data, err := os.ReadFile("../openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// breaks is what oasdiff finds in next that breaks clients of base: its
// changes of level ERR, as one line each.
func breaks(t *testing.T, base, next []byte) []string {
	t.Helper()
	loader := openapi3.NewLoader()
	s1, err := load.NewSpecInfoFromData(loader, base, "baseline")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := load.NewSpecInfoFromData(loader, next, "openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	d, sources, err := diff.GetWithOperationsSourcesMap(diff.NewConfig(), s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	l := checker.NewDefaultLocalizer()
	var out []string
	for _, c := range checker.CheckBackwardCompatibility(checker.NewConfig(checker.GetAllChecks()), d, sources) {
		if c.GetLevel() == checker.ERR {
			out = append(out, c.GetOperation()+" "+c.GetPath()+": "+c.GetUncolorizedText(l))
		}
	}
	return out
}

func major(t *testing.T, doc []byte) int {
	var d struct {
		Info struct{ Version string } `json:"info"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	m, err := strconv.Atoi(strings.SplitN(d.Info.Version, ".", 2)[0])
	if err != nil {
		t.Fatalf("info.version %q is not semantic", d.Info.Version)
	}
	return m
}

// TestNoBreakingChange diffs the document against the baseline of its
// major version, baseline/vN.json: a change that breaks clients fails
// unless info.version takes a major step, whose first document is then
// committed as the new major's baseline.
func TestNoBreakingChange(t *testing.T) {
	doc := document(t)
	m := major(t, doc)
	base, err := os.ReadFile(fmt.Sprintf("../baseline/v%d.json", m))
	if err != nil {
		t.Fatalf("no baseline for major version %d: commit its first document as api/baseline/v%d.json: %v", m, m, err)
	}
	for _, b := range breaks(t, base, doc) {
		t.Errorf("breaks clients of the baseline: %s", b)
	}
}

// TestTheDiffFindsBreaks: the check is not blind. A response property
// removed, a route removed and an enumeration value dropped from a
// request each break; a property added to an answer and a value added to
// an open enumeration do not.
func TestTheDiffFindsBreaks(t *testing.T) {
	current := document(t)
	edit := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		if err := json.Unmarshal(current, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc)
		out, _ := json.Marshal(doc)
		return out
	}
	schema := func(doc map[string]any, name string) map[string]any {
		return doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	}
	props := func(doc map[string]any, name string) map[string]any {
		return schema(doc, name)["properties"].(map[string]any)
	}
	for name, c := range map[string]struct {
		f      func(map[string]any)
		breaks bool
	}{
		"a response property removed": {func(d map[string]any) { delete(props(d, "Cluster"), "num_gpus") }, true},
		"a route removed":             {func(d map[string]any) { delete(d["paths"].(map[string]any), "/v1/capacity") }, true},
		"a request enum value dropped": {func(d map[string]any) {
			p := props(d, "CreateClusterRequest")["cluster_type"].(map[string]any)
			p["enum"] = []any{"KUBERNETES"}
		}, true},
		"a response property added": {func(d map[string]any) { props(d, "Cluster")["colour"] = map[string]any{"type": "string"} }, false},
		"an open enumeration grown": {func(d map[string]any) {
			p := props(d, "Event")["reason"].(map[string]any)
			p["x-extensible-enum"] = append(p["x-extensible-enum"].([]any), "NodeHibernated")
		}, false},
	} {
		got := breaks(t, current, edit(c.f))
		if (len(got) > 0) != c.breaks {
			t.Errorf("%s: breaks %v, want breaking=%v", name, got, c.breaks)
		}
	}
}
