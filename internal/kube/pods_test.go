package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestPodGPUs: a pod's GPUs are its containers' requests (or limits,
// which an extended resource's request defaults to), or its largest init
// container's when that is more, as the scheduler counts them.
func TestPodGPUs(t *testing.T) {
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, 0},
		{"requests", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: gpus(2)}}, {Resources: corev1.ResourceRequirements{Requests: gpus(3)}}}}, 5},
		{"limits only", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: gpus(8)}}}}, 8},
		{"init container larger", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: gpus(4)}}},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: gpus(1)}}}}, 4},
	} {
		if got := PodGPUs(&tc.spec); got != tc.want {
			t.Errorf("%s: %d GPUs, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTrimKeepsWhatQueuesRead: the trimmed pod of the driver's watch
// keeps the GPUs, the workload label and the consumed request, and the
// indexes find the pod by them.
func TestTrimKeepsWhatQueuesRead(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-0",
		Labels:      map[string]string{domain.LabelKueueWorkload: "uid-1", "app": "x"},
		Annotations: map[string]string{AnnotationConsumes: "req-1", "other": "y"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Image: "i",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("2")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	obj, err := trimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	tp := obj.(*corev1.Pod)
	got := podUse(tp)
	want := PodUse{Namespace: "ns", Name: "w-0", Node: "n1", GPUs: 4, Workload: "uid-1", Consumes: "req-1", Ended: true}
	if got != want {
		t.Fatalf("trimmed: %+v, want %+v", got, want)
	}
	// Labels are kept for disruption budgets' selectors; other
	// annotations and the containers' images are not.
	if tp.Labels["app"] != "x" || tp.Annotations["other"] != "" || tp.Spec.Containers[0].Image != "" {
		t.Fatalf("trimmed pod keeps what nothing reads, or lost its labels: %+v", tp)
	}
	for index, key := range map[string]string{byWorkload: "uid-1", byConsumes: "ns/req-1"} {
		keys, err := podIndexers[index](tp)
		if err != nil || len(keys) != 1 || keys[0] != key {
			t.Fatalf("index %s: %v, %v; want %s", index, keys, err, key)
		}
	}
}
