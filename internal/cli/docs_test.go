package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/docs"
)

// commandSnippet is the sparecap command a docs page's snippet shows, with
// <cluster-id> as c1, and its arguments after "sparecap".
func commandSnippet(t *testing.T, page, snippet string) (string, []string) {
	t.Helper()
	text, err := docs.Snippet(page, snippet)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields(strings.ReplaceAll(strings.TrimSpace(text), "<cluster-id>", "c1"))
	if len(args) < 2 || args[0] != "sparecap" {
		t.Fatalf("the snippet is not a sparecap command: %q", text)
	}
	return text, args[1:]
}

// TestDocsEnableRequests runs the command docs/queues.md tells a tenant
// to run to let its queue's ProvisioningRequests raise the target: it
// sends the maximum and a floor of 0, and nothing else.
func TestDocsEnableRequests(t *testing.T) {
	text, args := commandSnippet(t, "queues.md", "enable-requests")
	f := newFakeAPI(t)
	f.handle("PATCH /v1/clusters/{id}", 200, cluster("Ready", 0))
	if r := f.run(args...); r.err != nil {
		t.Fatalf("%s: %v\n%s", text, r.err, r.stderr)
	}
	reqs := f.only("PATCH", "/v1/clusters/c1")
	want := map[string]any{"num_preemptible_gpus": 0.0, "max_preemptible_gpus": 64.0}
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Body, want) {
		t.Fatalf("requests %+v, want one PATCH with %v", reqs, want)
	}
}
