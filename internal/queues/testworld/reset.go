package testworld

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

// Resource is a kind of object Reset deletes: namespaced ones in the
// test's namespace, the others all.
type Resource struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
}

// Reset empties env of what a test left, so the next starts from a
// cluster with no nodes: the namespace ns is there (created if missing);
// its Jobs, pods and pod templates, every object of kinds, and every Node
// are deleted; it waits until the objects of kinds and the namespace's
// Jobs and pods are gone (their owners' finalizers, Kueue's, hold some
// for a moment).
func Reset(t testing.TB, env *kubeenv.Env, ns string, kinds ...Resource) {
	t.Helper()
	ctx := context.Background()
	c, dyn := env.Client(), env.Dynamic()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bg := metav1.DeletePropagationBackground
	for _, k := range kinds {
		ri := dyn.Resource(k.GVR)
		var err error
		if k.Namespaced {
			err = ri.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
		} else {
			err = ri.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
		}
		if err != nil {
			t.Fatalf("delete %s: %v", k.GVR.Resource, err)
		}
	}
	if err := c.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().PodTemplates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	kubeenv.Eventually(t, 60*time.Second, func() error {
		// Pods whose owners were still there recreated them: again.
		if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return err
		}
		for _, k := range kinds {
			list, err := dyn.Resource(k.GVR).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d %s left", len(list.Items), k.GVR.Resource)
			}
		}
		jobs, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(jobs.Items)+len(pods.Items) > 0 {
			return fmt.Errorf("%d jobs and %d pods left", len(jobs.Items), len(pods.Items))
		}
		return nil
	})
}
