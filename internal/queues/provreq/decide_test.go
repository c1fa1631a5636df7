package provreq

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func template(name string, gpus int64) *corev1.PodTemplate {
	return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}}
}

// request asks for count pods of template tmpl, created createdAgo ago.
func request(name, tmpl string, count int32, createdAgo time.Duration, conds ...metav1.Condition) *Request {
	r := &Request{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(t0.Add(-createdAgo))}}
	r.Spec.ProvisioningClassName = ClassName
	r.Spec.PodSets = append(r.Spec.PodSets, struct {
		PodTemplateRef struct {
			Name string `json:"name"`
		} `json:"podTemplateRef"`
		Count int32 `json:"count"`
	}{Count: count})
	r.Spec.PodSets[0].PodTemplateRef.Name = tmpl
	r.Status.Conditions = conds
	return r
}

func condition(t string, status bool, ago time.Duration) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: t, LastTransitionTime: metav1.NewTime(t0.Add(-ago))}
}

func clusterView(max, readyNodes int) queues.View {
	v := queues.View{Cluster: domain.Cluster{ID: "c1", MaxPreemptibleGPUs: max}, GPUsPerNode: 8}
	for i := range readyNodes {
		v.Nodes = append(v.Nodes, domain.Node{Name: "p" + string(rune('0'+i)), Class: domain.Preemptible, State: domain.NodeReady, GPUs: 8})
	}
	return v
}

var templates = map[string]*corev1.PodTemplate{"ns/one": template("one", 8), "ns/half": template("half", 4), "ns/big": template("big", 16)}

func decide(t *testing.T, in Input) (int, map[string][]metav1.Condition) {
	t.Helper()
	in.Now = t0
	if in.Templates == nil {
		in.Templates = templates
	}
	if in.Consumed == nil {
		in.Consumed = func(string, string) (int64, error) { return 0, nil }
	}
	out, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	ups := map[string][]metav1.Condition{}
	for _, u := range out.Updates {
		ups[u.Name] = u.Conditions
	}
	return out.Requested, ups
}

func get(conds []metav1.Condition, t string) metav1.Condition {
	for _, c := range conds {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func TestAcceptedRaisesTheTargetThenProvisioned(t *testing.T) {
	r := request("a", "half", 4, time.Minute) // 4 pods of 4 GPUs: 2 nodes
	requested, ups := decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 1)})
	if requested != 16 {
		t.Fatalf("requested %d GPUs, want 16 (4 pods of 4 GPUs on 8-GPU nodes)", requested)
	}
	if c := get(ups["a"], CondAccepted); c.Status != metav1.ConditionTrue {
		t.Fatalf("Accepted %+v", c)
	}
	if c := get(ups["a"], CondProvisioned); c.Status != metav1.ConditionFalse || c.Reason != "Provisioning" || !strings.Contains(c.Message, "8 of the 16") {
		t.Fatalf("Provisioned %+v, want False while 1 of 2 nodes is ready", c)
	}
	r.Status.Conditions = ups["a"]
	requested, ups = decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 2)})
	if c := get(ups["a"], CondProvisioned); requested != 16 || c.Status != metav1.ConditionTrue {
		t.Fatalf("requested %d, Provisioned %+v; want True once both nodes are ready", requested, c)
	}
	// Unchanged: nothing written.
	r.Status.Conditions = ups["a"]
	if _, ups = decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 2)}); len(ups) != 0 {
		t.Fatalf("rewrote an unchanged request: %+v", ups)
	}
}

// TestProvisionedInOrder: requests are served oldest first; each is
// Provisioned when the ready GPUs cover it and every earlier one.
func TestProvisionedInOrder(t *testing.T) {
	older, newer := request("older", "one", 1, 2*time.Minute), request("newer", "one", 1, time.Minute)
	requested, ups := decide(t, Input{Requests: []*Request{newer, older}, View: clusterView(64, 1)})
	if requested != 16 || get(ups["older"], CondProvisioned).Status != metav1.ConditionTrue ||
		get(ups["newer"], CondProvisioned).Status != metav1.ConditionFalse {
		t.Fatalf("requested %d; older %+v; newer %+v", requested, ups["older"], ups["newer"])
	}
}

