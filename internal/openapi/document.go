package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Info is the document's info object and where it says the API is.
type Info struct {
	Title, Version, Description, Server string
	// Tags describe the groups operations are in, in order.
	Tags [][2]string
	// ErrorBody is the Go type of every error answer.
	ErrorBody any
	// Enums, by "GoType.json_name", are the values of string fields.
	Enums map[string]Enum
	// PathParams describe the path parameters by name.
	PathParams map[string]string
	// Examples, keyed "operationId status", "operationId request" or
	// "error status", are set on those bodies (see Examples).
	Examples map[string]any
}

// errorNames are the shared error answers, by status.
var errorNames = map[int]string{
	400: "InvalidArgument", 401: "Unauthenticated", 403: "PermissionDenied", 404: "NotFound",
	409: "Conflict", 413: "TooLarge", 429: "RateLimited", 500: "Internal", 503: "Unavailable",
}

// Build is the OpenAPI 3.1 document of ops, as indented JSON.
func Build(info Info, ops []Op, docs Comments) ([]byte, error) {
	s := newSchemas(docs, info.Enums)
	paths := map[string]map[string]any{}
	for _, op := range ops {
		o, err := s.operation(op, info)
		if err != nil {
			return nil, err
		}
		if paths[op.Path] == nil {
			paths[op.Path] = map[string]any{}
		}
		m := strings.ToLower(op.Method)
		if _, dup := paths[op.Path][m]; dup {
			return nil, fmt.Errorf("openapi: %s is listed twice", op.Key())
		}
		paths[op.Path][m] = o
	}
	errRef := s.of(reflect.TypeOf(info.ErrorBody), false)
	doc := map[string]any{
		"openapi":  "3.1.0",
		"info":     map[string]any{"title": info.Title, "version": info.Version, "description": info.Description, "license": map[string]any{"name": "Apache-2.0", "identifier": "Apache-2.0"}},
		"servers":  []any{map[string]any{"url": info.Server}},
		"security": []any{map[string]any{"bearer": []string{}}},
		"tags":     tagList(info.Tags),
		"paths":    paths,
		"components": map[string]any{
			"schemas":         s.components,
			"responses":       errorResponses(errRef, info.Examples),
			"parameters":      map[string]any{"pretty": prettyParam},
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "A project's token (sc_…) or the operator's admin token."}},
		},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

var prettyParam = map[string]any{"name": "pretty", "in": "query", "description": "Indent the JSON answer (1 or true) or not (0 or false); the default indents for terminals and browsers, not for programs.", "schema": map[string]any{"type": "string"}}

func tagList(tags [][2]string) []any {
	out := make([]any, 0, len(tags))
	for _, t := range tags {
		out = append(out, map[string]any{"name": t[0], "description": t[1]})
	}
	return out
}

func errorResponses(errRef map[string]any, examples map[string]any) map[string]any {
	out := map[string]any{}
	for status, name := range errorNames {
		media := withExample(map[string]any{"schema": errRef}, examples, "error "+strconv.Itoa(status))
		r := map[string]any{"description": http.StatusText(status), "content": map[string]any{JSON: media}}
		switch status {
		case 429, 503:
			r["headers"] = map[string]any{"Retry-After": map[string]any{"description": "Seconds to wait before trying again.", "schema": map[string]any{"type": "integer"}}}
		}
		out[name] = r
	}
	return out
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// operation is one operation object.
func (s *schemas) operation(op Op, info Info) (map[string]any, error) {
	if op.ID == "" || op.Summary == "" || op.Tag == "" || op.Access == "" || len(op.Responses) == 0 {
		return nil, fmt.Errorf("openapi: %s needs an ID, a summary, a tag, an access and a response", op.Key())
	}
	o := map[string]any{"operationId": op.ID, "summary": op.Summary, "tags": []string{op.Tag}, "x-access": string(op.Access)}
	if op.Description != "" {
		o["description"] = op.Description
	}
	if op.Access == Public {
		o["security"] = []any{}
	}
	params, err := s.parameters(op, info)
	if err != nil {
		return nil, err
	}
	o["parameters"] = params
	if op.Request != nil {
		media := withExample(map[string]any{"schema": s.of(reflect.TypeOf(op.Request), true)}, info.Examples, op.ID+" request")
		o["requestBody"] = map[string]any{"required": !op.OptionalBody, "content": map[string]any{JSON: media}}
	}
	o["responses"] = s.responses(op, info.Examples)
	return o, nil
}

func (s *schemas) parameters(op Op, info Info) ([]any, error) {
	var out []any
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		d, ok := info.PathParams[m[1]]
		if !ok {
			return nil, fmt.Errorf("openapi: %s: path parameter {%s} is not described", op.Key(), m[1])
		}
		out = append(out, map[string]any{"name": m[1], "in": "path", "required": true, "description": d, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range op.Query {
		p := map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": paramSchema(q)}
		if q.Required {
			p["required"] = true
		}
		out = append(out, p)
	}
	return append(out, map[string]any{"$ref": "#/components/parameters/pretty"}), nil
}

func paramSchema(q Param) map[string]any {
	sch := map[string]any{"type": q.Type}
	switch q.Type {
	case "date-time", "date":
		sch = map[string]any{"type": "string", "format": q.Type}
	}
	if len(q.Enum) > 0 {
		sch["enum"] = q.Enum
	}
	return sch
}

func (s *schemas) responses(op Op, examples map[string]any) map[string]any {
	out := map[string]any{}
	for _, r := range op.Responses {
		key := strconv.Itoa(r.Status)
		resp, _ := out[key].(map[string]any)
		if resp == nil {
			resp = map[string]any{"description": r.Description}
			out[key] = resp
		}
		if content := s.content(r); content != nil {
			if mediaOf(r) == JSON {
				content = withExample(content, examples, op.ID+" "+key)
			}
			c, _ := resp["content"].(map[string]any)
			if c == nil {
				c = map[string]any{}
				resp["content"] = c
			}
			c[mediaOf(r)] = content
		}
	}
	for _, st := range errorStatuses(op) {
		out[strconv.Itoa(st)] = map[string]any{"$ref": "#/components/responses/" + errorNames[st]}
	}
	return out
}

func mediaOf(r Response) string {
	if r.Media == "" {
		return JSON
	}
	return r.Media
}

func (s *schemas) content(r Response) map[string]any {
	switch {
	case mediaOf(r) == CSV:
		return map[string]any{"schema": map[string]any{"type": "string"}, "x-csv-columns": r.Columns, "x-csv-more-columns": append([]string{}, r.MoreColumns...)}
	case mediaOf(r) == SSE:
		return map[string]any{"schema": map[string]any{"type": "string"}, "x-event-data": s.of(reflect.TypeOf(r.Event), false)}
	case r.Body != nil:
		return map[string]any{"schema": s.of(reflect.TypeOf(r.Body), false)}
	}
	return nil
}

// withExample sets media's example, if examples has one under key.
func withExample(media map[string]any, examples map[string]any, key string) map[string]any {
	if v, ok := examples[key]; ok {
		media["example"] = v
	}
	return media
}

// errorStatuses are the error answers an operation documents.
func errorStatuses(op Op) []int {
	st := slices.Clone(op.Errors)
	if op.Access != Public {
		st = append(st, 401, 429, 500, 503)
	}
	if op.Access == Admin {
		st = append(st, 403)
	}
	if op.Request != nil {
		st = append(st, 400, 413)
	}
	slices.Sort(st)
	return slices.Compact(st)
}
