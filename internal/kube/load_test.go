package kube

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestLoadOfANode: what a node runs, read from its pods as the watch
// keeps them (trimmed): idle with DaemonSets' pods only; the gang of a
// JobSet's, an indexed Job's or a Volcano PodGroup's pod, none for a
// plain Job's; the work lost from the last checkpoint, or the start; a
// tenant's minimum, do-not-disrupt and deletion cost; bounded names.
func TestLoadOfANode(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	pod := func(labels, ann map[string]string, gpus int64, started time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p", Labels: labels, Annotations: ann},
			Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-started)}}}
		if gpus > 0 {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		tp, _ := trimPod(p)
		return tp.(*corev1.Pod)
	}
	daemon := pod(nil, nil, 0, time.Hour)
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "exporter", Controller: ptr(true)}}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want domain.NodeLoad
	}{
		{"no pods", nil, domain.NodeLoad{Known: true, Idle: true}},
		{"a DaemonSet's", []*corev1.Pod{daemon}, domain.NodeLoad{Known: true, Idle: true}},
		{"a JobSet's, no checkpoint", []*corev1.Pod{pod(map[string]string{"jobset.sigs.k8s.io/jobset-name": "train"}, nil, 8, time.Hour)},
			domain.NodeLoad{Known: true, Gang: "jobset/ml/train", LostGPUSeconds: 8 * 3600, WorkGPUSeconds: 8 * 3600}},
		{"checkpointed a minute ago", []*corev1.Pod{pod(nil, map[string]string{domain.AnnotationLastCheckpoint: now.Add(-time.Minute).Format(time.RFC3339)}, 8, time.Hour)},
			domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 60, WorkGPUSeconds: 8 * 60, LastCheckpoint: now.Add(-time.Minute)}},
		{"a checkpoint in the future", []*corev1.Pod{pod(nil, map[string]string{domain.AnnotationLastCheckpoint: now.Add(time.Hour).Format(time.RFC3339)}, 8, time.Hour)},
			domain.NodeLoad{Known: true}},
		{"an indexed Job's", []*corev1.Pod{pod(map[string]string{"batch.kubernetes.io/job-name": "sweep"}, map[string]string{"batch.kubernetes.io/job-completion-index": "3"}, 0, time.Minute)},
			domain.NodeLoad{Known: true, Gang: "job/ml/sweep", LostGPUSeconds: 60, WorkGPUSeconds: 60}},
		{"a plain Job's", []*corev1.Pod{pod(map[string]string{"batch.kubernetes.io/job-name": "one"}, nil, 2, time.Minute)},
			domain.NodeLoad{Known: true, LostGPUSeconds: 120, WorkGPUSeconds: 120}},
		{"elastic, protected, with a deletion cost", []*corev1.Pod{pod(nil, map[string]string{"scheduling.k8s.io/group-name": "pg",
			domain.AnnotationGangMin: "2", "karpenter.sh/do-not-disrupt": "true", "controller.kubernetes.io/pod-deletion-cost": "500"}, 1, 0)},
			domain.NodeLoad{Known: true, Gang: "podgroup/ml/pg", GangMin: 2, Protected: true, LostGPUSeconds: 500}},
		{"a LeaderWorkerSet group of a long name", []*corev1.Pod{pod(map[string]string{"leaderworkerset.sigs.k8s.io/name": long[:63], "leaderworkerset.sigs.k8s.io/group-index": "1"}, nil, 8, 0)},
			domain.NodeLoad{Known: true, Gang: "lws/ml/" + long[:63] + "/1"}},
		{"a hostile annotation is not kept", []*corev1.Pod{pod(nil, map[string]string{"scheduling.k8s.io/group-name": long}, 8, 0)},
			domain.NodeLoad{Known: true}},
		{"the highest priority of its pods", []*corev1.Pod{withPriority(pod(nil, nil, 8, 0), 500), withPriority(pod(nil, nil, 8, 0), -10)},
			domain.NodeLoad{Known: true, Priority: 500}},
		{"two gangs: the larger names the node", []*corev1.Pod{
			pod(map[string]string{"ray.io/cluster": "small"}, nil, 2, 0), pod(map[string]string{"ray.io/cluster": "big"}, nil, 6, 0)},
			domain.NodeLoad{Known: true, Gang: "ray/ml/big"}},
	} {
		if got := loadOf(tc.pods, now, nil); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// withPriority gives p a priority as admission would, and trims it as the
// watch does.
func withPriority(p *corev1.Pod, v int32) *corev1.Pod {
	p.Spec.Priority = &v
	tp, _ := trimPod(p)
	return tp.(*corev1.Pod)
}

// TestReclaimDocNamesWhatLoadReads: docs/reclaim.md lists every label and
// annotation the driver reads to weigh a node and every gang name prefix,
// so what a tenant copies from it is what the driver reads.
func TestReclaimDocNamesWhatLoadReads(t *testing.T) {
	b, err := os.ReadFile("../../docs/reclaim.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := append([]string{labelJobName}, loadAnnotations...)
	for _, g := range gangLabels {
		want = append(want, g.label, "`"+g.kind+"/<namespace>/")
		if g.sub != "" {
			want = append(want, strings.TrimPrefix(g.sub, strings.SplitN(g.sub, "/", 2)[0]))
		}
	}
	for _, w := range want {
		if !strings.Contains(doc, w) {
			t.Errorf("docs/reclaim.md does not name %q", w)
		}
	}
}

// TestBudgetsProtect: a pod a disruption budget selects while it allows no
// disruption is protected work; the same budget with headroom, a budget
// of another namespace or selecting other pods, and a pod with more
// labels than the watch keeps are not. The watch's trimmed pod keeps the
// labels a budget selects by.
func TestBudgetsProtect(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	pod := func(ns string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: labels},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		tp, _ := trimPod(p)
		return tp.(*corev1.Pod)
	}
	budget := func(ns string, match map[string]string, allowed int32) *policyv1.PodDisruptionBudget {
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: match}}}
		b.Status.DisruptionsAllowed = allowed
		tb, _ := trimBudget(b)
		return tb.(*policyv1.PodDisruptionBudget)
	}
	many := map[string]string{"app": "db"}
	for i := range maxKeptLabels {
		many[strings.Repeat("k", i+1)] = "v"
	}
	db := map[string]string{"app": "db", "tier": "x"}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		budget *policyv1.PodDisruptionBudget
		want   bool
	}{
		{"no headroom", pod("ml", db), budget("ml", map[string]string{"app": "db"}, 0), true},
		{"headroom", pod("ml", db), budget("ml", map[string]string{"app": "db"}, 1), false},
		{"another namespace", pod("ml", db), budget("web", map[string]string{"app": "db"}, 0), false},
		{"other pods", pod("ml", db), budget("ml", map[string]string{"app": "web"}, 0), false},
		{"more labels than kept", pod("ml", many), budget("ml", map[string]string{"app": "db"}, 0), false},
	} {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		idx.Add(tc.budget)
		if got := loadOf([]*corev1.Pod{tc.pod}, now, blockedBy(idx)).Protected; got != tc.want {
			t.Errorf("%s: protected %v, want %v", tc.name, got, tc.want)
		}
	}
}
