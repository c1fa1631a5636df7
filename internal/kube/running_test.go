package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestRunningOfANode: the pods that hold GPUs, as the watch keeps them,
// with their job, labels, start and reported progress; DaemonSets',
// GPU-less and ended pods left out; a hostile progress is bounded.
func TestRunningOfANode(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	pod := func(name string, gpus int64, labels, ann map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name), Labels: labels, Annotations: ann},
			Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: start}}}
		if gpus > 0 {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		tp, _ := trimPod(p)
		return tp.(*corev1.Pod)
	}
	daemon := pod("exporter", 1, nil, nil)
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "exporter", Controller: ptr(true)}}
	done := pod("done", 8, nil, nil)
	done.Status.Phase = corev1.PodSucceeded
	got := runningOf([]*corev1.Pod{
		pod("train-0", 4, map[string]string{"team": "vision", "batch.kubernetes.io/job-name": "train"}, map[string]string{domain.AnnotationProgress: "12"}),
		pod("serve", 2, nil, map[string]string{domain.AnnotationProgress: "99999999999999999999"}),
		pod("cpu", 0, nil, nil), daemon, done,
	})
	if len(got) != 2 {
		t.Fatalf("%+v", got)
	}
	if r := got[0]; r.Key != "uid-train-0" || r.Job != "job/ml/train" || r.GPUs != 4 || r.Labels["team"] != "vision" || !r.Start.Equal(start) || r.Progress != 12 {
		t.Errorf("train-0: %+v", r)
	}
	if r := got[1]; r.Job != "pod/ml/serve" || r.Progress != 0 {
		t.Errorf("serve (a progress that does not parse as a count): %+v", r)
	}
}
