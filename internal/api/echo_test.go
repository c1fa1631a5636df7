package api

import (
	"fmt"
	"strings"
	"testing"
)

// TestErrorAnswersAreBounded: whatever a request holds (a 1 MB unknown
// key, number, name or type; quotes, "<" and control characters that
// escaping makes longer), its error answer is under 1 KB and echoes at
// most echoMax bytes of any one piece of it.
func TestErrorAnswersAreBounded(t *testing.T) {
	e := newEnv(t)
	const big = 1<<20 - 512
	create := func(field, raw string) string {
		fields := map[string]string{"cluster_name": `"c1"`, "region": `"us-central-2"`, "gpu_type": `"RTX_6000_PCI"`,
			"num_gpus": "8", "cluster_type": `"KUBERNETES"`, "billing_type": `"ON_DEMAND"`}
		fields[field] = raw
		var parts []string
		for k, v := range fields {
			parts = append(parts, fmt.Sprintf("%q:%s", k, v))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for _, tc := range []struct {
		name, body, field, msg string
	}{
		{"unknown key", `{"` + strings.Repeat("k", big) + `":1}`, "kkkk", "unknown field"},
		{"unknown key to escape", `{"` + strings.Repeat(`<\"\u0001\\`, big/16) + `":1}`, "<", "unknown field"},
		{"a key in another case", `{"` + strings.Repeat("K", big) + `":1,"Cluster_Name":"x"}`, "", "field"},
		{"a number", create("num_gpus", strings.Repeat("9", big)), "num_gpus", "num_gpus"},
		{"a name", create("cluster_name", `"`+strings.Repeat("<", big)+`"`), "cluster_name", "cluster_name"},
		{"a cluster type", create("cluster_type", `"`+strings.Repeat(`\"`, big/2)+`"`), "cluster_type", "cluster_type"},
		{"a billing type", create("billing_type", `"`+strings.Repeat(`\u0002`, big/6)+`"`), "billing_type", "billing_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := e.do("p", "POST", "/v1/clusters", tc.body, 400, nil)
			if len(body) >= 1024 {
				t.Fatalf("a %d-byte answer: %.300s…", len(body), body)
			}
			got := e.apiErr("p", "POST", "/v1/clusters", tc.body, 400)
			if len(got.Field) > echoMax || !strings.HasPrefix(got.Field, tc.field) {
				t.Errorf("field %q (%d bytes), want at most %d bytes starting %q", got.Field, len(got.Field), echoMax, tc.field)
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message %q does not say %q", got.Message, tc.msg)
			}
			if strings.ContainsAny(got.Message, "\x01\x02") {
				t.Errorf("message %q holds control characters", got.Message)
			}
		})
	}
	long := "/v1/" + strings.Repeat("<x", 4000)
	if body := e.do("p", "GET", long, "", 404, nil); len(body) >= 1024 {
		t.Errorf("a %d-byte answer to an unknown path", len(body))
	}
}
