package kube_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
	"github.com/sparecap/sparecap/internal/store"
)

// These tests pin the reclaim contract (docs/kubernetes.md, "The
// contract") against a real API server that misbehaves in one way each:
// the same faults internal/controller/contract_test.go injects into the
// simulation, here as the API server and client-go really produce them.

// TestDeleteNodeDenied: an admission policy refuses to delete sparecap's
// Nodes. The drain runs as usual and the machine is handed on at the
// deadline all the same; the Node object is cleanup, which finishes once
// the policy stops refusing.
func TestDeleteNodeDenied(t *testing.T) {
	const window = 8 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	// No stand-in kubelet: the pod stays Terminating, so the drain runs to
	// its deadline, where the pod is force-deleted and the Node is next.
	startPod(t, pre.Name, "tenant-a", "stuck", 600*time.Second, -1, false)
	unbind := protectNodes(t)
	// The API server loads policies asynchronously: wait until it refuses.
	eventually(t, 20*time.Second, func() error {
		err := env.Client().CoreV1().Nodes().Delete(ctx, pre.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return errors.New("deleting a sparecap Node is not refused yet")
		}
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return err
		}
		return nil
	})
	time.Sleep(time.Second) // the controller's pod watch has the pod

	drained := f.reclaim(pre.ID)
	got := f.waitUndrained(drained)
	if got.Outcome != domain.OutcomeDeadline || !got.CleanupPending {
		t.Fatalf("at the deadline: outcome %s, cleanup pending %v (%s)", got.Outcome, got.CleanupPending, got.LastError)
	}
	// The machine goes to the standard node that reclaimed it.
	std := f.waitNodes("c-sim", domain.Standard, domain.NodeReady, 1, time.Until(drained.Deadline)+3*time.Second)[0]
	if std.MachineID != pre.MachineID {
		t.Fatalf("c-sim's node is on %s, want the reclaimed machine %s", std.MachineID, pre.MachineID)
	}
	if late := std.ReadyAt.Sub(drained.Deadline); late > 3*time.Second {
		t.Errorf("the machine was handed on %s after the deadline", late)
	}
	got, _ = f.st.GetNode(ctx, pre.ID)
	if got.State != domain.NodeRemoved || !got.CleanupPending {
		t.Fatalf("after the handover: %s, cleanup pending %v", got.State, got.CleanupPending)
	}
	if e, ok := f.event("c-k", pre.ID, domain.ReasonNodeRemoved); !ok || !strings.Contains(e.Message, "cleanup pending") {
		t.Errorf("NodeRemoved does not say cleanup is pending: %+v", e)
	}
	// Only the Node is refused: the pod left at the deadline was
	// force-deleted before it.
	if _, err := env.Client().CoreV1().Pods("tenant-a").Get(ctx, "stuck", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod left at the deadline was not force-deleted: %v", err)
	}
	// Retries keep being refused: the Node stays, the cleanup pending.
	time.Sleep(2 * time.Second)
	if node(t, pre.Name) == nil {
		t.Fatal("the protected Node was deleted")
	}
	if got, _ := f.st.GetNode(ctx, pre.ID); !got.CleanupPending {
		t.Fatal("cleanup no longer pending while the Node is still there")
	}

	unbind()
	freed := time.Now()
	eventually(t, 20*time.Second, func() error {
		if node(t, pre.Name) != nil {
			return errors.New("the Node object is still there")
		}
		if got, _ := f.st.GetNode(ctx, pre.ID); got.CleanupPending {
			return fmt.Errorf("cleanup still pending: %s", got.LastError)
		}
		if _, ok := f.event("c-k", pre.ID, domain.ReasonCleanupFinished); !ok {
			return errors.New("no CleanupFinished event")
		}
		return nil
	})
	t.Logf("cleanup finished %s after the policy stopped refusing", time.Since(freed).Round(100*time.Millisecond))
}

