package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

const check = "sparecap"

// fakePods is the pods of a cluster, by node and workload.
type fakePods []kube.PodUse

func (f fakePods) PodsOnNode(node string) ([]kube.PodUse, error) {
	var out []kube.PodUse
	for _, p := range f {
		if p.Node == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f fakePods) PodsOfWorkload(uid string) ([]kube.PodUse, error) {
	var out []kube.PodUse
	for _, p := range f {
		if p.Workload == uid {
			out = append(out, p)
		}
	}
	return out, nil
}

func view(nodes ...domain.Node) queues.View {
	return queues.View{Cluster: domain.Cluster{ID: "c1", DesiredPreemptibleGPUs: 16}, Nodes: nodes, GPUsPerNode: 8}
}

func node(name string, state domain.NodeState) domain.Node {
	n := domain.Node{Name: name, Class: domain.Preemptible, State: state, GPUs: 8}
	if state == domain.NodeDraining {
		n.DrainCause, n.Deadline = domain.CausePreempted, t0.Add(5*time.Minute)
	}
	return n
}

func gpuTemplate(gpus int64) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{kube.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
}

// workload makes a workload whose quota Kueue reserved reservedAgo ago,
// with one pod set of count pods of gpus GPUs and the check in state.
func workload(name string, count int32, gpus int64, state string, reservedAgo time.Duration) *Workload {
	w := &Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: WorkloadSpec{PodSets: []PodSet{{Name: "main", Count: count, Template: gpuTemplate(gpus)}}}}
	at := metav1.NewTime(t0.Add(-reservedAgo))
	w.Status.Admission = &Admission{ClusterQueue: "cq", PodSetAssignments: []PodSetAssignment{{Name: "main", Flavors: map[string]string{"nvidia.com/gpu": "spot"}}}}
	w.Status.Conditions = []metav1.Condition{{Type: condQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: at}}
	w.Status.AdmissionChecks = []CheckState{{Name: check, State: state, LastTransitionTime: at}}
	if state == StateReady {
		w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: condAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: at})
	}
	return w
}

func decide(t *testing.T, in Input) map[string]CheckState {
	t.Helper()
	in.Now, in.Checks, in.RequeueAfter = t0, []string{check}, 1
	ups, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]CheckState{}
	for _, u := range ups {
		if _, dup := out[u.Name]; dup {
			t.Fatalf("two updates of %s", u.Name)
		}
		out[u.Name] = u.State
	}
	return out
}

func TestReadyWhenCapacityIsThere(t *testing.T) {
	got := decide(t, Input{
		Workloads: []*Workload{workload("a", 2, 8, StatePending, time.Minute)},
		View:      view(node("p1", domain.NodeReady), node("p2", domain.NodeReady)),
		Pods:      fakePods{},
		Tolerations: []corev1.Toleration{{Key: "sparecap.dev/preemptible", Operator: corev1.TolerationOpEqual, Value: "true",
			Effect: corev1.TaintEffectNoSchedule}},
	})
	st, ok := got["a"]
	if !ok || st.State != StateReady || !st.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("a: %+v, want Ready now", st)
	}
	if len(st.PodSetUpdates) != 1 {
		t.Fatalf("podSetUpdates %+v", st.PodSetUpdates)
	}
	u := st.PodSetUpdates[0]
	if u.Name != "main" || u.NodeSelector[domain.LabelComputeClass] != "preemptible" || u.Labels[domain.LabelKueueWorkload] != "uid-a" ||
		len(u.Tolerations) != 1 || u.Tolerations[0].Key != "sparecap.dev/preemptible" {
		t.Fatalf("podSetUpdate %+v: want pinned to preemptible nodes, tolerating their taint, labelled with the workload", u)
	}
}

func TestPendingWhileCapacityIsShort(t *testing.T) {
	v := view(node("p1", domain.NodeReady))
	v.Cluster.Unfulfilled, v.Cluster.UnfulfilledMessage = domain.UnfulfilledNoCapacity, "no spare H100 in us-east"
	w := workload("a", 2, 8, StatePending, time.Minute)
	got := decide(t, Input{Workloads: []*Workload{w}, View: v, Pods: fakePods{}})
	st := got["a"]
	if st.State != StatePending || !strings.Contains(st.Message, "2 pods need 16 GPUs; 8 GPUs are free on 1 ready preemptible nodes") ||
		!strings.Contains(st.Message, "NoSpareCapacity: no spare H100 in us-east") {
		t.Fatalf("a: %+v", st)
	}
	// The same answer again is not written again.
	w.Status.AdmissionChecks[0] = st
	if got := decide(t, Input{Workloads: []*Workload{w}, View: v, Pods: fakePods{}}); len(got) != 0 {
		t.Fatalf("unchanged state rewritten: %+v", got)
	}
}

