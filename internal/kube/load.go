package kube

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
)

// Load says, from the pod watch, what the node runs (loadOf). Unknown
// until the watch has synced.
func (c *Cluster) Load(clusterID, nodeName string) domain.NodeLoad {
	if c.check(clusterID) != nil || !c.pods.HasSynced() {
		return domain.NodeLoad{}
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, nodeName)
	if err != nil {
		return domain.NodeLoad{}
	}
	pods := make([]*corev1.Pod, len(objs))
	for i, o := range objs {
		pods[i] = o.(*corev1.Pod)
	}
	l := loadOf(pods, c.opts.Clock.Now(), c.blocked())
	// A draining node's pods that checkpointed on their way out are gone
	// from the watch, not from what they reported.
	if t, ok := c.checkpoints.Load(nodeName); ok && t.(time.Time).After(l.LastCheckpoint) && !t.(time.Time).After(c.opts.Clock.Now()) {
		l.LastCheckpoint = t.(time.Time)
	}
	return l
}

// loadOf is what a node running pods runs at now: idle when no pod but
// DaemonSets' runs, else the gang of its work (gangKey), the work that
// stopping it loses (GPUs times the time since each pod's last
// checkpoint, plus its deletion cost), whether its tenant protects it (a
// do-not-disrupt annotation, or a pod blocked says its disruption budget
// allows no disruption now; blocked may be nil), and the highest priority
// of its pods.
func loadOf(pods []*corev1.Pod, now time.Time, blocked func(*corev1.Pod) bool) domain.NodeLoad {
	l := domain.NodeLoad{Known: true, Idle: true}
	gangGPUs := int64(-1)
	for _, p := range pods {
		if !runs(p) || isDaemon(p) {
			continue
		}
		l.Idle = false
		gpus := min(max(PodGPUs(&p.Spec), 1), maxGPUs) // work with no GPU is still work
		work := gpus * sinceCheckpoint(p, now)
		l.WorkGPUSeconds += work
		l.LostGPUSeconds += work + deletionCost(p)
		l.Protected = l.Protected || p.Annotations[domain.AnnotationDoNotDisrupt] == "true" ||
			p.Annotations[annotationKarpenterDoNotDisrupt] == "true" || blocked != nil && blocked(p)
		// The node's gang is the one holding most of its GPUs (of those
		// holding as many, the first listed).
		if p.Spec.Priority != nil {
			l.Priority = max(l.Priority, int64(*p.Spec.Priority))
		}
		if t, err := time.Parse(time.RFC3339, p.Annotations[domain.AnnotationLastCheckpoint]); err == nil && t.After(l.LastCheckpoint) && !t.After(now) {
			l.LastCheckpoint = t
		}
		if key := gangKey(p); key != "" && gpus > gangGPUs {
			gangGPUs, l.Gang, l.GangMin = gpus, key, gangMin(p)
		}
	}
	return l
}

// gangLabels are the labels that make pods one gang: taking one of them
// stops all (JobSet, LeaderWorkerSet's group, Kubeflow training jobs,
// RayCluster, scheduler-plugins' PodGroup, Kueue's pod groups).
var gangLabels = []struct{ kind, label, sub string }{
	{"jobset", "jobset.sigs.k8s.io/jobset-name", ""},
	{"lws", "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index"},
	{"kubeflow", "training.kubeflow.org/job-name", ""},
	{"ray", "ray.io/cluster", ""},
	{"podgroup", "scheduling.x-k8s.io/pod-group", ""},
	{"kueue", "kueue.x-k8s.io/pod-group-name", ""},
}

// gangKey names the gang of pod p within its cluster, or "" if its work
// is its own. An indexed Job's pods are a gang; other Jobs' pods are
// independent workers.
func gangKey(p *corev1.Pod) string {
	for _, g := range gangLabels {
		if v := p.Labels[g.label]; v != "" {
			if g.sub != "" {
				v += "/" + p.Labels[g.sub]
			}
			return bound.Text(g.kind+"/"+p.Namespace+"/"+v, maxGangKey)
		}
	}
	if v := p.Annotations[annotationVolcanoGroup]; v != "" { // Volcano
		return bound.Text("podgroup/"+p.Namespace+"/"+v, maxGangKey)
	}
	if _, indexed := p.Annotations[annotationCompletionIndex]; indexed {
		if v := p.Labels[labelJobName]; v != "" {
			return bound.Text("job/"+p.Namespace+"/"+v, maxGangKey)
		}
	}
	return ""
}

