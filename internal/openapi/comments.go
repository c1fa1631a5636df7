package openapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// Comments reads the doc comments of the module's Go types, which become
// the document's descriptions. A zero Comments has none (the server,
// which has no sources, serves the committed document instead).
type Comments struct {
	root, module string
	pkgs         map[string]map[string]string // package path -> "Type" or "Type.Field" -> text
}

// NewComments reads comments from the module at root, named module.
func NewComments(root, module string) Comments {
	return Comments{root: root, module: module, pkgs: map[string]map[string]string{}}
}

func (c Comments) typ(t reflect.Type) string { return c.lookup(t, t.Name()) }

func (c Comments) field(t reflect.Type, name string) string {
	if t.Name() == "" {
		return ""
	}
	return c.lookup(t, t.Name()+"."+name)
}

func (c Comments) lookup(t reflect.Type, key string) string {
	if c.pkgs == nil || !strings.HasPrefix(t.PkgPath(), c.module) {
		return ""
	}
	docs, ok := c.pkgs[t.PkgPath()]
	if !ok {
		docs = parseDir(filepath.Join(c.root, strings.TrimPrefix(t.PkgPath(), c.module)))
		c.pkgs[t.PkgPath()] = docs
	}
	return docs[key]
}

// parseDir collects the doc comments of a directory's type declarations
// and their fields (tests left out).
func parseDir(dir string) map[string]string {
	out := map[string]string{}
	entries, _ := os.ReadDir(dir)
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				typeDocs(g, out)
			}
		}
	}
	return out
}

func typeDocs(g *ast.GenDecl, out map[string]string) {
	for _, spec := range g.Specs {
		ts := spec.(*ast.TypeSpec)
		doc := ts.Doc
		if doc == nil && len(g.Specs) == 1 {
			doc = g.Doc
		}
		out[ts.Name.Name] = text(doc)
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, f := range st.Fields.List {
			d := text(f.Doc)
			if d == "" {
				d = text(f.Comment)
			}
			for _, n := range f.Names {
				out[ts.Name.Name+"."+n.Name] = d
			}
		}
	}
}

// text is a comment as one paragraph.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}