func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name, reason, contains string
		r                      *Request
		max                    int
	}{
		{"not opted in", "NotEnabled", "max_preemptible_gpus is 0", request("r", "one", 1, 0), 0},
		{"a pod no node holds", "PodsDoNotFit", "asks for 16 GPUs a pod; a node of this cluster has 8", request("r", "big", 1, 0), 64},
		{"over the maximum", "MaximumExceeded", "more than its max_preemptible_gpus of 16", request("r", "one", 3, 0), 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requested, ups := decide(t, Input{Requests: []*Request{tc.r}, View: clusterView(tc.max, 4)})
			c := get(ups["r"], CondFailed)
			if requested != 0 || c.Status != metav1.ConditionTrue || c.Reason != tc.reason || !strings.Contains(c.Message, tc.contains) {
				t.Fatalf("requested %d, Failed %+v", requested, c)
			}
		})
	}
	bad := request("r", "one", 1, 0)
	bad.Spec.Parameters = map[string]string{ParamFillTimeout: "soon"}
	if _, ups := decide(t, Input{Requests: []*Request{bad}, View: clusterView(64, 0)}); get(ups["r"], CondFailed).Reason != "InvalidParameters" {
		t.Fatalf("bad parameter: %+v", ups["r"])
	}
	// A failed request stays failed and counts for nothing.
	failed := request("f", "one", 1, 0, condition(CondFailed, true, time.Minute))
	if requested, ups := decide(t, Input{Requests: []*Request{failed}, View: clusterView(64, 0)}); requested != 0 || len(ups) != 0 {
		t.Fatalf("failed request: requested %d, updates %+v", requested, ups)
	}
}

// TestMaximumCountsEarlierRequests: the maximum is the requests' sum;
// one that would go over fails, a smaller later one still fits.
func TestMaximumCountsEarlierRequests(t *testing.T) {
	a := request("a", "one", 2, 3*time.Minute)
	b := request("b", "one", 2, 2*time.Minute)
	c := request("c", "one", 1, time.Minute)
	requested, ups := decide(t, Input{Requests: []*Request{a, b, c}, View: clusterView(24, 0)})
	if requested != 24 || get(ups["b"], CondFailed).Reason != "MaximumExceeded" || get(ups["c"], CondAccepted).Status != metav1.ConditionTrue {
		t.Fatalf("requested %d; a %+v; b %+v; c %+v", requested, ups["a"], ups["b"], ups["c"])
	}
}

// TestFailsWhenThePoolSaysNo: a request the pool cannot fill fails after
// its fill timeout, with the allocator's reason; one that is coming up
// (Provisioning, CoolingDown) waits on.
func TestFailsWhenThePoolSaysNo(t *testing.T) {
	accepted := condition(CondAccepted, true, 3*time.Minute)
	for _, tc := range []struct {
		reason domain.UnfulfilledReason
		fails  bool
	}{{domain.UnfulfilledNoCapacity, true}, {domain.UnfulfilledFairShare, true}, {domain.UnfulfilledProvisioning, false}, {domain.UnfulfilledCoolingDown, false}} {
		v := clusterView(64, 0)
		v.Cluster.Unfulfilled, v.Cluster.UnfulfilledMessage = tc.reason, "the pool's word"
		requested, ups := decide(t, Input{Requests: []*Request{request("r", "one", 1, 3*time.Minute, accepted)}, View: v})
		f := get(ups["r"], CondFailed)
		if (f.Status == metav1.ConditionTrue) != tc.fails || (tc.fails && (f.Reason != string(tc.reason) || requested != 0)) {
			t.Fatalf("%s: Failed %+v, requested %d", tc.reason, f, requested)
		}
	}
	// Within its fill timeout it waits.
	v := clusterView(64, 0)
	v.Cluster.Unfulfilled = domain.UnfulfilledNoCapacity
	r := request("r", "one", 1, time.Minute, condition(CondAccepted, true, time.Minute))
	r.Spec.Parameters = map[string]string{ParamFillTimeout: "300"}
	if requested, ups := decide(t, Input{Requests: []*Request{r}, View: v}); requested != 8 || get(ups["r"], CondFailed).Status == metav1.ConditionTrue {
		t.Fatalf("within its fill timeout: requested %d, %+v", requested, ups["r"])
	}
}

// TestBookingExpires: a Provisioned request's booking ends after its
// window; then it holds only what its pods use, on whole nodes.
func TestBookingExpires(t *testing.T) {
	r := request("r", "one", 3, time.Hour, condition(CondAccepted, true, 20*time.Minute), condition(CondProvisioned, true, 11*time.Minute))
	requested, ups := decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 3)})
	if requested != 24 || get(ups["r"], CondBookingExpired).Status != metav1.ConditionTrue {
		t.Fatalf("requested %d, %+v", requested, ups["r"])
	}
	r.Status.Conditions = ups["r"]
	used := map[string]int64{"ns/r": 12}
	consumed := func(ns, name string) (int64, error) { return used[ns+"/"+name], nil }
	if requested, _ := decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 3), Consumed: consumed}); requested != 16 {
		t.Fatalf("pods using 12 GPUs: requested %d, want 16 (two nodes)", requested)
	}
	used["ns/r"] = 0
	if requested, _ := decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 3), Consumed: consumed}); requested != 0 {
		t.Fatalf("work done: requested %d, want 0", requested)
	}
}