// maxKeptLabels bounds the labels the pod watch keeps of a pod.
const maxKeptLabels = 32

// maxGangKey bounds a gang's name: it comes from a tenant's labels and is
// echoed in events and the API.
const maxGangKey = 200

// gangMin is the pod's sparecap.dev/gang-min, 0 when absent or not a
// positive number.
func gangMin(p *corev1.Pod) int {
	n, err := strconv.Atoi(p.Annotations[domain.AnnotationGangMin])
	if err != nil || n < 0 || n > 1<<20 {
		return 0
	}
	return n
}

// maxSince and maxGPUs bound one pod's lost work (a year of 1,024 GPUs):
// tenant input, summed over a node's pods.
const (
	maxSince = 365 * 24 * 3600
	maxGPUs  = 1024
)

// sinceCheckpoint is the seconds since the pod's work last saved a
// checkpoint (sparecap.dev/last-checkpoint), or since it started; 0 when
// neither is known or the time is ahead of now.
func sinceCheckpoint(p *corev1.Pod, now time.Time) int64 {
	at := time.Time{}
	if p.Status.StartTime != nil {
		at = p.Status.StartTime.Time
	}
	if t, err := time.Parse(time.RFC3339, p.Annotations[domain.AnnotationLastCheckpoint]); err == nil && t.After(at) {
		at = t
	}
	if at.IsZero() || !now.After(at) {
		return 0
	}
	return min(int64(now.Sub(at)/time.Second), maxSince)
}

// Annotations read from other projects' conventions.
const (
	annotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	annotationDeletionCost          = "controller.kubernetes.io/pod-deletion-cost"
	annotationVolcanoGroup          = "scheduling.k8s.io/group-name"
	annotationCompletionIndex       = "batch.kubernetes.io/job-completion-index"
	labelJobName                    = "batch.kubernetes.io/job-name"
)

// loadAnnotations are the annotations loadOf reads, which the watch's
// trimmed pods keep (trimLoad).
var loadAnnotations = []string{domain.AnnotationLastCheckpoint, domain.AnnotationProgress, domain.AnnotationGangMin, domain.AnnotationDoNotDisrupt,
	annotationKarpenterDoNotDisrupt, annotationDeletionCost, annotationVolcanoGroup, annotationCompletionIndex}

// trimLoad keeps in t, the watch's trimmed copy of p, what loadOf reads
// of it: the labels of gangs, the annotations above (bounded: a tenant
// writes them) and when the pod started.
func trimLoad(t, p *corev1.Pod) {
	keep := func(m *map[string]string, k, v string) {
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = v
	}
	// Disruption budgets select pods by any label: a pod keeps them all,
	// up to maxKeptLabels (the API server bounds each); one with more
	// keeps those of gangs only, and no budget selects it here.
	if len(p.Labels) <= maxKeptLabels {
		for k, v := range p.Labels {
			keep(&t.Labels, k, v)
		}
	}
	for _, g := range gangLabels {
		for _, k := range []string{g.label, g.sub} {
			if v := p.Labels[k]; k != "" && v != "" {
				keep(&t.Labels, k, v)
			}
		}
	}
	if v := p.Labels[labelJobName]; v != "" {
		keep(&t.Labels, labelJobName, v)
	}
	for _, k := range loadAnnotations {
		if v, ok := p.Annotations[k]; ok && len(v) <= maxGangKey {
			keep(&t.Annotations, k, v)
		}
	}
	t.Status.StartTime = p.Status.StartTime
	t.Spec.Priority = p.Spec.Priority
}

// deletionCost is the pod's controller.kubernetes.io/pod-deletion-cost,
// counted as GPU-seconds of work; negative or unreadable counts 0.
func deletionCost(p *corev1.Pod) int64 {
	n, err := strconv.ParseInt(p.Annotations[annotationDeletionCost], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