// TestClusterDeletedWhileAPIGone: the tenant's control plane is torn down
// and then the cluster deleted. The cluster finishes deleting at its
// nodes' deadline without a single answer from its API, billing stops by
// then, and the machines go to someone else. Its cleanup is dropped with
// its credentials: once the API is back, nothing more is done there.
func TestClusterDeletedWhileAPIGone(t *testing.T) {
	const window = 8 * time.Second
	f := newFixture(t, fixtureConfig{machines: 2, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	// Whatever happens, the next test gets its API server back.
	t.Cleanup(func() { env.StartAPIServer() })
	f.createCluster("c-k", 8, 8)
	f.waitNodes("c-k", domain.Standard, domain.NodeReady, 1, 20*time.Second)
	f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)
	for _, n := range f.nodes("c-k", domain.NodeReady) {
		startPod(t, n.Name, "tenant-a", "stuck-"+n.Name, 600*time.Second, -1, false)
	}
	time.Sleep(time.Second)

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ctrl.DeleteCluster(ctx, "c-k"); err != nil {
		t.Fatal(err)
	}
	nodes := f.nodes("c-k", domain.NodeDraining)
	if len(nodes) != 2 {
		t.Fatalf("draining after the delete: %+v", nodes)
	}
	for _, n := range nodes {
		got := f.waitUndrained(n)
		// Removed with its cleanup pending, as NodeRemoved says (the flag
		// itself is cleared as soon as the cluster is gone: nothing is
		// left to clean, so the node is not read for it here).
		e, ok := f.event("c-k", n.ID, domain.ReasonNodeRemoved)
		if got.Outcome != domain.OutcomeDeadline || !ok || !strings.Contains(e.Message, "cleanup pending") {
			t.Errorf("%s at its deadline: outcome %s, NodeRemoved %q", n.Name, got.Outcome, e.Message)
		}
	}
	eventually(t, 3*time.Second, func() error {
		if _, err := f.st.GetCluster(ctx, "c-k"); !errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("cluster not gone: %v", err)
		}
		return nil
	})
	for _, n := range nodes {
		got, _ := f.st.GetNode(ctx, n.ID)
		if stop, known, _ := billing.Stop(got); !known || stop.After(n.Deadline.Add(2*time.Second)) {
			t.Errorf("%s %s bills until %v, deadline %v", n.Class, n.Name, stop, n.Deadline)
		}
	}
	// Both machines are free: a new cluster gets them (a create is refused
	// when its standard capacity cannot be found).
	f.createCluster("c-sim", 16, 0)
	f.waitNodes("c-sim", domain.Standard, domain.NodeReady, 2, 10*time.Second)
	// The cleanup of a cluster that is gone is dropped, API or not.
	eventually(t, 10*time.Second, func() error {
		for _, n := range nodes {
			if got, _ := f.st.GetNode(ctx, n.ID); got.CleanupPending {
				return fmt.Errorf("%s: cleanup still pending", n.Name)
			}
		}
		return nil
	})

	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// Give the watches time to reconnect and anything still meaning to
	// clean up time to act.
	time.Sleep(3 * time.Second)
	for _, n := range nodes {
		if _, ok := f.event("c-k", n.ID, domain.ReasonCleanupFinished); ok {
			t.Errorf("%s: cleanup ran for a deleted cluster", n.Name)
		}
		if node(t, n.Name) == nil {
			t.Errorf("Node %s was deleted with the credentials of a deleted cluster", n.Name)
		}
	}
	// The controller is still at work.
	f.update("c-sim", new(8), nil)
	f.waitNodes("c-sim", domain.Standard, domain.NodeRemoved, 1, 10*time.Second)
}

