package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// A pod's notice is its deletion with a grace period: the kubelet sends
// SIGTERM. It goes through the Eviction API, which sets the pod's
// DisruptionTarget condition (reason EvictionByEvictionAPI) and deletes
// it in one call, so a Job's podFailurePolicy, JobSet and Kueue count
// the pod as disrupted, not failed. Where the eviction is refused — a
// PodDisruptionBudget that allows no disruption now (budgets do not hold
// a reclaim: the machine goes back at the deadline whatever they say), an
// identity that may not evict, an admission policy — the pod is deleted
// directly, with the condition set first by a status patch that the
// notice waits for at most courtesyWait.
//
// Only the deletion is essential. The condition and the deadline
// annotation are courtesies: refused, failed or slow, they are reported
// (once per cluster, see refusal) and the pod gets its SIGTERM all the
// same.

// courtesyWait is the longest a pod's notice waits for a courtesy that
// goes before it (the DisruptionTarget condition of a direct deletion).
const courtesyWait = time.Second

// Notify gives the pod its notice so that it is gone by by (see above),
// reading the clock once it has its slot, just before each call; the UID
// precondition keeps a pod recreated under the same name safe. A zero or
// past by force-deletes it.
func (c *Cluster) Notify(ctx context.Context, clusterID, nodeName string, p driver.Work, by time.Time) error {
	return c.deletePod(ctx, clusterID, nodeName, p, by, func() time.Duration { return driver.GraceBy(p, by, c.opts.Clock.Now()) })
}

// deletePod gives the pod its notice (see above): by is its drain's
// deadline (zero: the force-deletion at or after it), grace is read just
// before each call.
func (c *Cluster) deletePod(ctx context.Context, clusterID, nodeName string, p driver.Work, by time.Time, grace func() time.Duration) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	if !by.IsZero() && p.ReadsDeadline && !c.disrupted(p) && c.may(permPatchPods) {
		// First, so a container reading its annotations (a Downward API
		// volume, which the kubelet refreshes) knows its deadline by the
		// time SIGTERM comes. A second deletion (to cut a grace period)
		// finds it there.
		if err := c.annotateDeadline(ctx, p, by); gone(err) {
			return nil
		} else if err != nil && !c.refusal(permPatchPods, nodeName, err) {
			c.opts.Log.Warn("cannot set the deadline annotation on a pod; it is deleted without", "cluster", clusterID,
				"namespace", p.Namespace, "pod", p.Name, "err", err)
		}
	}
	if c.may(permEvict) {
		err := c.evict(ctx, p, grace)
		switch {
		case err == nil:
			c.granted(permEvict)
			return nil
		case gone(err):
			return nil
		case !c.refusal(permEvict, nodeName, err) && !apierrors.IsTooManyRequests(err) && !apierrors.IsInternalError(err):
			// Not refused (429 is a budget, 500 several budgets): a
			// deletion would meet the same timeout or outage.
			return fmt.Errorf("evict: %w", err)
		}
	}
	return c.deleteDirectly(ctx, nodeName, p, by, grace)
}

// gone: the pod is gone, or replaced by another pod of that name (the
// UID precondition failed).
func gone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }

// evict asks the Eviction API to set the DisruptionTarget condition and
// delete the pod with its grace, in one call.
func (c *Cluster) evict(ctx context.Context, p driver.Work, grace func() time.Duration) error {
	ctx, done := c.call(ctx)
	defer done()
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, DeleteOptions: deleteOptions(p, grace())}
	// No retries: a budget's refusal asks for one in 10 s (Retry-After),
	// which client-go would wait out; the pod is deleted directly instead.
	return c.client.CoreV1().RESTClient().Post().Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("eviction").
		Body(ev).MaxRetries(0).Do(ctx).Error()
}