// TestCapacityIsNotPromisedTwice: workloads already Ready hold what their
// pods not yet placed need; placed pods hold their node's GPUs; the
// oldest pending reservation is served first; pods of others count too.
func TestCapacityIsNotPromisedTwice(t *testing.T) {
	held := workload("held", 2, 8, StateReady, 10*time.Minute) // one pod placed on p1, one still to come
	older := workload("older", 1, 8, StatePending, 5*time.Minute)
	newer := workload("newer", 1, 8, StatePending, time.Minute)
	pods := fakePods{
		{Namespace: "ns", Name: "held-0", Node: "p1", GPUs: 8, Workload: "uid-held"},
		{Namespace: "other", Name: "bare", Node: "p2", GPUs: 4}, // not Kueue's, but on a preemptible node
		{Namespace: "ns", Name: "old", Node: "p3", GPUs: 8, Ended: true},
	}
	got := decide(t, Input{Workloads: []*Workload{newer, held, older},
		View: view(node("p1", domain.NodeReady), node("p2", domain.NodeReady), node("p3", domain.NodeReady), node("p4", domain.NodeReady)),
		Pods: pods})
	// Free: p1 0, p2 4, p3 8 (its pod ended), p4 8. held's second pod takes
	// 8, older the other 8; newer waits.
	if got["older"].State != StateReady {
		t.Fatalf("older: %+v", got["older"])
	}
	if st := got["newer"]; st.State != StatePending || !strings.Contains(st.Message, "4 GPUs are free") {
		t.Fatalf("newer: %+v", st)
	}
	if _, ok := got["held"]; ok {
		t.Fatalf("held changed: %+v", got["held"])
	}
}

// TestRetryAtTheNotice: a workload whose pods run on a node sparecap
// reclaims goes to Retry, with the deadline and requeueAfterSeconds, never
// Rejected; one on a lost node too; others keep Ready.
func TestRetryAtTheNotice(t *testing.T) {
	hit := workload("hit", 2, 8, StateReady, 10*time.Minute)
	lost := workload("lost", 1, 8, StateReady, 10*time.Minute)
	spared := workload("spared", 1, 8, StateReady, 10*time.Minute)
	gone := node("p4", domain.NodeRemoving)
	gone.Outcome = domain.OutcomeLost
	pods := fakePods{
		{Name: "hit-0", Node: "p1", GPUs: 8, Workload: "uid-hit"},
		{Name: "hit-1", Node: "p2", GPUs: 8, Workload: "uid-hit"},
		{Name: "lost-0", Node: "p4", GPUs: 8, Workload: "uid-lost"},
		{Name: "spared-0", Node: "p3", GPUs: 8, Workload: "uid-spared"},
	}
	got := decide(t, Input{Workloads: []*Workload{hit, lost, spared},
		View: view(node("p1", domain.NodeReady), node("p2", domain.NodeDraining), node("p3", domain.NodeReady), gone), Pods: pods})
	st := got["hit"]
	if st.State != StateRetry || st.RequeueAfterSeconds == nil || *st.RequeueAfterSeconds != 1 ||
		!strings.Contains(st.Message, "node p2 is reclaimed (preempted)") || !strings.Contains(st.Message, t0.Add(5*time.Minute).Format(time.RFC3339)) ||
		!st.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("hit: %+v", st)
	}
	if st := got["lost"]; st.State != StateRetry || !strings.Contains(st.Message, "node p4 is gone (lost)") {
		t.Fatalf("lost: %+v", st)
	}
	if _, ok := got["spared"]; ok {
		t.Fatalf("spared changed: %+v", got["spared"])
	}
	for name, st := range got {
		if st.State == StateRejected {
			t.Fatalf("%s Rejected: Kueue would deactivate it", name)
		}
	}
	// Each Retry names its node, for the node's lifecycle event.
	ups, err := Decide(Input{Now: t0, Checks: []string{check}, RequeueAfter: 1, Workloads: []*Workload{hit, lost, spared},
		View: view(node("p1", domain.NodeReady), node("p2", domain.NodeDraining), node("p3", domain.NodeReady), gone), Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		if want := map[string]string{"hit": "p2", "lost": "p4"}[u.Name]; u.Node != want {
			t.Fatalf("%s: node %q, want %q", u.Name, u.Node, want)
		}
	}
}

