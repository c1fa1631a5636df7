package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/domain"
)

// Announce puts when the node's notice will come (its machine is booked)
// on the Node and on each of its pods that runs, as the annotation
// domain.AnnotationPreemptAt (RFC 3339), where the workload reads it ahead
// (sparecap run, the SDKs); a zero at takes it away. What already carries
// the value, as the watches saw it, is not patched again, so calling it
// every pass costs only the pods that came since. A courtesy: errors are
// returned for the caller to report, and change nothing of the notice.
func (c *Cluster) Announce(ctx context.Context, clusterID, nodeName string, at time.Time) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	var value any // JSON null: the merge patch removes the annotation
	want := ""
	if !at.IsZero() {
		want = at.UTC().Format(time.RFC3339)
		value = want
	}
	var errs []error
	if n := c.cachedNode(nodeName); n == nil || n.Annotations[domain.AnnotationPreemptAt] != want {
		ctx, cancel := c.call(ctx)
		_, err := c.patch(ctx, nodeName, map[string]any{"metadata": map[string]any{"annotations": map[string]any{domain.AnnotationPreemptAt: value}}})
		cancel()
		if err != nil {
			c.refusal(permPatchNodes, nodeName, err)
			errs = append(errs, fmt.Errorf("annotate node %s: %w", nodeName, notFound(err, "node "+nodeName)))
		}
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, nodeName)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if exited(p) || p.Annotations[domain.AnnotationPreemptAt] == want {
			continue
		}
		if err := c.annotatePod(ctx, p, value); err != nil {
			errs = append(errs, fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// annotatePod sets (or, for a nil value, removes) the pod's
// AnnotationPreemptAt; the pod's UID in the patch makes it apply to this
// pod only.
func (c *Cluster) annotatePod(ctx context.Context, p *corev1.Pod, value any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": p.UID, "annotations": map[string]any{domain.AnnotationPreemptAt: value}}})
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		c.refusal(permPatchPods, p.Name, err)
		return err
	}
	c.granted(permPatchPods)
	return nil
}