func deleteOptions(p driver.Work, grace time.Duration) *metav1.DeleteOptions {
	secs := int64(max(grace, 0) / time.Second)
	opts := &metav1.DeleteOptions{GracePeriodSeconds: &secs}
	if p.UID != "" {
		uid := types.UID(p.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return opts
}

// deleteDirectly deletes the pod, its DisruptionTarget condition first
// where it has none: the notice waits for the condition at most
// courtesyWait, and not at all once the cluster refused it.
func (c *Cluster) deleteDirectly(ctx context.Context, nodeName string, p driver.Work, by time.Time, grace func() time.Duration) error {
	if !c.disrupted(p) && c.may(permPodStatus) {
		msg := fmt.Sprintf("sparecap reclaims node %s: the pod must be gone by %s", nodeName, by.UTC().Format(time.RFC3339))
		if by.IsZero() {
			msg = fmt.Sprintf("sparecap took node %s back at its deadline; the pod is force-deleted", nodeName)
		}
		cond := make(chan error, 1)
		go func() { cond <- c.setDisruption(ctx, p, msg) }()
		select {
		case err := <-cond:
			switch {
			case err == nil:
				c.granted(permPodStatus)
			case gone(err):
				return nil
			case !c.refusal(permPodStatus, nodeName, err):
				c.opts.Log.Warn("cannot set the DisruptionTarget condition on a pod; it is deleted without", "cluster", c.id,
					"namespace", p.Namespace, "pod", p.Name, "err", err)
			}
		case <-c.opts.Clock.After(courtesyWait):
			c.opts.Log.Warn("the DisruptionTarget condition of a pod is slow to set; the pod is deleted now", "cluster", c.id,
				"namespace", p.Namespace, "pod", p.Name)
		}
	}
	ctx, done := c.call(ctx)
	defer done()
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, *deleteOptions(p, grace()))
	switch {
	case err == nil || gone(err):
		return nil
	case c.refusal(permDeletePods, nodeName, err):
		return fmt.Errorf("delete: %w", err)
	}
	return err
}

// disrupted: the pod watch shows the pod with a DisruptionTarget condition
// already (a second deletion, to cut a grace period).
func (c *Cluster) disrupted(p driver.Work) bool {
	obj, ok, err := c.pods.GetStore().GetByKey(p.Namespace + "/" + p.Name)
	if err != nil || !ok {
		return false
	}
	for _, cond := range obj.(*corev1.Pod).Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// deadlineReader stands, in a trimmed pod, for the volumes through which
// the pod reads its deadline annotation.
var deadlineReader = []corev1.Volume{{Name: "annotations", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
	Items: []corev1.DownwardAPIVolumeFile{{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}}}

// readsDeadline reports whether p mounts its annotations, all of them or
// the deadline's, through a Downward API volume (or a projected one): the
// kubelet refreshes such a file, so an annotation written now reaches the
// running container.
func readsDeadline(p *corev1.Pod) bool {
	reads := func(items []corev1.DownwardAPIVolumeFile) bool {
		for _, it := range items {
			if it.FieldRef != nil && (it.FieldRef.FieldPath == "metadata.annotations" ||
				it.FieldRef.FieldPath == "metadata.annotations['"+domain.AnnotationDeadline+"']") {
				return true
			}
		}
		return false
	}
	for _, v := range p.Spec.Volumes {
		if v.DownwardAPI != nil && reads(v.DownwardAPI.Items) {
			return true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.DownwardAPI != nil && reads(src.DownwardAPI.Items) {
					return true
				}
			}
		}
	}
	return false
}

// annotateDeadline puts the deadline on the pod (domain.AnnotationDeadline,
// RFC 3339), for the workload to read. The pod's UID in the patch makes it
// apply to this pod only.
func (c *Cluster) annotateDeadline(ctx context.Context, p driver.Work, by time.Time) error {
	meta := map[string]any{"annotations": map[string]string{domain.AnnotationDeadline: by.UTC().Format(time.RFC3339)}}
	if p.UID != "" {
		meta["uid"] = p.UID
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err == nil {
		c.granted(permPatchPods)
	}
	return err
}

// setDisruption patches the pod's status with the DisruptionTarget
// condition (a strategic merge patch merges conditions by type). The
// pod's UID in the patch makes it apply to this pod only.
func (c *Cluster) setDisruption(ctx context.Context, p driver.Work, msg string) error {
	cond := map[string]any{"type": corev1.DisruptionTarget, "status": corev1.ConditionTrue,
		"reason": domain.ReasonDisruption, "message": msg, "lastTransitionTime": metav1.NewTime(c.opts.Clock.Now())}
	patch := map[string]any{"status": map[string]any{"conditions": []any{cond}}}
	if p.UID != "" {
		patch["metadata"] = map[string]any{"uid": p.UID}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}
