package openapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The house style of the document. Spectral's and vacuum's rulesets check
// the like; these are ours, run offline by the tests.
var (
	snake   = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	camel   = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	segment = regexp.MustCompile(`^([a-z0-9]+(-[a-z0-9]+)*|[a-z0-9]+\.json|\{[a-z_]+\})$`)
)

// Lint is what the document does against the house rules: names in
// snake_case, paths in kebab-case, one error shape, every operation named,
// summarised, tagged and documented for its errors, every schema used
// and described.
func Lint(data []byte) []string {
	var doc struct {
		Tags       []struct{ Name string }                     `json:"tags"`
		Paths      map[string]map[string]map[string]any        `json:"paths"`
		Components struct{ Schemas, Responses map[string]any } `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return []string{err.Error()}
	}
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	tags := map[string]bool{}
	for _, t := range doc.Tags {
		tags[t.Name] = true
	}
	ids := map[string]string{}
	for path, item := range doc.Paths {
		lintPath(path, bad)
		for method, op := range item {
			where := strings.ToUpper(method) + " " + path
			id, _ := op["operationId"].(string)
			if !camel.MatchString(id) {
				bad("%s: operationId %q is not lowerCamelCase", where, id)
			}
			if other, dup := ids[id]; dup {
				bad("%s: operationId %q is also %s's", where, id, other)
			}
			ids[id] = where
			lintOperation(where, path, op, tags, bad)
		}
	}
	for name, s := range doc.Components.Schemas {
		lintSchema("schema "+name, s, bad)
		if d, _ := s.(map[string]any)["description"].(string); d == "" {
			bad("schema %s has no description (its Go type's doc comment)", name)
		}
		if !strings.Contains(string(data), `"#/components/schemas/`+name+`"`) {
			bad("schema %s is used by no operation", name)
		}
	}
	slices.Sort(out)
	return out
}

func lintPath(path string, bad func(string, ...any)) {
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if !segment.MatchString(seg) {
			bad("path %s: segment %q is not kebab-case", path, seg)
		}
	}
}

func lintOperation(where, path string, op map[string]any, tags map[string]bool, bad func(string, ...any)) {
	if s, _ := op["summary"].(string); s == "" {
		bad("%s has no summary", where)
	}
	opTags, _ := op["tags"].([]any)
	if len(opTags) != 1 || !tags[fmt.Sprint(opTags[0])] {
		bad("%s: tags %v are not one declared tag", where, opTags)
	}
	params, _ := op["parameters"].([]any)
	inPath := map[string]bool{}
	for _, p := range params {
		pm, _ := p.(map[string]any)
		name, _ := pm["name"].(string)
		if pm["in"] == "path" {
			inPath[name] = true
		}
		if pm["$ref"] == nil && !snake.MatchString(name) {
			bad("%s: parameter %q is not snake_case", where, name)
		}
	}
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		if !inPath[m[1]] {
			bad("%s: path parameter {%s} is not declared", where, m[1])
		}
	}
	responses, _ := op["responses"].(map[string]any)
	for status, r := range responses {
		rm, _ := r.(map[string]any)
		ref, _ := rm["$ref"].(string)
		if status[0] >= '4' && !strings.HasPrefix(ref, "#/components/responses/") {
			bad("%s: error %s is not one of the shared error answers", where, status)
		}
	}
	if op["security"] == nil && responses["401"] == nil {
		bad("%s takes a token but documents no 401", where)
	}
}

// lintSchema checks an object's property names, recursively.
func lintSchema(where string, s any, bad func(string, ...any)) {
	m, _ := s.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	for name, p := range props {
		if !snake.MatchString(name) {
			bad("%s: property %q is not snake_case", where, name)
		}
		lintSchema(where+"."+name, p, bad)
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := m[k].(map[string]any); ok {
			lintSchema(where, sub, bad)
		}
	}
	if e, ok := m["enum"].([]any); ok && len(e) == 0 {
		bad("%s: an empty enum", where)
	}
}
