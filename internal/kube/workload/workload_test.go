package workload_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

const (
	region = "us-central-2"
	gpu    = "RTX_6000_PCI"
	ns     = "work"
	// window is the drain window: long, so that a drain that ends early
	// can only have ended because the pods were gone.
	window = 2 * time.Minute
	// reclaims is how many times the Job's node is taken back.
	reclaims = 3
)

// kwokProvider plays the machines of the attached cluster: preparing one
// boots a kubelet (kwok) that registers its own Node, with its own labels,
// taint and provider ID, as a real kubelet does; sparecap then adopts it.
// The other cluster's machines are simulated.
type kwokProvider struct {
	client   kubernetes.Interface
	attached string
	fallback driver.MachineProvider
}

// kubeletTaint is what the kubelet registers with (--register-with-taints);
// the workloads tolerate it. It must survive the adoption.
var kubeletTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

func (p *kwokProvider) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	if spec.ClusterID != p.attached {
		return p.fallback.Prepare(ctx, m, spec)
	}
	n := kubeenv.FakeNode(spec.NodeName, kube.Capacity(m.GPUs))
	n.Labels["node.kubernetes.io/instance-type"] = "gpu-8x"
	n.Spec.ProviderID = "kwok://" + m.ID
	n.Spec.Taints = []corev1.Taint{kubeletTaint}
	if _, err := p.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	return true, nil
}

func (p *kwokProvider) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	if clusterID != p.attached {
		return p.fallback.Wipe(ctx, m, clusterID, nodeName)
	}
	return true, nil // sparecap deletes the Node object; nothing else to undo
}

