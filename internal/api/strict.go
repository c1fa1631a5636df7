package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// checkKeys walks the JSON document data (already known to be well
// formed) and refuses what encoding/json would quietly accept: a key that
// appears twice in one object (the last one would win), and a key that
// matches a field of t only when case is ignored ("NUM_GPUS" for
// "num_gpus"). Field names are matched exactly, as the API documents
// them. Objects that do not map to a struct (maps, raw JSON) are checked
// for duplicates only.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkValue(dec, t, "")
}

// walkValue reads one value from dec, checking it against t (nil: any).
// path names where the value sits, for the error ("" at the top).
func walkValue(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return invalid(path, "malformed JSON: %v", err)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, t, path)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, elem, path); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ]
		return err
	}
	return nil
}

func walkObject(dec *json.Decoder, t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct && t != rawMessage {
		fields = jsonFields(t)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return invalid(path, "malformed JSON: %v", err)
		}
		key, _ := tok.(string)
		name := key
		if path != "" {
			name = path + "." + key
		}
		if seen[key] {
			return invalid(name, "field %q appears more than once; send each field once", echo(name))
		}
		seen[key] = true
		var ft reflect.Type
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				for known := range fields {
					if strings.EqualFold(known, key) {
						return invalid(name, "unknown field %q; field names are case-sensitive: did you mean %q?", echo(name), known)
					}
				}
				return invalid(name, "unknown field %q", echo(name))
			}
		}
		if err := walkValue(dec, ft, name); err != nil {
			return err
		}
	}
	_, err := dec.Token() // }
	return err
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// fieldCache holds jsonFields' answers by type.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the JSON names of t's fields, as encoding/json names
// them (the tag's name, else the Go name; "-" skipped; embedded structs'
// fields promoted), with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					m[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
