package contracttest

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Exchange is one request and its answer, bodies read.
type Exchange struct {
	Request  *http.Request
	Body     []byte
	Status   int
	Header   http.Header
	Response []byte
}

// Check reports how x breaks the contract; nil when it keeps it.
func (c *Contract) Check(x Exchange) error {
	route, params := c.route(x.Request)
	if route == nil {
		// A path no operation has is answered 404 or 405 in the error
		// shape; anything else is a route the document lacks.
		if x.Status == 404 || x.Status == 405 {
			return checkError(x)
		}
		return fmt.Errorf("%s %s answered %d, but the document has no such operation", x.Request.Method, x.Request.URL.Path, x.Status)
	}
	c.saw(route.Operation.OperationID)
	in := &openapi3filter.RequestValidationInput{Request: cloneWithBody(x.Request, x.Body), PathParams: params, Route: route, Options: filterOptions}
	if x.Status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("%s accepted a request the document does not allow: %w", route.Operation.OperationID, err)
		}
		if err := undeclaredQuery(route, x.Request); err != nil {
			return err
		}
	}
	media, _, _ := mime.ParseMediaType(x.Header.Get("Content-Type"))
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status, Header: x.Header, Options: filterOptions}
	out.SetBodyBytes(x.Response)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s answered %d out of contract: %w", route.Operation.OperationID, x.Status, err)
	}
	switch media {
	case CSVMedia:
		return checkCSV(route, x.Status, x.Response)
	case SSEMedia:
		return c.checkEvents(route, x.Status, x.Response)
	}
	return nil
}

func cloneWithBody(r *http.Request, body []byte) *http.Request {
	q := r.Clone(context.Background())
	q.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > 0 && q.Header.Get("Content-Type") == "" {
		// The server reads any body as JSON, as the document says.
		q.Header.Set("Content-Type", "application/json")
	}
	return q
}

// undeclaredQuery refuses a query parameter the operation does not name.
func undeclaredQuery(route *routers.Route, r *http.Request) error {
	known := map[string]bool{}
	for _, p := range route.Operation.Parameters {
		if p.Value != nil && p.Value.In == "query" {
			known[p.Value.Name] = true
		}
	}
	for name := range r.URL.Query() {
		if !known[name] {
			return fmt.Errorf("%s accepted query parameter %q, which the document does not name", route.Operation.OperationID, name)
		}
	}
	return nil
}

// checkError checks an answer is in the API's error shape.
func checkError(x Exchange) error {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(x.Response, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		return fmt.Errorf("%s %s answered %d without the error shape: %.200s", x.Request.Method, x.Request.URL.Path, x.Status, x.Response)
	}
	return nil
}

// mediaOf is the document's media object of a route's answer.
func mediaOf(route *routers.Route, status int, media string) *openapi3.MediaType {
	r := route.Operation.Responses.Status(status)
	if r == nil || r.Value == nil {
		return nil
	}
	return r.Value.Content.Get(media)
}

// checkCSV holds a CSV's header row to the documented columns, then the
// optional ones.
func checkCSV(route *routers.Route, status int, body []byte) error {
	m := mediaOf(route, status, CSVMedia)
	if m == nil {
		return fmt.Errorf("%s: no CSV documented for %d", route.Operation.OperationID, status)
	}
	cols, more := stringList(m.Extensions["x-csv-columns"]), stringList(m.Extensions["x-csv-more-columns"])
	head, err := csv.NewReader(bytes.NewReader(body)).Read()
	if err != nil {
		return fmt.Errorf("%s: CSV without a header row: %w", route.Operation.OperationID, err)
	}
	if len(head) < len(cols) || len(head) > len(cols)+len(more) || !slices.Equal(head, append(slices.Clip(cols), more...)[:len(head)]) {
		return fmt.Errorf("%s: CSV columns %v, documented %v then optionally %v", route.Operation.OperationID, head, cols, more)
	}
	return nil
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}