// TestBatchWorkSurvivesReclaims is the promise to batch users, with the
// real Job controller, scheduler and (simulated) kubelets: a Job whose
// podFailurePolicy ignores DisruptionTarget survives several reclaims of
// its node and completes without using its backoffLimit (0: one counted
// failure would fail it); a Deployment's pods on a reclaimed node are
// rescheduled by the scheduler onto the capacity left; and every drain ends
// as soon as the pods' graceful deletion is over, long before the deadline.
func TestBatchWorkSurvivesReclaims(t *testing.T) {
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	e := kubeenv.StartMiniClusterT(t)
	t.Logf("mini cluster up after %s", since())
	c := e.Client()
	ctx := t.Context()

	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.Real{}
	fl, err := sim.New(sim.Config{Clock: clk, ProvisionTime: -1, WipeTime: -1,
		Pods: []sim.PodTemplate{{Name: "worker", TerminationGracePeriod: 30 * time.Second, ExitAfter: 500 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	kc := e.Kubeconfig()
	kubes := kube.NewPlatform(func(_ context.Context, id string) ([]byte, error) {
		if id == "tenant" {
			return kc, nil
		}
		return nil, nil
	}, kube.Options{Instance: "workload-test"})
	router := driver.NewRouter(func(context.Context, string) (domain.ClusterType, error) { return domain.ClusterKubernetes, nil },
		map[domain.ClusterType]driver.Drivers{domain.ClusterKubernetes: kubes}, fl)
	ctrl := controller.New(st, router, &kwokProvider{client: c, attached: "tenant", fallback: fl}, clk,
		controller.Config{DrainWindow: window, Cooldown: -1, Interval: time.Second}, nil)
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: time.Now()}); err != nil {
			return err
		}
		for i := range 2 {
			if err := tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprintf("m%d", i), Region: region, GPUType: gpu, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ctrl.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done; router.Close() })

	// The tenant: one standard and one preemptible node of 8 GPUs.
	create := func(id string, standard, preemptible int) {
		t.Helper()
		_, err := ctrl.CreateCluster(ctx, domain.Cluster{ID: id, Name: id, ProjectID: "p", Region: region, GPUType: gpu,
			Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: standard, DesiredPreemptibleGPUs: preemptible})
		if err != nil {
			t.Fatal(err)
		}
	}
	create("tenant", 8, 8)
	standard := waitNode(t, st, c, domain.Standard, "")
	preemptible := waitNode(t, st, c, domain.Preemptible, "")
	t.Logf("tenant's nodes %s (standard) and %s (preemptible) ready after %s", standard.Name, preemptible.Name, since())

	// Adopted, not pre-created: the kubelet's own labels, taint and
	// provider ID are kept beside sparecap's.
	n, err := c.CoreV1().Nodes().Get(ctx, preemptible.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["node.kubernetes.io/instance-type"] != "gpu-8x" || n.Labels[domain.LabelComputeClass] != string(domain.Preemptible) ||
		n.Spec.ProviderID == "" || !hasTaint(n, kubeletTaint) {
		t.Fatalf("adopted node lost what its kubelet registered or lacks sparecap's labels: labels %v, taints %v, providerID %q",
			n.Labels, n.Spec.Taints, n.Spec.ProviderID)
	}

	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Deployment's pods start on the preemptible node: the tenant
	// cordons the standard one while they are scheduled.
	setUnschedulable(t, c, standard.Name, true)
	replicas := int32(2)
	web := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: web},
			Template: podTemplate(web, "2s", "", corev1.RestartPolicyAlways)},
	}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range kubeenv.WaitRunning(t, c, ns, "app=web", 2, nil, 90*time.Second) {
		if p.Spec.NodeName != preemptible.Name {
			t.Fatalf("web pod %s on %s, want %s", p.Name, p.Spec.NodeName, preemptible.Name)
		}
	}
	setUnschedulable(t, c, standard.Name, false)

	// The Job runs only on preemptible nodes, for 15 s of work; each pod
	// exits 1 s after its SIGTERM. backoffLimit 0: a single failure it
	// counted would fail the Job.
	train := map[string]string{"job": "train"}
	tmpl := podTemplate(train, "1s", "15s", corev1.RestartPolicyNever)
	tmpl.Spec.NodeSelector = map[string]string{domain.LabelComputeClass: string(domain.Preemptible)}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: tmpl,
		},
	}
	if _, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	disrupted := watchDisruptions(t, c)

	seen := map[types.UID]bool{}
	for i := 1; i <= reclaims; i++ {
		pod := kubeenv.WaitRunning(t, c, ns, "job=train", 1, seen, 90*time.Second)[0]
		seen[pod.UID] = true
		if pod.Spec.NodeName != preemptible.Name {
			t.Fatalf("reclaim %d: job pod on %s, want %s", i, pod.Spec.NodeName, preemptible.Name)
		}
		t.Logf("reclaim %d: job pod %s running on %s after %s", i, pod.Name, pod.Spec.NodeName, since())

		// Another cluster takes the machine as standard capacity.
		if i == 1 {
			create("other", 8, 0)
		} else {
			std := 8
			if _, err := ctrl.UpdateCluster(ctx, "other", controller.Change{NumGPUs: &std}); err != nil {
				t.Fatal(err)
			}
		}
		gone := waitRemoved(t, st, preemptible.ID)
		took := gone.DrainedAt.Sub(gone.DrainStartedAt)
		t.Logf("reclaim %d: %s drained %s after T+0 (outcome %s)", i, gone.Name, took.Round(10*time.Millisecond), gone.Outcome)
		// The pods exit 1-2 s after SIGTERM; the deadline is 2 min away.
		if gone.Outcome != domain.OutcomeEarly || took > 20*time.Second {
			t.Fatalf("reclaim %d: drain ended with %s %s after T+0; want drained as soon as kwok ended the pods (seconds)", i, gone.Outcome, took)
		}
		if !disrupted.has(t, pod.UID) {
			t.Fatalf("reclaim %d: job pod %s was deleted without a DisruptionTarget condition", i, pod.Name)
		}
		if i == 1 {
			// The scheduler puts the Deployment's pods on what is left.
			for _, p := range kubeenv.WaitRunning(t, c, ns, "app=web", 2, nil, 90*time.Second) {
				if p.Spec.NodeName != standard.Name {
					t.Fatalf("web pod %s on %s, want the standard node %s", p.Name, p.Spec.NodeName, standard.Name)
				}
			}
			t.Logf("web pods rescheduled onto %s after %s", standard.Name, since())
		}

		// The other cluster lets the machine go; the tenant's target is
		// refilled with a new node.
		zero := 0
		if _, err := ctrl.UpdateCluster(ctx, "other", controller.Change{NumGPUs: &zero}); err != nil {
			t.Fatal(err)
		}
		preemptible = waitNode(t, st, c, domain.Preemptible, preemptible.ID)
		t.Logf("reclaim %d: refilled with %s after %s", i, preemptible.Name, since())
	}

	// The last pod runs its 15 s and the Job completes: nothing counted
	// as failed, all the pods but the last disrupted.
	kubeenv.Eventually(t, 90*time.Second, func() error {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				t.Fatalf("job failed: %s: %s", cond.Reason, cond.Message)
			}
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				if j.Status.Failed != 0 || j.Status.Succeeded != 1 {
					t.Fatalf("job complete with %d failed and %d succeeded pods, want 0 and 1", j.Status.Failed, j.Status.Succeeded)
				}
				return nil
			}
		}
		return fmt.Errorf("job not complete: active %d, failed %d, succeeded %d; events: %s",
			j.Status.Active, j.Status.Failed, j.Status.Succeeded, kubeenv.Events(ctx, c, ns))
	})
	if got := disrupted.count("job=train"); got != reclaims {
		t.Errorf("%d job pods disrupted, want %d", got, reclaims)
	}
	t.Logf("job complete after %d reclaims, %s", reclaims, since())
}