// TestLatePodGetsNotice: a pod bound to a draining node after T+0 (it
// tolerates every taint) gets its own notice: the DisruptionTarget
// condition, then a graceful deletion ending by the deadline, and its
// Event; never just a force-deletion at the end.
func TestLatePodGetsNotice(t *testing.T) {
	const window = 20 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	pods := watchPods(t, "tenant-a")
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	// It ignores SIGTERM: the drain goes on until the deadline.
	startPod(t, pre.Name, "tenant-a", "stuck", 600*time.Second, -1, false)
	time.Sleep(time.Second)
	drained := f.reclaim(pre.ID)
	f.waitNotified(pre.ID)
	time.Sleep(time.Second) // well after T+0: the pod is new to the drain

	created := time.Now()
	if _, err := kubelet.CreatePods(ctx, env.Client(), "tenant-a", pre.Name, 1, 600, podOptions("late", -1, false), tolerateAll, readsAnnotations); err != nil {
		t.Fatal(err)
	}
	var first podVersion
	eventually(t, 5*time.Second, func() error {
		vs := pods.deleting("late")
		if len(vs) == 0 {
			return errors.New("the late pod got no SIGTERM")
		}
		first = vs[0]
		return nil
	})
	t.Logf("late pod deleted %s after it was bound", first.at.Sub(created).Round(10*time.Millisecond))
	if d := first.at.Sub(created); d > 3*time.Second {
		t.Errorf("late pod deleted %s after it was bound, want within a pass or two", d)
	}
	p := first.pod
	grace := *p.DeletionGracePeriodSeconds
	// Grace to the deadline, in whole seconds rounded down: at most those
	// left when the pod was bound (it was deleted later), at least those
	// left when the deletion was seen (it was deleted earlier).
	most := int64(drained.Deadline.Sub(created) / time.Second)
	least := int64(drained.Deadline.Sub(first.at) / time.Second)
	if grace <= 0 || grace > most || grace < least {
		t.Errorf("late pod deleted with grace %ds, want the time left (%d..%ds)", grace, max(least, 1), most)
	}
	if c := disruption(p); c == nil {
		t.Errorf("late pod deleted without sparecap's DisruptionTarget condition: %+v", p.Status.Conditions)
	}
	// The deadline reaches the pod before its deletion: on an earlier
	// version of it, and on the one deleted.
	deadline := drained.Deadline.UTC().Format(time.RFC3339)
	if got := p.Annotations[domain.AnnotationDeadline]; got != deadline {
		t.Errorf("late pod deleted with %s=%q, want %q", domain.AnnotationDeadline, got, deadline)
	}
	if !pods.annotatedBeforeDeletion("late", deadline) {
		t.Errorf("no version of the late pod had the deadline annotation before its deletion")
	}
	// A pod that cannot read its annotations is spared the write.
	if vs := pods.deleting("stuck"); len(vs) == 0 {
		t.Error("the stuck pod was not deleted")
	} else if v, ok := vs[0].pod.Annotations[domain.AnnotationDeadline]; ok {
		t.Errorf("a pod without a Downward API volume of its annotations got %s=%q", domain.AnnotationDeadline, v)
	}
	eventually(t, 5*time.Second, func() error {
		return hasEvent(ctx, "tenant-a", "late", string(domain.ReasonPreemptionNotified))
	})
	if got, _ := f.st.GetNode(ctx, pre.ID); got.State != domain.NodeDraining {
		t.Fatalf("the node stopped draining before the deadline: %+v", got)
	}
}

