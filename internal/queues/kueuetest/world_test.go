package kueuetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	ctx := context.Background()
	c := env.Client()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bg := metav1.DeletePropagationBackground
	if err := c.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().PodTemplates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := env.Dynamic()
	for _, r := range []struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}{
		{provisioningGVR, true}, {workloadsGVR, true}, {kueue("localqueues"), true}, {kueue("clusterqueues"), false},
		{kueue("admissionchecks"), false}, {kueue("provisioningrequestconfigs"), false}, {kueue("resourceflavors"), false},
	} {
		ri := dyn.Resource(r.gvr)
		var err error
		if r.namespaced {
			err = ri.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		} else {
			err = ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil {
			t.Fatalf("delete %s: %v", r.gvr.Resource, err)
		}
	}
	if err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// Kueue's finalizers hold a queue while anything uses it.
	kubeenv.Eventually(t, 60*time.Second, func() error {
		for _, gvr := range []schema.GroupVersionResource{workloadsGVR, kueue("clusterqueues"), kueue("resourceflavors")} {
			list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d %s left", len(list.Items), gvr.Resource)
			}
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
}