// TestCapacityGoneBeforeThePodsStarted: a Ready workload whose pods are
// not placed yet loses its capacity (the node was reclaimed): back to
// Pending if Kueue has not admitted it, Retry if it has.
func TestCapacityGoneBeforeThePodsStarted(t *testing.T) {
	admitted := workload("admitted", 1, 8, StateReady, 10*time.Minute)
	notYet := workload("notyet", 1, 8, StateReady, 5*time.Minute)
	notYet.Status.Conditions = notYet.Status.Conditions[:1] // quota reserved, another check still pending
	got := decide(t, Input{Workloads: []*Workload{admitted, notYet}, View: view(node("p1", domain.NodeDraining)), Pods: fakePods{}})
	if got["admitted"].State != StateRetry || got["notyet"].State != StatePending {
		t.Fatalf("got %+v", got)
	}
}

func TestStandardPodSetsAreNeitherCountedNorPinned(t *testing.T) {
	w := workload("ray", 2, 8, StatePending, time.Minute)
	head := PodSet{Name: "head", Count: 1, Template: gpuTemplate(0)}
	launcher := PodSet{Name: "launcher", Count: 1, Template: gpuTemplate(8)}
	launcher.Template.Spec.NodeSelector = map[string]string{domain.LabelComputeClass: "standard"}
	w.Spec.PodSets = append(w.Spec.PodSets, head, launcher)
	w.Status.Admission.PodSetAssignments = append(w.Status.Admission.PodSetAssignments,
		PodSetAssignment{Name: "head", Flavors: map[string]string{"cpu": "on-demand"}},
		PodSetAssignment{Name: "launcher", Flavors: map[string]string{"nvidia.com/gpu": "spot"}})
	flavors := map[string]map[string]string{"on-demand": {domain.LabelComputeClass: "standard"}, "spot": {domain.LabelComputeClass: "preemptible"}}
	got := decide(t, Input{Workloads: []*Workload{w}, Flavors: flavors,
		View: view(node("p1", domain.NodeReady), node("p2", domain.NodeReady)), Pods: fakePods{}})
	st := got["ray"]
	if st.State != StateReady {
		t.Fatalf("ray: %+v (its 2 workers fit; the launcher is on standard nodes)", st)
	}
	for _, u := range st.PodSetUpdates {
		pinned := u.NodeSelector[domain.LabelComputeClass] == "preemptible"
		if pinned != (u.Name == "main") || u.Labels[domain.LabelKueueWorkload] != "uid-ray" {
			t.Fatalf("podSetUpdate %+v: only the workers go to preemptible nodes; every pod is labelled", u)
		}
	}
}

func TestPartialAdmissionCountsWhatWasAdmitted(t *testing.T) {
	w := workload("a", 4, 8, StatePending, time.Minute)
	two := int32(2)
	w.Status.Admission.PodSetAssignments[0].Count = &two
	got := decide(t, Input{Workloads: []*Workload{w}, View: view(node("p1", domain.NodeReady), node("p2", domain.NodeReady)), Pods: fakePods{}})
	if got["a"].State != StateReady {
		t.Fatalf("a: %+v (admitted with 2 of its 4 pods, which fit)", got["a"])
	}
}

func TestSettledWorkloadsAndOtherChecksAreLeftAlone(t *testing.T) {
	finished := workload("finished", 1, 8, StatePending, time.Minute)
	finished.Status.Conditions = append(finished.Status.Conditions, metav1.Condition{Type: condFinished, Status: metav1.ConditionTrue})
	inactive := workload("inactive", 1, 8, StatePending, time.Minute)
	inactive.Spec.Active = new(bool)
	evicted := workload("evicted", 1, 8, StateReady, time.Minute)
	evicted.Status.Conditions = append(evicted.Status.Conditions, metav1.Condition{Type: condEvicted, Status: metav1.ConditionTrue})
	other := workload("other", 1, 8, StatePending, time.Minute)
	other.Status.AdmissionChecks[0].Name = "someone-elses"
	noQuota := workload("noquota", 1, 8, StatePending, time.Minute)
	noQuota.Status.Admission = nil
	pods := fakePods{{Name: "e", Node: "p1", GPUs: 8, Workload: "uid-evicted"}}
	got := decide(t, Input{Workloads: []*Workload{finished, inactive, evicted, other, noQuota},
		View: view(node("p1", domain.NodeDraining), node("p2", domain.NodeReady)), Pods: pods})
	if len(got) != 0 {
		t.Fatalf("want no updates, got %+v", got)
	}
}

