package recipetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

// submitGang creates docs/workloads.md's data-parallel JobSet (snippet
// jobset-ddp), its workers doing work of runFor and exiting a second
// after their SIGTERM, as kwok plays them.
func submitGang(t *testing.T, runFor string) string {
	t.Helper()
	checkpointVolume(t, "ddp-checkpoints")
	js := decodePageSnippet(t, "workloads.md", "jobset-ddp")
	for _, rj := range field(t, js.Object, "spec", "replicatedJobs").([]any) {
		annotate(t, field(t, rj.(map[string]any), "template", "spec", "template"), map[string]string{
			kubeenv.RunForAnnotation: runFor, kubeenv.ExitAfterAnnotation: "1s"})
	}
	return create(t, jobSetsGVR, js).GetName()
}

// checkpointVolume makes the claim the workers share their checkpoints
// on, bound to a volume of its own (the mini cluster has no provisioner;
// a real cluster's ReadWriteMany class would make it).
func checkpointVolume(t *testing.T, claim string) {
	t.Helper()
	ctx := t.Context()
	size := resource.MustParse("1Gi")
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/ckpt"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim}}}
	if _, err := env.Client().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty, VolumeName: pv.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}
	if _, err := env.Client().CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// checkRendezvous checks the workers find each other as the example
// reads it: ranks 0 and 1 from JobSet's job index, and MASTER_ADDR the
// DNS name (hostname.subdomain) of rank 0's pod; the notice reaches them
// through the Downward API file sparecap run reads.
func checkRendezvous(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	ranks := map[string]corev1.Pod{}
	for _, p := range pods {
		ranks[p.Annotations["jobset.sigs.k8s.io/job-index"]] = p
	}
	zero, ok0 := ranks["0"]
	_, ok1 := ranks["1"]
	if !ok0 || !ok1 {
		t.Fatalf("workers' job indexes %v, want ranks 0 and 1", keys(ranks))
	}
	c := zero.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if f := env["RANK"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.annotations['jobset.sigs.k8s.io/job-index']" {
		t.Errorf("RANK is %+v, want the job index", env["RANK"])
	}
	if got, want := env["MASTER_ADDR"].Value, zero.Spec.Hostname+"."+zero.Spec.Subdomain; got != want || zero.Spec.Hostname == "" {
		t.Errorf("MASTER_ADDR %q, but rank 0's pod is %q", got, want)
	}
	if env["WORLD_SIZE"].Value != "2" || !strings.Contains(strings.Join(c.Command, " "), "sparecap run") {
		t.Errorf("the worker runs %v with WORLD_SIZE %q", c.Command, env["WORLD_SIZE"].Value)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == "/etc/podinfo"
	}
	if !mounted {
		t.Errorf("the pod's annotations are not at /etc/podinfo, where sparecap run reads the notice: %+v", c.VolumeMounts)
	}
}

func keys(m map[string]corev1.Pod) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestJobSetGangRestartsTogether: docs/workloads.md's data-parallel JobSet
// runs its two workers, rank 0 and 1 with the rendezvous, on the tenant's
// preemptible nodes. A reclaim of one worker's node fails that worker's
// Job by its policy and restarts the set whole without spending
// maxRestarts; so does the exit 75 of the worker whose gang stopped for
// another's reclaim; and the set completes once the target is refilled.
func TestJobSetGangRestartsTogether(t *testing.T) {
	w := newWorld(t, 2)
	w.Start()
	w.Create("tenant", "p", 0, 16, 0)
	w.WaitReady("tenant", 2, 60*time.Second)
	h := record(t)

	name := submitGang(t, "20s")
	checkRendezvous(t, runningWorkers(t, w, name, 0, 2))

	// The reclaimed worker: its notice, its Job failed by the policy.
	reclaimWorker(t, w, h, name)

	// The target is refilled; then a worker exits 75, as the rank does
	// whose gang stopped for another's reclaim.
	zero := 0
	w.Update("other", controller.Change{NumGPUs: &zero})
	w.WaitReady("tenant", 2, 60*time.Second)
	p := runningWorkers(t, w, name, 1, 2)[0]
	exitWorker(t, p, 75)
	kubeenv.Eventually(t, 10*time.Second, func() error {
		j, ok := h.failedJob(jobOf(&p))
		if !ok {
			return fmt.Errorf("the Job of worker %s has not failed", p.Name)
		}
		if j.Cond.Reason != "PodFailurePolicy" {
			t.Fatalf("job %s failed with %s: %s, want PodFailurePolicy (exit 75 is the gang stopping)", j.Name, j.Cond.Reason, j.Cond.Message)
		}
		return nil
	})
	s := waitJobSet(t, name, 30*time.Second, "restarted twice", func(s jobSetState) bool { return s.restarts == 2 })
	if s.towardsMax != 0 {
		t.Fatalf("after the gang stopped: %s, want no restart counted toward maxRestarts", s)
	}
	checkRendezvous(t, runningWorkers(t, w, name, 2, 2))
	s = waitJobSet(t, name, 90*time.Second, "completed", func(s jobSetState) bool { return s.conditions["Completed"] != "" })
	t.Logf("completed after a reclaim and a gang stop: %s", s)
}
