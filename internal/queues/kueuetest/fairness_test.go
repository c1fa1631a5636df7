package kueuetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/provreq"
)

// TestRequestsShareSpareCapacityFairly: two tenants, each on its own API
// server, ask for more than the fleet has spare with four one-node
// requests each. The same weighted fair sharing as for hand-set targets
// gives each half: each tenant's two oldest requests are Provisioned, the
// others wait with the reason FairShare; when one tenant's requests are
// gone, the other gets the rest and its requests are Provisioned too.
func TestRequestsShareSpareCapacityFairly(t *testing.T) {
	other := kubeenv.StartT(t) // a plain API server: the register provider plays its kubelets
	crds, err := kubeenv.KueueManifestsDir()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(crds, "provisioningrequest", "crds", "autoscaling.x-k8s.io_provisioningrequests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Apply(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	// Two machines for the tenants' standard nodes; the spare ones come
	// once both queues have asked.
	w := newWorld(t, 2, map[string]cluster{"a": miniCluster(),
		"b": {Kubeconfig: other.Kubeconfig(), Client: other.Client()}})
	w.Start()
	w.Create("a", "p", 8, 0, 64)
	w.Create("b", "q", 8, 0, 64)

	// Four one-node requests each, a's a little older.
	requests := func(e *kubeenv.Env, tenant string) {
		t.Helper()
		docs := []string{fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns), `apiVersion: v1
kind: PodTemplate
metadata: {name: worker, namespace: ` + ns + `}
template:
  spec:
    containers:
    - name: main
      image: registry.example/worker:1
      resources: {limits: {nvidia.com/gpu: 8}}
`}
		for i := range 4 {
			docs = append(docs, fmt.Sprintf(`apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: %s-%d, namespace: %s}
spec:
  provisioningClassName: preemptible.sparecap.dev
  podSets: [{podTemplateRef: {name: worker}, count: 1}]
`, tenant, i, ns))
		}
		for _, d := range docs {
			// One at a time: their creation times order them.
			if err := e.Apply(t.Context(), []byte(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	requests(env, "a")
	requests(other, "b")

	waitTarget(t, w, "a", 32, 20*time.Second)
	waitTarget(t, w, "b", 32, 20*time.Second)
	// 4 spare machines, equal weights: 2 nodes each.
	w.AddMachines(4)
	provisioned := func(dyn dynamic.Interface, tenant string, want int) {
		t.Helper()
		kubeenv.Eventually(t, 60*time.Second, func() error {
			var got, waiting []string
			for i := range 4 {
				name := fmt.Sprintf("%s-%d", tenant, i)
				r, err := request(t.Context(), dyn, name)
				if err != nil {
					return err
				}
				for _, c := range r.Status.Conditions {
					if c.Type == provreq.CondProvisioned && c.Status == metav1.ConditionTrue {
						got = append(got, name)
					}
					if c.Type == provreq.CondProvisioned && c.Status == metav1.ConditionFalse && c.Reason == "FairShare" {
						waiting = append(waiting, name)
					}
				}
			}
			if len(got) != want || len(waiting) != 4-want {
				return fmt.Errorf("%s: provisioned %v, waiting for a fair share %v; want %d provisioned", tenant, got, waiting, want)
			}
			for i := range want {
				if got[i] != fmt.Sprintf("%s-%d", tenant, i) {
					return fmt.Errorf("%s: provisioned %v, want the oldest first", tenant, got)
				}
			}
			return nil
		})
	}
	provisioned(env.Dynamic(), "a", 2)
	provisioned(other.Dynamic(), "b", 2)
	if a, b := len(w.Nodes("a", "preemptible", "ready")), len(w.Nodes("b", "preemptible", "ready")); a != 2 || b != 2 {
		t.Fatalf("a holds %d preemptible nodes and b %d, want 2 each", a, b)
	}

	// b's queue empties: a gets all four.
	if err := other.Dynamic().Resource(provisioningGVR).Namespace(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTarget(t, w, "b", 0, 20*time.Second)
	provisioned(env.Dynamic(), "a", 4)
}