// TestManyWorkloadsFillExactly: with n free nodes and more single-node
// workloads than that, exactly n become Ready, the oldest.
func TestManyWorkloadsFillExactly(t *testing.T) {
	var nodes []domain.Node
	for i := range 5 {
		nodes = append(nodes, node(fmt.Sprintf("p%d", i), domain.NodeReady))
	}
	var ws []*Workload
	for i := range 8 {
		ws = append(ws, workload(fmt.Sprintf("w%d", i), 1, 8, StatePending, time.Duration(10-i)*time.Minute))
	}
	got := decide(t, Input{Workloads: ws, View: view(nodes...), Pods: fakePods{}})
	for i := range 8 {
		if st := got[fmt.Sprintf("w%d", i)].State; (st == StateReady) != (i < 5) {
			t.Fatalf("w%d: %s (the 5 oldest fit)", i, st)
		}
	}
}

// A cluster whose preemptible nodes are of two GPU types, with a Kueue
// flavor per type: a workload assigned the H200 flavor is counted on the
// H200 nodes only (Pending while they are full, though an H100 node is
// free, its message naming the type); one with no type takes any node.
func TestAFlavorPerGPUTypeCountsThatTypeOnly(t *testing.T) {
	h100, h200 := node("p-h100", domain.NodeReady), node("p-h200", domain.NodeReady)
	h100.GPUType, h200.GPUType = "H100_SXM", "H200"
	flavors := map[string]map[string]string{
		"h100": {domain.LabelComputeClass: "preemptible", domain.LabelGPUType: "H100_SXM"},
		"h200": {domain.LabelComputeClass: "preemptible", domain.LabelGPUType: "H200"},
	}
	onFlavor := func(w *Workload, f string) *Workload {
		w.Status.Admission.PodSetAssignments[0].Flavors = map[string]string{"nvidia.com/gpu": f}
		return w
	}
	a := onFlavor(workload("a", 1, 8, StatePending, 3*time.Minute), "h200")
	b := onFlavor(workload("b", 1, 8, StatePending, 2*time.Minute), "h200")
	c := workload("c", 1, 8, StatePending, time.Minute) // the flavor "spot" names no type
	got := decide(t, Input{Workloads: []*Workload{a, b, c}, Flavors: flavors, View: view(h100, h200), Pods: fakePods{}})
	if got["a"].State != StateReady || got["c"].State != StateReady {
		t.Fatalf("a %+v, c %+v: want both Ready", got["a"], got["c"])
	}
	if got["b"].State != StatePending || !strings.Contains(got["b"].Message, "of H200; 0 GPUs are free on 1 ready preemptible H200 nodes") {
		t.Errorf("b %+v: want Pending for H200", got["b"])
	}
}

// docs/queues.md's flavors per GPU type, as the check reads them: a
// workload on its H200 flavor is counted on H200 nodes only.
func TestTheDocsFlavorsPerType(t *testing.T) {
	text, err := docs.Snippet("queues.md", "kueue-flavors-per-type")
	if err != nil {
		t.Fatal(err)
	}
	flavors := map[string]map[string]string{}
	for _, doc := range strings.Split(text, "\n---\n") {
		var f struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				NodeLabels map[string]string `json:"nodeLabels"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &f); err != nil {
			t.Fatal(err)
		}
		if f.Kind == "ResourceFlavor" {
			flavors[f.Metadata.Name] = f.Spec.NodeLabels
		}
	}
	h100, h200 := node("p-h100", domain.NodeReady), node("p-h200", domain.NodeReady)
	h100.GPUType, h200.GPUType = "H100_SXM", "H200"
	w := workload("w", 1, 8, StatePending, time.Minute)
	w.Status.Admission.PodSetAssignments[0].Flavors = map[string]string{"nvidia.com/gpu": "sparecap-h200"}
	got := decide(t, Input{Workloads: []*Workload{w}, Flavors: flavors, View: view(h100), Pods: fakePods{}})
	if got["w"].State != StatePending {
		t.Fatalf("on the docs' H200 flavor with only an H100 node: %+v", got["w"])
	}
	got = decide(t, Input{Workloads: []*Workload{w}, Flavors: flavors, View: view(h100, h200), Pods: fakePods{}})
	if got["w"].State != StateReady {
		t.Fatalf("on the docs' H200 flavor with an H200 node: %+v", got["w"])
	}
}
