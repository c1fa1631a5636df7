package openapi

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// field is one JSON member of a struct, as encoding/json writes it.
type field struct {
	name      string
	goName    string
	owner     reflect.Type
	t         reflect.Type
	omitEmpty bool
	asString  bool
	// required, on a request's field, says the server refuses a body
	// without it (the tag api:"required").
	required bool
}

// fields lists t's JSON members, embedded structs flattened.
func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := "," + opts + ","
		out = append(out, field{name: name, goName: f.Name, owner: t, t: ft, required: f.Tag.Get("api") == "required",
			omitEmpty: strings.Contains(o, ",omitempty,") || strings.Contains(o, ",omitzero,"), asString: strings.Contains(o, ",string,")})
	}
	return out
}

// object is the schema of struct type t (component name, "" if inline).
func (s *schemas) object(t reflect.Type, name string, request bool) map[string]any {
	props := map[string]any{}
	var required []string
	fs := fields(t)
	for _, f := range fs {
		p := s.of(f.t, request)
		if f.asString {
			p = map[string]any{"type": "string"}
		}
		if e, ok := s.enums[t.Name()+"."+f.name]; ok {
			p = enumSchema(p, e)
		}
		if !f.omitEmpty && nullable(f.t) {
			p = orNull(p)
		}
		if d := s.docs.field(f.owner, f.goName); d != "" {
			p = withDescription(p, jsonNames(d, fs))
		}
		props[f.name] = p
		// An answer always carries what it does not omit; a request
		// needs only what the server requires.
		if (!request && !f.omitEmpty) || (request && f.required) {
			required = append(required, f.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		slices.Sort(required)
		out["required"] = required
	}
	if d := s.docs.typ(t); d != "" && name != "" {
		out["description"] = jsonNames(d, fs)
	}
	return out
}

// nullable reports whether encoding/json may write null for a value of t:
// a nil pointer, slice, map or interface.
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Interface:
		return true
	case reflect.Slice:
		return t != rawType
	}
	return false
}

func orNull(p map[string]any) map[string]any {
	if len(p) == 0 {
		return p
	}
	if typ, ok := p["type"].(string); ok {
		q := clone(p)
		q["type"] = []string{typ, "null"}
		return q
	}
	return map[string]any{"anyOf": []any{p, map[string]any{"type": "null"}}}
}

func enumSchema(p map[string]any, e Enum) map[string]any {
	q := clone(p)
	if e.Open {
		q["x-extensible-enum"] = e.Values
		return q
	}
	q["enum"] = e.Values
	return q
}

// withDescription adds d to p; a $ref cannot carry siblings that change
// it, so the reference is wrapped.
func withDescription(p map[string]any, d string) map[string]any {
	if _, ok := p["$ref"]; ok {
		return map[string]any{"allOf": []any{p}, "description": d}
	}
	q := clone(p)
	q["description"] = d
	return q
}

func clone(p map[string]any) map[string]any {
	q := make(map[string]any, len(p)+1)
	for k, v := range p {
		q[k] = v
	}
	return q
}

var word = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`)

// jsonNames writes a Go comment's field names as the JSON names clients
// see ("NumGPUs" -> "num_gpus").
func jsonNames(d string, fs []field) string {
	names := map[string]string{}
	for _, f := range fs {
		names[f.goName] = f.name
	}
	return word.ReplaceAllStringFunc(d, func(w string) string {
		if n, ok := names[w]; ok {
			return n
		}
		return w
	})
}
