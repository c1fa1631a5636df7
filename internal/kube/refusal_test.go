package kube_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// The notice holds whatever permission a tenant withholds, except
// deleting pods itself: in each test below sparecap's identity is bound
// to the docs' role without one or two permissions, and a reclaim still
// gives every pod its SIGTERM with its grace at once, the node still
// goes as soon as they exit, and the operator finds the missing
// permission named, once for the cluster, in its access record and in a
// PermissionMissing lifecycle event.

// refusalCase is one role a tenant may grant.
type refusalCase struct {
	name string
	// without are left out of the docs' role from the start; revoked are
	// taken away once the nodes are ready (the adoption needs them).
	without, revoked []string
	// condition: the pods still get a DisruptionTarget condition.
	condition bool
}

func TestNoticeWithoutCourtesies(t *testing.T) {
	for _, tc := range []refusalCase{
		// The role the docs gave before the condition and the eviction:
		// what an operator who upgrades still has.
		{name: "old-role", without: []string{"create pods/eviction", "patch pods/status"}},
		{name: "no-eviction", without: []string{"create pods/eviction"}, condition: true},
		{name: "no-status", without: []string{"patch pods/status"}, condition: true},
		{name: "no-pod-patch", without: []string{"patch pods"}, condition: true},
		{name: "no-events", without: []string{"create events"}, condition: true},
		{name: "no-node-patch", revoked: []string{"patch nodes"}, condition: true},
	} {
		t.Run(tc.name, func(t *testing.T) { testNoticeWithout(t, tc) })
	}
}

func testNoticeWithout(t *testing.T, tc refusalCase) {
	const window = 20 * time.Second
	const npods = 3
	ns := "tenant-" + tc.name
	kc, set := grant(t, tc.name, tc.without...)
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}, kubeconfig: kc})
	ctx := f.ctx
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	pods := watchPods(t, ns)
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	missing := append(tc.without, tc.revoked...)
	if len(tc.revoked) > 0 {
		set(tc.revoked...)
	} else {
		// The driver's check at its start found what is missing.
		f.waitAccess("c-k", missing...)
	}
	var names []string
	for i := range npods {
		name := fmt.Sprintf("worker-%d", i)
		names = append(names, name)
		if _, err := kubelet.CreatePods(ctx, env.Client(), ns, pre.Name, 1, 600, podOptions(name, 2*time.Second, false), readsAnnotations); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if got, err := f.router.ListWork(ctx, "c-k", pre.Name); err != nil || len(got) != npods {
			return fmt.Errorf("the pod watch has %d pods, %v", len(got), err)
		}
		return nil
	})

	reclaimed := time.Now()
	drained := f.reclaim(pre.ID)
	for _, name := range names {
		first := pods.firstSIGTERM(t, name, reclaimed)
		// Grace to the deadline (the pod asks for 600 s).
		if g := *first.pod.DeletionGracePeriodSeconds; g < int64((window-5*time.Second)/time.Second) || g > int64(window/time.Second) {
			t.Errorf("pod %s deleted with grace %ds, want about the %s left", name, g, window)
		}
		if c := disruption(first.pod); (c != nil) != tc.condition {
			t.Errorf("pod %s: DisruptionTarget %+v, want one: %v", name, c, tc.condition)
		}
	}
	// They exit 2 s after their SIGTERM: the node goes early.
	f.waitNodes("c-k", domain.Preemptible, domain.NodeRemoved, 1, window)
	got, _ := f.st.GetNode(ctx, pre.ID)
	if got.Outcome != domain.OutcomeEarly || !got.DrainedAt.Before(drained.Deadline.Add(-10*time.Second)) {
		t.Errorf("the drain ended %s at %s, not early (the deadline is %s)", got.Outcome, got.DrainedAt, drained.Deadline)
	}
	// The operator sees what is missing: in the cluster's status, and
	// in one event per permission for the whole cluster.
	f.waitAccess("c-k", missing...)
	for _, perm := range missing {
		n := 0
		for _, e := range f.events("c-k") {
			if e.Reason == domain.ReasonPermissionMissing && strings.Contains(e.Message, perm+" (") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d PermissionMissing events name %s, want 1: %+v", n, perm, f.events("c-k"))
		}
	}
}

// waitAccess waits until the cluster's access record has these missing
// permissions (and no others), each with what it costs the tenant.
func (f *fixture) waitAccess(cluster string, missing ...string) {
	f.t.Helper()
	eventually(f.t, 10*time.Second, func() error {
		cl, err := f.st.GetCluster(f.ctx, cluster)
		if err != nil {
			return err
		}
		var got []string
		for _, m := range cl.Access.Missing {
			if m.Effect == "" || !strings.Contains(m.Effect, "grant ") {
				return fmt.Errorf("%s: no effect and remedy: %q", m.Permission, m.Effect)
			}
			got = append(got, m.Permission)
		}
		if len(got) != len(missing) {
			return fmt.Errorf("access record lists %v missing, want %v", got, missing)
		}
		for _, m := range missing {
			if !cl.Access.Has(m) {
				return fmt.Errorf("access record lists %v missing, want %v", got, missing)
			}
		}
		return nil
	})
}

// TestBudgetDoesNotHoldNotice: a PodDisruptionBudget that allows no
// disruption refuses the pods' evictions; sparecap deletes them
// directly, with its own DisruptionTarget condition, and the node goes
// early all the same.
func TestBudgetDoesNotHoldNotice(t *testing.T) {
	const window = 20 * time.Second
	const ns = "tenant-budget"
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	ctx := f.ctx
	// Running and Ready: a budget guards such pods (a Pending one is
	// evicted whatever its budget says).
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	pods := watchPods(t, ns)
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	if _, err := kubelet.CreatePods(ctx, env.Client(), ns, pre.Name, 1, 600, podOptions("serving", 2*time.Second, false)); err != nil {
		t.Fatal(err)
	}
	zero := intstr.FromInt32(0)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{}}}
	if _, err := env.Client().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The budget refuses an eviction (no controller computes its status
	// here, so it is never satisfied).
	eventually(t, 10*time.Second, func() error {
		err := env.Client().CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "serving", Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
		if err == nil {
			return errors.New("the budget lets an eviction through")
		}
		if !apierrors.IsTooManyRequests(err) {
			return err
		}
		return nil
	})
	time.Sleep(time.Second) // the controller's pod watch has the pod
	reclaimed := time.Now()
	drained := f.reclaim(pre.ID)
	first := pods.firstSIGTERM(t, "serving", reclaimed)
	if c := disruption(first.pod); c == nil || c.Reason != domain.ReasonDisruption || !strings.Contains(c.Message, drained.Deadline.UTC().Format(time.RFC3339)) {
		t.Errorf("the pod was deleted without sparecap's own DisruptionTarget condition and deadline: %+v", first.pod.Status.Conditions)
	}
	f.waitNodes("c-k", domain.Preemptible, domain.NodeRemoved, 1, window)
	if got, _ := f.st.GetNode(ctx, pre.ID); got.Outcome != domain.OutcomeEarly {
		t.Errorf("the drain ended %s, not early", got.Outcome)
	}
}
