// Package contracttest checks HTTP exchanges against the API's OpenAPI
// document, for the tests of the server, the clients, the console and
// the end-to-end suite: every answer must be one the document describes
// (its status, media type and body), and every request the server
// accepted must be one the document allows, with no query parameter it
// does not name. Streams are checked event by event, CSV by its header.
package contracttest

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	spec "github.com/sparecap/sparecap/api"
)

// Contract is the loaded document and what was checked against it.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router

	mu     sync.Mutex
	seen   map[string]int // operation ID -> exchanges checked
	events int            // stream events checked
}

var (
	once   sync.Once
	shared *Contract
	errDoc error
)

// Load is the document of api/openapi.json, loaded once per process.
func Load() (*Contract, error) {
	once.Do(func() { shared, errDoc = load(spec.Document) })
	return shared, errDoc
}

func load(data []byte) (*Contract, error) {
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	// Tests serve on any address: match paths only.
	doc.Servers = nil
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Contract{Doc: doc, router: r, seen: map[string]int{}}, nil
}

// Seen is how many exchanges of each operation were checked.
func (c *Contract) Seen() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

// Events is how many events of streams were checked.
func (c *Contract) Events() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

func (c *Contract) saw(id string) {
	c.mu.Lock()
	c.seen[id]++
	c.mu.Unlock()
}

var filterOptions = &openapi3filter.Options{
	IncludeResponseStatus: true,
	AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
}

func init() {
	openapi3filter.RegisterBodyDecoder(CSVMedia, openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder(SSEMedia, openapi3filter.PlainBodyDecoder)
}

// Media types checked here rather than by the filter.
const (
	CSVMedia = "text/csv"
	SSEMedia = "text/event-stream"
)

// route finds the operation of req; nil when the document has none.
func (c *Contract) route(req *http.Request) (*routers.Route, map[string]string) {
	r, params, err := c.router.FindRoute(req)
	if err != nil {
		return nil, nil
	}
	return r, params
}