// TestRefusedDeadlineAnnotationStillNotifies: the tenant's API refuses
// the pod's deadline annotation (an admission policy; or RBAC without
// patch on pods). The annotation is a courtesy; the notice is not: the
// pod still gets its DisruptionTarget condition and its SIGTERM at once.
func TestRefusedDeadlineAnnotationStillNotifies(t *testing.T) {
	const window = 20 * time.Second
	const ns = "tenant-refuses"
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	refuse(t, "refuse-deadline-annotations", admissionv1.Update, "pods",
		// Only this test's pods: the policy outlives the test for a moment.
		fmt.Sprintf("object.metadata.namespace != %q || !has(object.metadata.annotations) || !(%q in object.metadata.annotations)", ns, domain.AnnotationDeadline),
		"no deadline annotations on our pods")
	pods := watchPods(t, ns)
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	// The policy is in force once it refuses the annotation on a probe
	// (a pod bound to no node of the cluster's).
	if _, err := kubelet.CreatePods(ctx, env.Client(), ns, "no-such-node", 1, 0, podOptions("probe", 0, false)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"2000-01-01T00:00:00Z"}}}`, domain.AnnotationDeadline)
		_, err := env.Client().CoreV1().Pods(ns).Patch(ctx, "probe", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil {
			return errors.New("the policy let the annotation through")
		}
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return err
		}
		return nil
	})
	if _, err := kubelet.CreatePods(ctx, env.Client(), ns, pre.Name, 1, 600, podOptions("trainer", 2*time.Second, false), readsAnnotations); err != nil {
		t.Fatal(err)
	}
	reclaimed := time.Now()
	drained := f.reclaim(pre.ID)
	first := pods.firstSIGTERM(t, "trainer", reclaimed)
	if c := disruption(first.pod); c == nil {
		t.Errorf("the pod was deleted without its DisruptionTarget condition: %+v", first.pod.Status.Conditions)
	}
	if v, ok := first.pod.Annotations[domain.AnnotationDeadline]; ok {
		t.Errorf("the refused annotation is there: %q", v)
	}
	// It exits 2 s after its SIGTERM; the node goes early.
	f.waitNodes("c-k", domain.Preemptible, domain.NodeRemoved, 1, window)
	if got, _ := f.st.GetNode(ctx, pre.ID); got.DrainedAt.IsZero() || !got.DrainedAt.Before(drained.Deadline.Add(-10*time.Second)) {
		t.Errorf("the drain ended at %s, not early (the deadline is %s)", got.DrainedAt, drained.Deadline)
	}
}

// TestUncordonIsUndone: the tenant uncordons the draining node and removes
// sparecap's taint and deadline annotation; they are back within a pass.
func TestUncordonIsUndone(t *testing.T) {
	const window = 20 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	// No stand-in kubelet: the pod keeps the drain going to the deadline.
	startPod(t, pre.Name, "tenant-a", "stuck", 600*time.Second, -1, false)
	time.Sleep(time.Second)
	drained := f.reclaim(pre.ID)
	eventually(t, 10*time.Second, func() error { return marked(node(t, pre.Name), drained) })

	// kubectl uncordon, and a controller that resets taints and annotations.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := env.Client().CoreV1().Nodes().Get(ctx, pre.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = false
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == domain.TaintPreempted })
		delete(n.Annotations, domain.AnnotationDeadline)
		_, err = env.Client().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	undone := time.Now()
	eventually(t, 5*time.Second, func() error { return marked(node(t, pre.Name), drained) })
	t.Logf("marked again %s after the tenant's uncordon", time.Since(undone).Round(10*time.Millisecond))
	if d := time.Since(undone); d > 3*time.Second {
		t.Errorf("marked again only %s after the tenant's uncordon", d)
	}
	if got, _ := f.st.GetNode(ctx, pre.ID); got.State != domain.NodeDraining {
		t.Fatalf("the node stopped draining: %+v", got)
	}
}

// TestTerminatingPodGraceCut: a pod the tenant deleted with an hour's
// grace before the reclaim is deleted again at T+0 with the time left
// (Kubernetes lets a second delete shorten the grace), with its condition,
// so it is gone by the deadline rather than an hour later.
func TestTerminatingPodGraceCut(t *testing.T) {
	const window = 10 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	// The stand-in keeps the pod terminating until its grace runs out.
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	pods := watchPods(t, "tenant-a")
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	startPod(t, pre.Name, "tenant-a", "slow", time.Hour, -1, false)
	hour := int64(3600)
	if err := env.Client().CoreV1().Pods("tenant-a").Delete(ctx, "slow", metav1.DeleteOptions{GracePeriodSeconds: &hour}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if _, ok := kl.SigtermAt("tenant-a", "slow"); !ok {
			return errors.New("the stand-in kubelet has not seen the deletion")
		}
		return nil
	})
	time.Sleep(time.Second) // the controller's pod watch has it terminating

	drained := f.reclaim(pre.ID)
	var cut podVersion
	eventually(t, 5*time.Second, func() error {
		for _, v := range pods.deleting("slow") {
			if *v.pod.DeletionGracePeriodSeconds < hour {
				cut = v
				return nil
			}
		}
		return errors.New("the hour's grace was not cut")
	})
	p := cut.pod
	t.Logf("grace cut to %ds at T+%s", *p.DeletionGracePeriodSeconds, cut.at.Sub(drained.DrainStartedAt).Round(10*time.Millisecond))
	if !cut.at.Before(drained.Deadline) {
		t.Errorf("grace cut only at %v, deadline %v", cut.at, drained.Deadline)
	}
	if g := *p.DeletionGracePeriodSeconds; g <= 0 || g > int64(window/time.Second) {
		t.Errorf("grace cut to %ds, want the %s left at most, and not a force-delete", g, window)
	}
	if p.DeletionTimestamp.After(drained.Deadline) {
		t.Errorf("the pod is still to be killed at %v, after the deadline %v", p.DeletionTimestamp, drained.Deadline)
	}
	if disruption(p) == nil {
		t.Errorf("grace cut without sparecap's DisruptionTarget condition: %+v", p.Status.Conditions)
	}
	eventually(t, time.Until(drained.Deadline)+time.Second, func() error {
		if _, ok := pods.goneAt("slow"); !ok {
			return errors.New("the pod is still there")
		}
		return nil
	})
	f.waitUndrained(drained)
}

// TestTenantDeletesNode: the tenant deletes a ready node's Node object
// (kubectl delete node). The node watch tells the controller at once: the
// node is lost, billing stops, its machine is returned and the target
// refilled with a new node; the pods left bound to the old Node are
// cleanup.
func TestTenantDeletesNode(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 1, window: 10 * time.Second, attached: []string{"c-k"}})
	ctx := f.ctx
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	// No stand-in kubelet: nothing but the cleanup removes this pod.
	startPod(t, pre.Name, "tenant-a", "orphan", 30*time.Second, -1, false)
	time.Sleep(time.Second)

	deleted := time.Now()
	if err := env.Client().CoreV1().Nodes().Delete(ctx, pre.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Within a pass of the watch event, well before the 5 s sweep.
	var lost domain.Node
	eventually(t, 3*time.Second, func() error {
		lost, _ = f.st.GetNode(ctx, pre.ID)
		if lost.Outcome != domain.OutcomeLost {
			return fmt.Errorf("node %s after its Node was deleted, outcome %q", lost.State, lost.Outcome)
		}
		return nil
	})
	t.Logf("lost %s after the Node was deleted", lost.RemovedAt.Sub(deleted).Round(10*time.Millisecond))
	if lost.State.Live() || lost.RemovedAt.Before(deleted) {
		t.Fatalf("lost node %+v", lost)
	}
	if stop, known, _ := billing.Stop(lost); !known || !stop.Equal(lost.RemovedAt) {
		t.Errorf("billing stops at %v, want its removal %v", stop, lost.RemovedAt)
	}
	if e, ok := f.event("c-k", pre.ID, domain.ReasonNodeLost); !ok || !strings.Contains(e.Message, "deleted") {
		t.Errorf("NodeLost %+v", e)
	}
	// The one machine is returned and the target refilled on it.
	var repl domain.Node
	eventually(t, 10*time.Second, func() error {
		for _, n := range f.nodes("c-k", domain.NodeReady) {
			if n.ID != pre.ID {
				repl = n
				return nil
			}
		}
		return errors.New("target not refilled")
	})
	t.Logf("refilled %s after the Node was deleted", repl.ReadyAt.Sub(deleted).Round(10*time.Millisecond))
	if repl.MachineID != pre.MachineID || repl.Class != domain.Preemptible || repl.Name == pre.Name {
		t.Fatalf("replacement %+v", repl)
	}
	if d := repl.ReadyAt.Sub(deleted); d > 5*time.Second {
		t.Errorf("target refilled only %s after the Node was deleted", d)
	}
	if n := node(t, repl.Name); n == nil || !kube.Ready(n) || n.Labels[domain.LabelNodeID] != repl.ID {
		t.Fatalf("replacement Node %+v", n)
	}
	if got, _ := f.st.GetNode(ctx, pre.ID); got.State != domain.NodeRemoved {
		t.Errorf("lost node %s, want removed", got.State)
	}
	// Cleanup: the pod still bound to the deleted Node is deleted.
	eventually(t, 10*time.Second, func() error {
		if _, err := env.Client().CoreV1().Pods("tenant-a").Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the pod on the lost node is still there: %v", err)
		}
		if got, _ := f.st.GetNode(ctx, pre.ID); got.CleanupPending {
			return errors.New("cleanup still pending")
		}
		if _, ok := f.event("c-k", pre.ID, domain.ReasonCleanupFinished); !ok {
			return errors.New("no CleanupFinished event")
		}
		return nil
	})
	if err := hasEvent(ctx, "default", pre.Name, string(domain.ReasonNodeLost)); err != nil {
		t.Error(err)
	}
}

// silentMachine is a provider whose machine boots (Prepare succeeds) but
// whose kubelet never registers a Node.
type silentMachine struct {
	driver.MachineProvider
	id string
}

func (s silentMachine) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	if m.ID == s.id {
		return true, nil
	}
	return s.MachineProvider.Prepare(ctx, m, spec)
}

// TestKubeletNeverRegisters: a machine whose node never registers goes
// back after the registration timeout, with a RegistrationFailed event,
// and the node is replaced; after MaxFailures in a row the machine is out
// of service, saying why, and the node goes to another machine.
func TestKubeletNeverRegisters(t *testing.T) {
	const timeout = 2 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: 10 * time.Second, attached: []string{"c-k"},
		registerTimeout: timeout,
		provider: func(reg driver.MachineProvider) driver.MachineProvider {
			return silentMachine{MachineProvider: reg, id: "m000"}
		}})
	ctx := f.ctx
	f.createCluster("c-k", 8, 0)
	// The failures count one by one until the machine is out of service.
	var counts []int
	eventually(t, 20*time.Second, func() error {
		m, err := f.st.GetMachine(ctx, "m000")
		if err != nil {
			return err
		}
		if m.Failures > 0 && (len(counts) == 0 || counts[len(counts)-1] != m.Failures) {
			counts = append(counts, m.Failures)
		}
		if !m.OutOfService {
			return fmt.Errorf("machine in service after %d failures", m.Failures)
		}
		if !strings.Contains(m.OutOfServiceReason, "did not register Ready") {
			return fmt.Errorf("out of service for %q", m.OutOfServiceReason)
		}
		return nil
	})
	if want := []int{1, 2, controller.MaxFailures}; !slices.Equal(counts, want) {
		t.Errorf("failures counted %v, want %v", counts, want)
	}
	var failed []domain.Node
	eventually(t, 5*time.Second, func() error {
		failed = f.nodes("c-k", domain.NodeRemoved)
		if len(failed) != controller.MaxFailures {
			return fmt.Errorf("%d nodes removed, want %d", len(failed), controller.MaxFailures)
		}
		return nil
	})
	for _, n := range failed {
		if !n.ReadyAt.IsZero() || n.MachineID != "m000" {
			t.Errorf("failed node %+v", n)
		}
		if d := n.RemovedAt.Sub(n.ProvisioningAt); d < timeout || d > timeout+2*time.Second {
			t.Errorf("%s given up %s after provisioning started, timeout %s", n.Name, d, timeout)
		}
		if e, ok := f.event("c-k", n.ID, domain.ReasonRegistrationFailed); !ok || !strings.Contains(e.Message, "did not register Ready") {
			t.Errorf("RegistrationFailed of %s: %+v", n.Name, e)
		}
		// The cluster is told too, on the Node that never came.
		eventually(t, 10*time.Second, func() error {
			return hasEvent(ctx, "default", n.Name, string(domain.ReasonRegistrationFailed))
		})
	}

	// Another machine: the node goes there, and joins.
	err := f.st.Update(ctx, func(tx store.Tx) error {
		return tx.CreateMachine(ctx, domain.Machine{ID: "m001", Region: region, GPUType: gpu, GPUs: 8, CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	std := f.waitNodes("c-k", domain.Standard, domain.NodeReady, 1, 10*time.Second)[0]
	if std.MachineID != "m001" {
		t.Fatalf("node placed on %s, want m001", std.MachineID)
	}
	if n := node(t, std.Name); n == nil || !kube.Ready(n) {
		t.Fatalf("Node %+v", n)
	}
	if m, _ := f.st.GetMachine(ctx, "m000"); !m.OutOfService || m.Failures != controller.MaxFailures {
		t.Errorf("machine m000 afterwards %+v", m)
	}
}

// ownKubelet is a provider whose machine boots a kubelet that registers
// its Node itself, with its own --node-labels, --register-with-taints and
// --provider-id, and reports it Ready.
type ownKubelet struct{ driver.MachineProvider }

const (
	kubeletLabel = "node.kubernetes.io/instance-type"
	kubeletTaint = "nvidia.com/gpu"
)

func providerID(machine string) string { return "sparecap-test://" + machine }

func (ownKubelet) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: spec.NodeName, Labels: map[string]string{
			kubeletLabel: "gpu-x", corev1.LabelHostname: spec.NodeName}},
		Spec: corev1.NodeSpec{ProviderID: providerID(m.ID),
			Taints: []corev1.Taint{{Key: kubeletTaint, Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := env.Client().CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	return true, kubelet.MarkReady(ctx, env.Client(), spec.NodeName)
}

// TestKubeletRegistersOwnNode: sparecap adopts a Node its kubelet
// registered: it adds its labels and taints next to the kubelet's and
// keeps the kubelet's labels, taints and provider ID.
func TestKubeletRegistersOwnNode(t *testing.T) {
	preemptible := kube.Taint{Key: "sparecap.dev/preemptible", Value: "true", Effect: "NoSchedule"}
	f := newFixture(t, fixtureConfig{machines: 1, window: 10 * time.Second, attached: []string{"c-k"},
		opts: kube.Options{NodeLabels: map[string]string{"example.com/pool": "spare"},
			PreemptibleTaints: []kube.Taint{preemptible}},
		provider: func(reg driver.MachineProvider) driver.MachineProvider { return ownKubelet{reg} }})
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	n := node(t, pre.Name)
	if n == nil || !kube.Ready(n) {
		t.Fatalf("Node %+v", n)
	}
	for k, v := range map[string]string{
		domain.LabelNodeID: pre.ID, domain.LabelComputeClass: string(domain.Preemptible),
		"example.com/pool": "spare", kubeletLabel: "gpu-x", corev1.LabelHostname: pre.Name,
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
		}
	}
	for k, v := range n.Labels {
		if strings.Contains(v, pre.MachineID) {
			t.Errorf("label %s=%q names the machine (a borrower would learn whose reservation it is)", k, v)
		}
	}
	if _, ok := n.Labels[kube.LabelRegistered]; ok {
		t.Error("an adopted Node is labelled as registered by sparecap")
	}
	want := []corev1.Taint{
		{Key: kubeletTaint, Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: preemptible.Key, Value: preemptible.Value, Effect: corev1.TaintEffectNoSchedule},
	}
	// The API server's TaintNodesByCondition admission adds not-ready at
	// creation; the node lifecycle controller would lift it. Not ours.
	taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if !slices.EqualFunc(taints, want, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
		t.Errorf("taints %+v, want %+v", n.Spec.Taints, want)
	}
	if n.Spec.ProviderID != providerID(pre.MachineID) {
		t.Errorf("providerID %q, want the kubelet's %q", n.Spec.ProviderID, providerID(pre.MachineID))
	}
}

// reclaim creates cluster c-sim (not attached) whose standard node needs
// the one machine, reclaiming c-k's preemptible node there, and returns
// that node, draining.
func (f *fixture) reclaim(id string) domain.Node {
	f.t.Helper()
	f.createCluster("c-sim", 8, 0)
	n, err := f.st.GetNode(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	if n.State != domain.NodeDraining {
		f.t.Fatalf("node %s not reclaimed: %s", n.Name, n.State)
	}
	return n
}

// waitUndrained waits until the draining node n has left draining and
// fails the test unless it did so within 2 s of its deadline.
func (f *fixture) waitUndrained(n domain.Node) domain.Node {
	f.t.Helper()
	for {
		got, err := f.st.GetNode(f.ctx, n.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		if got.State != domain.NodeDraining {
			if late := time.Since(n.Deadline); late > 2*time.Second {
				f.t.Errorf("%s left draining %s after its deadline", n.Name, late)
			}
			return got
		}
		if late := time.Since(n.Deadline); late > 2*time.Second {
			f.t.Fatalf("%s still draining %s after its deadline", n.Name, late)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) waitNotified(id string) {
	f.t.Helper()
	eventually(f.t, 10*time.Second, func() error {
		if n, _ := f.st.GetNode(f.ctx, id); !n.Notified {
			return errors.New("notice not recorded yet")
		}
		return nil
	})
}

// event is the cluster's last lifecycle event of the node with reason.
func (f *fixture) event(cluster, nodeID string, reason domain.EventReason) (domain.Event, bool) {
	f.t.Helper()
	evs := f.events(cluster)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].NodeID == nodeID && evs[i].Reason == reason {
			return evs[i], true
		}
	}
	return domain.Event{}, false
}

// protectNodes installs a ValidatingAdmissionPolicy and its binding that
// refuse to delete Nodes carrying sparecap's node-id label, and returns a
// function that deletes the binding. Both are deleted when the test ends.
func protectNodes(t *testing.T) (unbind func()) {
	// On a DELETE the object is null: the Node is oldObject.
	return refuse(t, "protect-sparecap-nodes", admissionv1.Delete, "nodes",
		fmt.Sprintf("!has(oldObject.metadata.labels) || !(%q in oldObject.metadata.labels)", domain.LabelNodeID),
		"Nodes managed by sparecap are protected")
}

// refuse installs a ValidatingAdmissionPolicy and its binding that refuse
// op on core resource unless expression holds (the tenant's own policy, as
// Kyverno or Gatekeeper would set), and returns a function that deletes
// the binding. Both are deleted when the test ends.
func refuse(t *testing.T, name string, op admissionv1.OperationType, resource, expression, message string) (unbind func()) {
	t.Helper()
	ctx := context.Background()
	c := env.Client().AdmissionregistrationV1()
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{op},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	unbind = func() {
		if err := c.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	t.Cleanup(func() {
		unbind()
		if err := c.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	if _, err := c.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return unbind
}

// marked says what is missing of the drain's marks on the Node.
func marked(n *corev1.Node, d domain.Node) error {
	if n == nil {
		return errors.New("no Node")
	}
	if !n.Spec.Unschedulable {
		return errors.New("not cordoned")
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == domain.TaintPreempted && t.Value == string(d.DrainCause) && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		return fmt.Errorf("taints %+v", n.Spec.Taints)
	}
	if got, want := n.Annotations[domain.AnnotationDeadline], d.Deadline.UTC().Format(time.RFC3339); got != want {
		return fmt.Errorf("deadline annotation %q, want %q", got, want)
	}
	return nil
}

// tolerateAll makes a pod tolerate every taint (a cordon does not stop a
// pod bound by name either).
func tolerateAll(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

// readsAnnotations mounts the pod's annotations through a Downward API
// volume, as docs/workloads.md shows: its deadline annotation is set.
func readsAnnotations(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "podinfo", VolumeSource: corev1.VolumeSource{
		DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}})
}

// disruption is the pod's DisruptionTarget condition set by sparecap's
// eviction or by sparecap itself, nil if it has none.
func disruption(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue &&
			(c.Reason == domain.ReasonEviction || c.Reason == domain.ReasonDisruption) {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// hasEvent checks that a Kubernetes Event with reason involves the object
// name in namespace (Nodes' Events are in "default").
func hasEvent(ctx context.Context, namespace, name, reason string) error {
	evs, err := env.Client().CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s Event on %s/%s", reason, namespace, name)
}

// podLog records, from a watch of one namespace, every version of a pod
// being deleted (with the time it was seen) and when each pod left.
type podLog struct {
	mu       sync.Mutex
	versions map[string][]podVersion
	all      map[string][]podVersion
	gone     map[string]time.Time
}

type podVersion struct {
	at  time.Time
	pod *corev1.Pod
}

func watchPods(t testing.TB, namespace string) *podLog {
	t.Helper()
	l := &podLog{versions: map[string][]podVersion{}, all: map[string][]podVersion{}, gone: map[string]time.Time{}}
	w, err := env.Client().CoreV1().Pods(namespace).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			l.mu.Lock()
			l.all[p.Name] = append(l.all[p.Name], podVersion{at: now, pod: p})
			switch {
			case ev.Type == watch.Deleted:
				l.gone[p.Name] = now
			case p.DeletionTimestamp != nil:
				l.versions[p.Name] = append(l.versions[p.Name], podVersion{at: now, pod: p})
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// deleting returns the versions of the pod seen being deleted, oldest
// first.
func (l *podLog) deleting(name string) []podVersion {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.versions[name])
}

// annotatedBeforeDeletion reports whether a version of the pod had the
// deadline annotation before any version had a deletion timestamp.
func (l *podLog) annotatedBeforeDeletion(name, deadline string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.all[name] {
		if v.pod.DeletionTimestamp != nil {
			return false
		}
		if v.pod.Annotations[domain.AnnotationDeadline] == deadline {
			return true
		}
	}
	return false
}

// firstSIGTERM waits up to 5 s for the pod's first deletion and returns
// that version of it, failing the test if it got none or got it more than
// 3 s after since (the reclaim).
func (l *podLog) firstSIGTERM(t testing.TB, name string, since time.Time) podVersion {
	t.Helper()
	var first podVersion
	eventually(t, 5*time.Second, func() error {
		vs := l.deleting(name)
		if len(vs) == 0 {
			return fmt.Errorf("pod %s got no SIGTERM", name)
		}
		first = vs[0]
		return nil
	})
	if d := first.at.Sub(since); d > 3*time.Second {
		t.Errorf("pod %s: SIGTERM %s after the reclaim", name, d)
	}
	return first
}

func (l *podLog) goneAt(name string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.gone[name]
	return t, ok
}
