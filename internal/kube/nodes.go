package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Taint on a Node (the operator's --node-taint and --preemptible-taint).
type Taint struct {
	Key    string
	Value  string
	Effect string // NoSchedule, PreferNoSchedule, NoExecute
}

// AddNode adopts the node once its kubelet (or the register provider)
// has registered it: sparecap never creates the Node itself, so the
// kubelet's own registration (its --node-labels, --register-with-taints,
// --provider-id) is kept. It patches in sparecap's labels and the
// configured taints and returns nil once the node is Ready; until the
// Node exists, or while it is not Ready, an error wrapping
// driver.ErrNotReady.
func (c *Cluster) AddNode(ctx context.Context, spec driver.NodeSpec) error {
	if err := c.check(spec.ClusterID); err != nil {
		return err
	}
	labels := maps.Clone(c.opts.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, spec.Labels)
	taints := append([]Taint(nil), c.opts.NodeTaints...)
	if spec.Class == domain.Preemptible {
		taints = append(taints, c.opts.PreemptibleTaints...)
	}
	var node *corev1.Node
	perm := permGetNodes
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ctx, cancel := c.call(ctx)
		defer cancel()
		perm = permGetNodes
		n, err := c.client.CoreV1().Nodes().Get(ctx, spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		meta := map[string]any{"resourceVersion": n.ResourceVersion}
		patch := map[string]any{"metadata": meta}
		add := missing(n.Labels, labels)
		if len(add) > 0 {
			meta["labels"] = add
		}
		want := slices.Clone(n.Spec.Taints)
		changed := false
		for _, t := range taints {
			want, changed = withTaint(want, t)
		}
		if changed {
			patch["spec"] = map[string]any{"taints": want}
		}
		if len(add) == 0 && !changed {
			node = n
			return nil
		}
		perm = permPatchNodes
		node, err = c.patch(ctx, spec.NodeName, patch)
		return err
	})
	if err != nil {
		c.refusal(perm, spec.NodeName, err)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s has not registered with the cluster yet: %w", spec.NodeName, driver.ErrNotReady)
	}
	if err != nil {
		return fmt.Errorf("adopt node %s: %w", spec.NodeName, err)
	}
	if !Ready(node) {
		return fmt.Errorf("node %s: %w", spec.NodeName, driver.ErrNotReady)
	}
	return nil
}

// missing returns the entries of want that have does not have (or has
// with another value).
func missing(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if have[k] != v {
			out[k] = v
		}
	}
	return out
}

// patch applies a JSON merge patch to the Node. A patch carrying
// metadata.resourceVersion is refused with a Conflict when the Node
// changed since it was read: the caller reads again and retries, so a
// list it replaces (taints) never loses someone else's change.
func (c *Cluster) patch(ctx context.Context, name string, patch map[string]any) (*corev1.Node, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
}

// Ready reports the node's Ready condition.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func kubeTaint(t Taint) corev1.Taint {
	return corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
}

// withTaint returns taints with t added, or the taint with t's key and
// effect (the same taint to Kubernetes) given t's value; it reports
// whether anything changed.
func withTaint(taints []corev1.Taint, t Taint) ([]corev1.Taint, bool) {
	kt := kubeTaint(t)
	for i, have := range taints {
		if have.Key == kt.Key && have.Effect == kt.Effect {
			if have.Value == kt.Value {
				return taints, false
			}
			taints = slices.Clone(taints)
			taints[i].Value = kt.Value
			return taints, true
		}
	}
	return append(slices.Clone(taints), kt), true
}

// MarkDraining cordons the node, taints it domain.TaintPreempted=<cause>
// (NoSchedule) and annotates its deadline, in one patch. The node watch's
// copy is checked first: on a node already marked it makes no call, so the
// controller can check the marks on every pass and put them back when the
// tenant removed them.
func (c *Cluster) MarkDraining(ctx context.Context, clusterID, nodeName string, m driver.Marks) error {
	c.draining.Store(nodeName, struct{}{})
	t := Taint{Key: domain.TaintPreempted, Value: string(m.Cause), Effect: "NoSchedule"}
	return c.mark(ctx, clusterID, nodeName, t, map[string]string{domain.AnnotationDeadline: m.Deadline.UTC().Format(time.RFC3339)})
}

// mark cordons, taints and annotates the node (see patchNode).
func (c *Cluster) mark(ctx context.Context, clusterID, nodeName string, t Taint, annotations map[string]string) error {
	return c.patchNode(ctx, clusterID, nodeName, "mark", func(n *corev1.Node) map[string]any {
		meta := map[string]any{}
		spec := map[string]any{}
		if !n.Spec.Unschedulable {
			spec["unschedulable"] = true
		}
		if taints, changed := withTaint(n.Spec.Taints, t); changed {
			spec["taints"] = taints
		}
		if add := missing(n.Annotations, annotations); len(add) > 0 {
			meta["annotations"] = add
		}
		if len(spec) == 0 && len(meta) == 0 {
			return nil
		}
		meta["resourceVersion"] = n.ResourceVersion
		return map[string]any{"metadata": meta, "spec": spec}
	})
}