// TestProvisionedIsNeverRevoked: nodes reclaimed under a Provisioned
// request leave it Provisioned (Kueue would deactivate the workload on
// CapacityRevoked) and still counted, so the target is refilled.
func TestProvisionedIsNeverRevoked(t *testing.T) {
	r := request("r", "one", 2, time.Hour, condition(CondAccepted, true, 5*time.Minute), condition(CondProvisioned, true, 4*time.Minute))
	requested, ups := decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 0)})
	if requested != 16 {
		t.Fatalf("requested %d, want 16: the target is refilled", requested)
	}
	if c, ok := ups["r"]; ok && (get(c, CondProvisioned).Status != metav1.ConditionTrue || get(c, CondCapacityRevoked).Type != "") {
		t.Fatalf("conditions %+v: want Provisioned kept and no CapacityRevoked", c)
	}
}

func TestWaitsForItsTemplates(t *testing.T) {
	requested, ups := decide(t, Input{Requests: []*Request{request("r", "later", 1, 0)}, View: clusterView(64, 0)})
	if c := get(ups["r"], CondAccepted); requested != 0 || c.Status != metav1.ConditionFalse || c.Reason != "PodTemplateNotFound" {
		t.Fatalf("requested %d, Accepted %+v", requested, c)
	}
}

func TestOtherClassesAreLeftAlone(t *testing.T) {
	r := request("r", "one", 1, 0)
	r.Spec.ProvisioningClassName = "check-capacity.autoscaling.x-k8s.io"
	if requested, ups := decide(t, Input{Requests: []*Request{r}, View: clusterView(64, 0)}); requested != 0 || len(ups) != 0 {
		t.Fatalf("requested %d, updates %+v", requested, ups)
	}
}

// A request whose pods select a GPU type (a Kueue flavor per type) is
// Provisioned once that type's ready nodes cover it, not another type's;
// one selecting a type the cluster's target does not take fails, saying
// which it takes.
func TestARequestOfOneGPUType(t *testing.T) {
	v := clusterView(64, 0)
	v.Cluster.GPUType, v.Cluster.PreemptibleGPUTypes = "H100_SXM", []string{"H100_SXM", "H200"}
	v.Nodes = []domain.Node{{Name: "p0", Class: domain.Preemptible, State: domain.NodeReady, GPUs: 8, GPUType: "H100_SXM"}}
	typed := func(name, typ string) *corev1.PodTemplate {
		tp := template(name, 8)
		tp.Template.Spec.NodeSelector = map[string]string{domain.LabelGPUType: typ}
		return tp
	}
	tmpls := map[string]*corev1.PodTemplate{"ns/h200": typed("h200", "H200"), "ns/a100": typed("a100", "A100_SXM")}
	_, ups := decide(t, Input{Requests: []*Request{request("r", "h200", 1, time.Minute)}, View: v, Templates: tmpls})
	if c := get(ups["r"], CondProvisioned); c.Status != metav1.ConditionFalse {
		t.Errorf("an H200 request with only an H100 node ready: %+v", ups["r"])
	}
	v.Nodes = append(v.Nodes, domain.Node{Name: "p1", Class: domain.Preemptible, State: domain.NodeReady, GPUs: 8, GPUType: "H200"})
	_, ups = decide(t, Input{Requests: []*Request{request("r", "h200", 1, time.Minute)}, View: v, Templates: tmpls})
	if c := get(ups["r"], CondProvisioned); c.Status != metav1.ConditionTrue {
		t.Errorf("an H200 request with an H200 node ready: %+v", ups["r"])
	}
	requested, ups := decide(t, Input{Requests: []*Request{request("x", "a100", 1, time.Minute)}, View: v, Templates: tmpls})
	if c := get(ups["x"], CondFailed); c.Status != metav1.ConditionTrue || c.Reason != "GPUTypeNotTaken" || !strings.Contains(c.Message, "H100_SXM, H200") || requested != 0 {
		t.Errorf("a request of a type the cluster does not take: %+v (requested %d)", ups["x"], requested)
	}
}
