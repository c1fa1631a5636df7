package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sparecap/sparecap/internal/driver"
)

// ListWork lists the node's pods that have not exited, from the watch's
// cache (no API call once it has synced). Mirror pods are left out: they
// are the kubelet's static pods, which go with the node.
func (c *Cluster) ListWork(ctx context.Context, clusterID, nodeName string) ([]driver.Work, error) {
	if err := c.check(clusterID); err != nil {
		return nil, err
	}
	// The controller lists the pods of draining nodes only (also after a
	// restart, when it does not cordon again).
	c.draining.Store(nodeName, struct{}{})
	if !c.pods.HasSynced() {
		ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout) // no API call: no slot
		defer cancel()
		if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced) {
			return nil, fmt.Errorf("list pods on %s: the pod watch of cluster %s has not synced", nodeName, c.id)
		}
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, nodeName)
	if err != nil {
		return nil, err
	}
	out := make([]driver.Work, 0, len(objs))
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if !runs(p) {
			continue
		}
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		w := driver.Work{
			Namespace: p.Namespace, Name: p.Name, UID: string(p.UID),
			Grace:         time.Duration(grace) * time.Second,
			Stopping:      p.DeletionTimestamp != nil,
			Support:       isDaemon(p),
			ReadsDeadline: readsDeadline(p),
		}
		if w.Stopping {
			w.KillAt = p.DeletionTimestamp.Time
		}
		out = append(out, w)
	}
	return out, nil
}

// runs says whether p is work the node runs: not exited, not a static
// pod's mirror (the kubelet's own, never evicted).
func runs(p *corev1.Pod) bool {
	_, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	return !exited(p) && !mirror
}