// waitNode waits for the tenant's node of the class that is ready in the
// store and whose Node object is Ready and schedulable (the node
// lifecycle controller has lifted its not-ready taint), other than the node
// not, and returns it.
func waitNode(t *testing.T, st store.Store, c kubernetes.Interface, class domain.ComputeClass, not string) domain.Node {
	t.Helper()
	var got domain.Node
	kubeenv.Eventually(t, 60*time.Second, func() error {
		nodes, err := st.ListNodes(t.Context(), store.NodeFilter{ClusterID: "tenant", States: []domain.NodeState{domain.NodeReady}})
		if err != nil {
			return err
		}
		for _, nd := range nodes {
			if nd.Class != class || nd.ID == not {
				continue
			}
			n, err := c.CoreV1().Nodes().Get(t.Context(), nd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, tn := range n.Spec.Taints {
				if tn.Key == corev1.TaintNodeNotReady {
					return fmt.Errorf("node %s still has taint %s", n.Name, tn.Key)
				}
			}
			got = nd
			return nil
		}
		return fmt.Errorf("no ready %s node", class)
	})
	return got
}

// waitRemoved waits until the node is removed and returns it.
func waitRemoved(t *testing.T, st store.Store, id string) domain.Node {
	t.Helper()
	var got domain.Node
	kubeenv.Eventually(t, window+30*time.Second, func() error {
		nd, err := st.GetNode(t.Context(), id)
		if err != nil {
			return err
		}
		if nd.State != domain.NodeRemoved {
			return fmt.Errorf("node %s is %s", nd.Name, nd.State)
		}
		got = nd
		return nil
	})
	return got
}

// podTemplate asks for a GPU and tolerates the kubelet's GPU taint. exitAfter
// is how long its containers take to exit after SIGTERM, runFor (if set)
// how long its work takes (see kubeenv).
func podTemplate(labels map[string]string, exitAfter, runFor string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	ann := map[string]string{kubeenv.ExitAfterAnnotation: exitAfter}
	if runFor != "" {
		ann[kubeenv.RunForAnnotation] = runFor
	}
	grace := int64(30)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: &grace,
			Tolerations:                   []corev1.Toleration{{Key: kubeletTaint.Key, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:      "c",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}},
			}},
		},
	}
}

// disruptions records the pods seen with sparecap's DisruptionTarget
// condition while they were being deleted, by UID, with their app or job
// label.
type disruptions struct {
	mu   sync.Mutex
	pods map[types.UID]string
}

func watchDisruptions(t *testing.T, c kubernetes.Interface) *disruptions {
	d := &disruptions{pods: map[types.UID]string{}}
	w, err := c.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.DeletionTimestamp == nil {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue &&
					(cond.Reason == domain.ReasonEviction || cond.Reason == domain.ReasonDisruption) {
					d.mu.Lock()
					d.pods[p.UID] = labelsString(p.Labels)
					d.mu.Unlock()
				}
			}
		}
	}()
	return d
}

// has waits a little for the watch to catch up.
func (d *disruptions) has(t *testing.T, uid types.UID) bool {
	for range 50 {
		d.mu.Lock()
		_, ok := d.pods[uid]
		d.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (d *disruptions) count(selector string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, l := range d.pods {
		if l == selector {
			n++
		}
	}
	return n
}

func labelsString(l map[string]string) string {
	var parts []string
	for k, v := range l {
		if k == "job" || k == "app" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

func setUnschedulable(t *testing.T, c kubernetes.Interface, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := c.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == want.Key && tn.Value == want.Value && tn.Effect == want.Effect {
			return true
		}
	}
	return false
}
