package contracttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
)

// checkEvents holds each server-sent event's data to the schema the
// document gives it (x-event-data).
func (c *Contract) checkEvents(route *routers.Route, status int, body []byte) error {
	schema, err := c.eventSchema(route, status)
	if err != nil {
		return err
	}
	for i, data := range eventData(body) {
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return fmt.Errorf("%s: event %d's data is not JSON: %.200s", route.Operation.OperationID, i, data)
		}
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			return fmt.Errorf("%s: event %d out of contract: %w", route.Operation.OperationID, i, err)
		}
		c.mu.Lock()
		c.events++
		c.mu.Unlock()
	}
	return nil
}

// CheckEvent holds one event's data, read by a client of the stream, to
// the schema of operation id's events.
func (c *Contract) CheckEvent(id string, data []byte) error {
	for _, item := range c.Doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID != id {
				continue
			}
			route := &routers.Route{Operation: op}
			return c.checkEvents(route, 200, []byte("data: "+string(data)+"\n\n"))
		}
	}
	return fmt.Errorf("no operation %q", id)
}

func (c *Contract) eventSchema(route *routers.Route, status int) (*openapi3.Schema, error) {
	m := mediaOf(route, status, SSEMedia)
	if m == nil {
		return nil, fmt.Errorf("%s: no event stream documented for %d", route.Operation.OperationID, status)
	}
	ref, _ := m.Extensions["x-event-data"].(map[string]any)
	name, _ := ref["$ref"].(string)
	s := c.Doc.Components.Schemas[strings.TrimPrefix(name, "#/components/schemas/")]
	if s == nil || s.Value == nil {
		return nil, fmt.Errorf("%s: x-event-data names no schema (%v)", route.Operation.OperationID, ref)
	}
	return s.Value, nil
}

// eventData is the data of each event of a stream (its data lines
// joined), comments and other fields left out.
func eventData(body []byte) []string {
	var out []string
	var cur []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != nil {
				out = append(out, strings.Join(cur, "\n"))
			}
			cur = nil
		case strings.HasPrefix(line, "data:"):
			cur = append(cur, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return out
}
