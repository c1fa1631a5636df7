package openapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Enum is the values a string field takes. Open enumerations are the
// ones clients branch on that may grow (a reason, an event's kind): they
// are documented as x-extensible-enum, so a new value is not a break.
type Enum struct {
	Values []string
	Open   bool
}

// schemas turns Go types into JSON Schema (2020-12, as OpenAPI 3.1 uses),
// collecting named struct types as components.
type schemas struct {
	components map[string]map[string]any
	named      map[reflect.Type]string
	closed     map[string]bool
	docs       Comments
	enums      map[string]Enum
}

var (
	timeType    = reflect.TypeOf(time.Time{})
	durType     = reflect.TypeOf(time.Duration(0))
	rawType     = reflect.TypeOf(json.RawMessage{})
	marshaler   = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshal = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

func newSchemas(docs Comments, enums map[string]Enum) *schemas {
	return &schemas{components: map[string]map[string]any{}, named: map[reflect.Type]string{}, closed: map[string]bool{}, docs: docs, enums: enums}
}

// of is the schema of t; request marks a body the server reads, whose
// objects refuse unknown fields.
func (s *schemas) of(t reflect.Type, request bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == durType:
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	case t == rawType:
		return map[string]any{}
	case t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(textMarshal):
		return map[string]any{"type": "string"}
	case t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler):
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": s.of(t.Elem(), request)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.of(t.Elem(), request)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		return s.ref(t, request)
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

// ref names a struct type as a component (inline when anonymous).
func (s *schemas) ref(t reflect.Type, request bool) map[string]any {
	if t.Name() == "" {
		return s.object(t, "", request)
	}
	name, ok := s.named[t]
	if !ok {
		name = s.nameFor(t)
		s.named[t] = name
		s.components[name] = nil // placeholder: recursion stops here
		s.components[name] = s.object(t, name, request)
	}
	if request && !s.closed[name] {
		s.closed[name] = true
		s.components[name]["additionalProperties"] = false
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// nameFor is t's component name: its Go name, prefixed by its package's
// when another package's type has the same name.
func (s *schemas) nameFor(t reflect.Type) string {
	for other, n := range s.named {
		if n == t.Name() && other != t {
			pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
			return strings.ToUpper(pkg[:1]) + pkg[1:] + t.Name()
		}
	}
	return t.Name()
}
