package kube

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// budgets watches the tenant's PodDisruptionBudgets, once the permission
// check found list and watch granted (a courtesy: without them reclaims
// do not see budgets, and nothing else changes). A pod whose budget
// allows no disruption now is work the tenant protects: its node goes
// last among those a reclaim could take (Load).
type budgets struct {
	informer atomic.Pointer[cache.SharedIndexInformer]
}

// startBudgets starts the watch of budgets (once).
func (c *Cluster) startBudgets() {
	f := informers.NewSharedInformerFactory(c.client, 0)
	inf := f.Policy().V1().PodDisruptionBudgets().Informer()
	// The factory's informers index by namespace already
	// (cache.NamespaceIndex), which blocked reads.
	if err := inf.SetTransform(trimBudget); err != nil {
		c.opts.Log.Warn("cannot watch PodDisruptionBudgets", "cluster", c.id, "err", err)
		return
	}
	if !c.budgets.informer.CompareAndSwap(nil, &inf) {
		return
	}
	go inf.Run(c.stop)
}

// trimBudget keeps what blocked reads of a budget.
func trimBudget(obj any) (any, error) {
	b, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return obj, nil
	}
	t := &policyv1.PodDisruptionBudget{}
	t.Name, t.Namespace, t.ResourceVersion = b.Name, b.Namespace, b.ResourceVersion
	t.Spec.Selector = b.Spec.Selector
	t.Status.DisruptionsAllowed = b.Status.DisruptionsAllowed
	return t, nil
}

// blocked reports whether a budget of p's namespace selects p and allows
// no disruption now; nil while budgets are not watched or not synced.
func (c *Cluster) blocked() func(*corev1.Pod) bool {
	ip := c.budgets.informer.Load()
	if ip == nil || !(*ip).HasSynced() {
		return nil
	}
	return blockedBy((*ip).GetIndexer())
}

// blockedBy is blocked over the budgets of idx, indexed by namespace.
func blockedBy(idx cache.Indexer) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		objs, err := idx.ByIndex(cache.NamespaceIndex, p.Namespace)
		if err != nil {
			return false
		}
		for _, o := range objs {
			b := o.(*policyv1.PodDisruptionBudget)
			if b.Status.DisruptionsAllowed > 0 || b.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
		return false
	}
}
