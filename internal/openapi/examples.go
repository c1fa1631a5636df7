package openapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Examples come from the API's page, so the document shows what the docs
// show and the document's validation holds the docs to the schemas:
//
//   - a JSON block right after <!-- example: OPERATION_ID STATUS --> is
//     that answer's example ("error STATUS": the shared error answer's);
//   - a curl command's -d '…' body is the example of the operation its
//     method and path are.
var (
	exampleMark = regexp.MustCompile("(?s)<!-- example: ([A-Za-z]+) ([0-9]+) -->\n```json\n(.*?)\n```")
	curlBody    = regexp.MustCompile(`(?s)curl [^\n]*?-X (POST|PUT|PATCH) [^\n]*?https?://[^/\s]+(/[^\s?']*)[^\n]*? -d '(.*?)'`)
)

// Examples reads a page's examples, keyed "operationId status" or
// "operationId request".
func Examples(page []byte, ops []Op) (map[string]any, error) {
	out := map[string]any{}
	for _, m := range exampleMark.FindAllSubmatch(page, -1) {
		var v any
		if err := json.Unmarshal(m[3], &v); err != nil {
			return nil, fmt.Errorf("the example of %s %s is not JSON: %w", m[1], m[2], err)
		}
		out[string(m[1])+" "+string(m[2])] = v
	}
	for _, m := range curlBody.FindAllSubmatch(page, -1) {
		op, ok := matchOp(ops, string(m[1]), string(m[2]))
		if !ok {
			return nil, fmt.Errorf("the page's curl %s %s is no operation of the document", m[1], m[2])
		}
		var v any
		if err := json.Unmarshal(m[3], &v); err != nil {
			return nil, fmt.Errorf("the body of the page's curl %s %s is not JSON: %w", m[1], m[2], err)
		}
		out[op.ID+" request"] = v
	}
	return out, nil
}

// matchOp is the operation whose method and path template match.
func matchOp(ops []Op, method, path string) (Op, bool) {
	for _, op := range ops {
		if op.Method != method {
			continue
		}
		tpl := strings.Split(op.Path, "/")
		got := strings.Split(path, "/")
		if len(tpl) != len(got) {
			continue
		}
		same := true
		for i := range tpl {
			if tpl[i] != got[i] && !strings.HasPrefix(tpl[i], "{") {
				same = false
			}
		}
		if same {
			return op, true
		}
	}
	return Op{}, false
}
