package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sparecap/sparecap/internal/domain"
)

// The queue integrations (Kueue's admission check, ProvisioningRequests)
// read the cluster's pods from the driver's watch rather than a watch of
// their own: one watch of every pod per cluster is what a big cluster can
// afford. The trimmed cache keeps, besides what draining needs, a pod's
// GPU requests, the Kueue workload sparecap's admission check labelled it
// with, and the ProvisioningRequest it consumes.

// AnnotationConsumes is how a pod says which ProvisioningRequest's
// capacity it uses (in its namespace): Kueue's provisioning admission
// check sets it on the pods of the workloads it admits, as the cluster
// autoscaler expects.
const AnnotationConsumes = "autoscaling.x-k8s.io/consume-provisioning-request"

// PodUse is what the queue integrations read of a pod.
type PodUse struct {
	Namespace, Name string
	// Node is where it is bound ("" while it is not).
	Node string
	// GPUs is what it asks for (ResourceGPU requests).
	GPUs int64
	// Workload is the UID of the Kueue workload it runs for, from
	// domain.LabelKueueWorkload ("" for the others).
	Workload string
	// Consumes names the ProvisioningRequest it consumes, in its namespace
	// (AnnotationConsumes).
	Consumes string
	// Ended: it Succeeded or Failed; it uses nothing any more.
	Ended bool
}

const (
	byWorkload = "workload"
	byConsumes = "consumes"
)

// podIndexers index the pod cache for the queue integrations.
var podIndexers = map[string]func(obj any) ([]string, error){
	byWorkload: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[domain.LabelKueueWorkload] != "" {
			return []string{p.Labels[domain.LabelKueueWorkload]}, nil
		}
		return nil, nil
	},
	byConsumes: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Annotations[AnnotationConsumes] != "" {
			return []string{p.Namespace + "/" + p.Annotations[AnnotationConsumes]}, nil
		}
		return nil, nil
	},
}

// PodGPUs is what a pod asks of ResourceGPU: its containers' requests
// (or limits, which an extended resource's request defaults to), or its
// largest init container's if that is more, as the scheduler counts.
func PodGPUs(spec *corev1.PodSpec) int64 {
	of := func(c corev1.Container) int64 {
		if q, ok := c.Resources.Requests[ResourceGPU]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Limits[ResourceGPU]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for _, c := range spec.Containers {
		sum += of(c)
	}
	for _, c := range spec.InitContainers {
		initMax = max(initMax, of(c))
	}
	return max(sum, initMax)
}

// trimQueue copies into the trimmed pod t what the queue integrations
// read of p: its GPUs (as one container's request), its workload label
// and the request it consumes.
func trimQueue(t, p *corev1.Pod) {
	if g := PodGPUs(&p.Spec); g > 0 {
		t.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(g, resource.DecimalSI)}}}}
	}
	if v := p.Labels[domain.LabelKueueWorkload]; v != "" {
		t.Labels = map[string]string{domain.LabelKueueWorkload: v}
	}
	if v := p.Annotations[AnnotationConsumes]; v != "" {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[AnnotationConsumes] = v
	}
}

func podUse(p *corev1.Pod) PodUse {
	return PodUse{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, GPUs: PodGPUs(&p.Spec),
		Workload: p.Labels[domain.LabelKueueWorkload], Consumes: p.Annotations[AnnotationConsumes], Ended: exited(p)}
}

// PodsSynced reports whether the pod watch has synced: before that, the
// Pods* reads below see only part of the cluster.
func (c *Cluster) PodsSynced() bool { return c.pods.HasSynced() }

// PodsOnNode lists the pods bound to a node, from the watch.
func (c *Cluster) PodsOnNode(node string) ([]PodUse, error) { return c.podsBy(byNode, node) }

// PodsOfWorkload lists the pods labelled as running for the Kueue
// workload of that UID, from the watch.
func (c *Cluster) PodsOfWorkload(uid string) ([]PodUse, error) { return c.podsBy(byWorkload, uid) }

// PodsConsuming lists the pods that consume the ProvisioningRequest
// namespace/name, from the watch.
func (c *Cluster) PodsConsuming(namespace, name string) ([]PodUse, error) {
	return c.podsBy(byConsumes, namespace+"/"+name)
}

func (c *Cluster) podsBy(index, key string) ([]PodUse, error) {
	if !c.pods.HasSynced() {
		return nil, fmt.Errorf("the pod watch of cluster %s has not synced", c.id)
	}
	objs, err := c.pods.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil, err
	}
	out := make([]PodUse, len(objs))
	for i, o := range objs {
		out[i] = podUse(o.(*corev1.Pod))
	}
	return out, nil
}
