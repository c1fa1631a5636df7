package openapi

import (
	"strings"
	"testing"

	spec "github.com/sparecap/sparecap/api"
)

// TestTheDocumentKeepsTheHouseRules lints the committed document.
func TestTheDocumentKeepsTheHouseRules(t *testing.T) {
	for _, p := range Lint(spec.Document) {
		t.Error(p)
	}
}

// TestTheLintCatches: a document breaking each rule is caught.
func TestTheLintCatches(t *testing.T) {
	doc := `{"tags":[{"name":"a"}],"paths":{"/v1/Bad_path/{id}":{"get":{"operationId":"Get_thing","tags":["b"],
	"parameters":[{"name":"pageSize","in":"query"}],"responses":{"404":{"description":"x"}}}}},
	"components":{"schemas":{"Thing":{"properties":{"camelCase":{"type":"string"}}}}}}`
	got := strings.Join(Lint([]byte(doc)), "\n")
	for _, want := range []string{"not kebab-case", "not lowerCamelCase", "no summary", "not one declared tag", `"pageSize" is not snake_case`,
		"{id} is not declared", "not one of the shared error answers", "documents no 401", `"camelCase" is not snake_case`, "Thing has no description", "Thing is used by no operation"} {
		if !strings.Contains(got, want) {
			t.Errorf("not caught: %s\ngot:\n%s", want, got)
		}
	}
}
