package kueuetest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/testworld"
)

// env is the mini cluster with Kueue the package's tests share, one at a
// time: each starts from a cluster with no nodes and none of the docs'
// objects (reset).
var env *kubeenv.Env

func TestMain(m *testing.M) {
	var err error
	// waitForPodsReady as Kueue's docs set it up (its default timeout, and
	// recoveryTimeout defaulting to it): the path a reclaimed workload
	// takes without sparecap's check (BenchmarkRequeueAtNotice).
	env, err = kubeenv.Start(kubeenv.Options{MiniCluster: true, Kueue: &kubeenv.KueueOptions{Frameworks: []string{"batch/job"},
		WaitForPodsReady: &kubeenv.KueueWaitForPodsReady{Timeout: 5 * time.Minute}}})
	if err != nil {
		// Fail loudly: these tests never skip.
		fmt.Fprintln(os.Stderr, "cannot start the mini cluster with Kueue:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

const ns = "team-ml" // the docs' namespace

// cluster is an attached cluster of a test's world.
type cluster = testworld.Cluster

// newWorld resets the mini cluster and builds a world with machines
// 8-GPU machines (testworld.New); w.Start runs it.
func newWorld(t testing.TB, machines int, attached map[string]cluster) *testworld.World {
	t.Helper()
	reset(t)
	env.LogOnFailure(t)
	return testworld.New(t, machines, attached)
}

// miniCluster is the package's mini cluster, attached.
func miniCluster() cluster { return testworld.MiniCluster(env) }

// apply applies a snippet of docs/queues.md to the mini cluster.
func apply(t testing.TB, snippet string) {
	t.Helper()
	text, err := docs.Snippet("queues.md", snippet)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(t.Context(), []byte(text)); err != nil {
		t.Fatalf("apply docs/queues.md's %s: %v", snippet, err)
	}
}

// The Kueue and autoscaler resources the tests read and reset.
var (
	kueue = func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}
	}
	workloadsGVR    = kueue("workloads")
	provisioningGVR = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1", Resource: "provisioningrequests"}
)

// reset empties the mini cluster of what a test left: Jobs and their
// pods, the docs' Kueue objects, ProvisioningRequests, pod templates, and
// every Node.
func reset(t testing.TB) {
	t.Helper()
	testworld.Reset(t, env, ns, testworld.Resource{GVR: provisioningGVR, Namespaced: true},
		testworld.Resource{GVR: workloadsGVR, Namespaced: true}, testworld.Resource{GVR: kueue("localqueues"), Namespaced: true},
		testworld.Resource{GVR: kueue("clusterqueues")}, testworld.Resource{GVR: kueue("admissionchecks")},
		testworld.Resource{GVR: kueue("provisioningrequestconfigs")}, testworld.Resource{GVR: kueue("resourceflavors")})
}