// SetClass patches the node's class label (and the operator's labels) to
// spec's and its preemptible taints (--preemptible-taint) on or off by
// spec.Class, in one patch (see patchNode). Its pods are not touched.
func (c *Cluster) SetClass(ctx context.Context, spec driver.NodeSpec) error {
	labels := maps.Clone(c.opts.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, spec.Labels)
	return c.patchNode(ctx, spec.ClusterID, spec.NodeName, "set the class of", func(n *corev1.Node) map[string]any {
		meta := map[string]any{}
		patch := map[string]any{"metadata": meta}
		if add := missing(n.Labels, labels); len(add) > 0 {
			meta["labels"] = add
		}
		taints, changed := n.Spec.Taints, false
		for _, t := range c.opts.PreemptibleTaints {
			var ch bool
			if spec.Class == domain.Preemptible {
				taints, ch = withTaint(taints, t)
			} else {
				taints, ch = withoutTaint(taints, t)
			}
			changed = changed || ch
		}
		if changed {
			patch["spec"] = map[string]any{"taints": taints}
		}
		if len(meta) == 0 && !changed {
			return nil
		}
		meta["resourceVersion"] = n.ResourceVersion
		return patch
	})
}

// withoutTaint returns taints without t (by key and effect, as Kubernetes
// tells taints apart) and whether it was there.
func withoutTaint(taints []corev1.Taint, t Taint) ([]corev1.Taint, bool) {
	kt := kubeTaint(t)
	out := slices.DeleteFunc(slices.Clone(taints), func(have corev1.Taint) bool {
		return have.Key == kt.Key && have.Effect == kt.Effect
	})
	return out, len(out) != len(taints)
}

// patchNode applies the patch patchFor makes of the node, if any: one that
// replaces a list (taints) carries the resourceVersion it was made from,
// so a concurrent change is not lost (the patch is retried on the new
// Node). The node watch's copy is checked first: a node that needs no
// patch costs no call.
func (c *Cluster) patchNode(ctx context.Context, clusterID, nodeName, what string, patchFor func(*corev1.Node) map[string]any) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	cached := c.cachedNode(nodeName)
	if cached != nil && patchFor(cached) == nil {
		return nil
	}
	if !c.may(permPatchNodes) {
		return refused(permPatchNodes)
	}
	ctx, done := c.call(ctx)
	defer done()
	perm := permPatchNodes
	// The watch's copy is usually current: patch from it, and read the
	// Node only when it was not (a conflict) or is not there.
	read := cached == nil
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n := cached
		if read {
			perm = permGetNodes
			var err error
			if n, err = c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		read = true
		p := patchFor(n)
		if p == nil {
			return nil
		}
		perm = permPatchNodes
		_, err := c.patch(ctx, nodeName, p)
		return err
	})
	if err == nil {
		c.granted(permPatchNodes)
	} else if c.refusal(perm, nodeName, err) {
		return fmt.Errorf("%s node %s: %w: %w", what, nodeName, driver.ErrRefused, err)
	}
	return notFound(err, what+" node "+nodeName)
}

// refused is the error of a call not made because the cluster refused
// its permission a moment ago (see may).
func refused(p Permission) error {
	return fmt.Errorf("%w: %s was refused less than %s ago", driver.ErrRefused, p, refusedFor)
}

// Health reports what the node watch says of the node. Before the watch
// has synced nothing can be told: a node missing from an empty cache is
// not a deleted node.
func (c *Cluster) Health(ctx context.Context, clusterID, nodeName string) (driver.NodeHealth, error) {
	if err := c.check(clusterID); err != nil {
		return driver.NodeHealth{}, err
	}
	if !c.nodes.HasSynced() {
		return driver.NodeHealth{}, fmt.Errorf("the node watch of cluster %s has not synced", c.id)
	}
	obj, ok, err := c.nodes.GetStore().GetByKey(nodeName)
	if err != nil {
		return driver.NodeHealth{}, err
	}
	if !ok {
		return driver.NodeHealth{Gone: true}, nil
	}
	n := obj.(*corev1.Node)
	h := driver.NodeHealth{Class: domain.ComputeClass(n.Labels[domain.LabelComputeClass]), NotReadySince: n.CreationTimestamp.Time}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			h.NotReadySince = time.Time{}
			if cond.Status != corev1.ConditionTrue {
				h.NotReadySince = cmp.Or(cond.LastTransitionTime.Time, n.CreationTimestamp.Time)
			}
			break
		}
	}
	return h, nil
}

// Release deletes the Node object.
func (c *Cluster) Release(ctx context.Context, clusterID, nodeName string) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	err := c.client.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		c.draining.Delete(nodeName)
		c.checkpoints.Delete(nodeName)
		return nil
	}
	c.refusal(permDeleteNodes, nodeName, err)
	return err
}

// Tolerations are what lets a pod onto nodes with taints: Equal for a
// taint with a value, Exists for one without.
func Tolerations(taints []Taint) []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(taints))
	for _, t := range taints {
		tol := corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
		if t.Value == "" {
			tol.Operator = corev1.TolerationOpExists
		}
		out = append(out, tol)
	}
	return out
}
