package kube

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
)

// Running lists, from the pod watch, the pods on the node that hold GPUs
// (runningOf). Unknown until the watch has synced.
func (c *Cluster) Running(clusterID, nodeName string) ([]domain.Running, bool) {
	if c.check(clusterID) != nil || !c.pods.HasSynced() {
		return nil, false
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, nodeName)
	if err != nil {
		return nil, false
	}
	pods := make([]*corev1.Pod, len(objs))
	for i, o := range objs {
		pods[i] = o.(*corev1.Pod)
	}
	return runningOf(pods), true
}

// runningOf is the tenant's work among pods: those that have not ended,
// DaemonSets' aside, that request GPUs (a pod with none has no share of
// the node's GPU cost). Labels are those the watch keeps (all of a pod's
// up to maxKeptLabels, else its gangs'); the job is the pod's gang, its
// Job's name, or the pod itself.
func runningOf(pods []*corev1.Pod) []domain.Running {
	var out []domain.Running
	for _, p := range pods {
		gpus := PodGPUs(&p.Spec)
		if !runs(p) || isDaemon(p) || gpus <= 0 {
			continue
		}
		r := domain.Running{Key: string(p.UID), Namespace: p.Namespace, Name: p.Name, Job: jobOf(p),
			Labels: maps.Clone(p.Labels), GPUs: int(min(gpus, maxGPUs))}
		if p.Status.StartTime != nil {
			r.Start = p.Status.StartTime.Time
		}
		if n, err := strconv.ParseInt(p.Annotations[domain.AnnotationProgress], 10, 64); err == nil && n > 0 {
			r.Progress = min(n, domain.MaxProgress)
		}
		out = append(out, r)
	}
	return out
}

// jobOf names the run pod p belongs to, one across its Job's retries and
// its gang's restarts: its gang (gangKey), else its Job ("job/<ns>/<name>"),
// else the pod itself ("pod/<ns>/<name>").
func jobOf(p *corev1.Pod) string {
	if g := gangKey(p); g != "" {
		return g
	}
	if v := p.Labels[labelJobName]; v != "" {
		return bound.Text("job/"+p.Namespace+"/"+v, maxGangKey)
	}
	return bound.Text("pod/"+p.Namespace+"/"+p.Name, maxGangKey)
}
