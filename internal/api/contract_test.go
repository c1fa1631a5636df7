package api

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	spec "github.com/sparecap/sparecap/api"
	"github.com/sparecap/sparecap/internal/openapi"
)

var update = flag.Bool("update", false, "write api/openapi.json from the route list")

// built is the document the route list and the wire types' comments make.
func built(t *testing.T) []byte {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	info := Info()
	if info.Examples, err = openapi.Examples(page, Contract()); err != nil {
		t.Fatal(err)
	}
	doc, err := openapi.Build(info, Contract(), openapi.NewComments(root, "github.com/sparecap/sparecap"))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestTheDocumentIsTheRouteList fails when a route was added, removed or
// changed (its types included) without the committed document following:
// `make openapi` writes it.
func TestTheDocumentIsTheRouteList(t *testing.T) {
	doc := built(t)
	if *update {
		if err := os.WriteFile("../../api/openapi.json", doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, spec.Document) {
		t.Fatal("api/openapi.json is not what the route list makes: run `make openapi` and review the diff")
	}
}

// TestTheServerServesItsDocument: /v1/openapi.json, without a token, is
// the committed document.
func TestTheServerServesItsDocument(t *testing.T) {
	e := newEnv(t)
	got := e.do("", "GET", "/v1/openapi.json", "", 200, nil)
	if !bytes.Equal(got, spec.Document) {
		t.Fatal("/v1/openapi.json is not api/openapi.json")
	}
}

// TestEveryOperationIsRouted calls each operation of the document on a
// real server: none may fall through to the answer for paths no route
// takes (404 "no such endpoint" or 405), so the document names no route
// the server lacks.
func TestEveryOperationIsRouted(t *testing.T) {
	e := newEnv(t)
	for _, op := range Contract() {
		path := pathParam.ReplaceAllString(op.Path, "x")
		req, _ := http.NewRequest(op.Method, e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 405 || bytes.Contains(body, []byte("no such endpoint")) {
			t.Errorf("%s: the server has no such route: %d %s", op.Key(), resp.StatusCode, body)
		}
	}
}

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)
