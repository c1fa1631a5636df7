package domain

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestEventReasonsListsEveryReason: every EventReason constant declared in
// this package is in EventReasons, once, so a reason added later reaches
// webhook endpoints that ask for it by name (and the API's check of
// event types) without anyone remembering the list.
func TestEventReasonsListsEveryReason(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, f := range pkgs["domain"].Files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "EventReason" {
					for _, n := range vs.Names {
						declared = append(declared, n.Name)
					}
				}
			}
		}
	}
	if len(declared) < 16 {
		t.Fatalf("found only %d EventReason constants (%v): the parse is wrong", len(declared), declared)
	}
	values := map[string]EventReason{}
	for _, r := range EventReasons {
		if _, dup := values[string(r)]; dup {
			t.Errorf("EventReasons lists %s twice", r)
		}
		values[string(r)] = r
	}
	if len(EventReasons) != len(declared) {
		t.Errorf("EventReasons has %d reasons; the package declares %d: %v", len(EventReasons), len(declared), declared)
	}
	// Each declared name's value is listed: ReasonX = "X".
	for _, name := range declared {
		if _, ok := values[name[len("Reason"):]]; !ok {
			t.Errorf("%s is not in EventReasons", name)
		}
	}
	if !KnownReason(ReasonPreemptionNotified) || KnownReason("Preempted") {
		t.Error("KnownReason")
	}
	if !slices.Contains(EventReasons, ReasonJobRequeued) {
		t.Error("JobRequeued missing")
	}
}
