package kueuetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/admission"
)

// TestQueuesWithTheDocumentedRoles: attached with the identity the docs
// tell operators to make (docs/kubernetes.md's ClusterRole, and
// docs/queues.md's role for the queue integrations), the check admits the
// docs' Job. With the queues' role taken away, the check's writes are
// refused: that is reported once as a missing permission, and a reclaim
// of the Job's node still gives its pods their notice and lets the node
// go as soon as they exit.
func TestQueuesWithTheDocumentedRoles(t *testing.T) {
	ctx := t.Context()
	for _, s := range []struct{ page, name string }{{"kubernetes.md", "role"}, {"queues.md", "queues-role"}} {
		text, err := docs.Snippet(s.page, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Apply(ctx, []byte(text)); err != nil {
			t.Fatalf("apply docs/%s's %s: %v", s.page, s.name, err)
		}
	}
	rbac := env.Client().RbacV1()
	t.Cleanup(func() {
		for _, n := range []string{"sparecap", "sparecap-queues"} {
			rbac.ClusterRoleBindings().Delete(ctx, n, metav1.DeleteOptions{})
			rbac.ClusterRoles().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	kc, err := env.ServiceAccountKubeconfig(ctx, "kube-system", "sparecap")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, 3, map[string]cluster{"tenant": {Kubeconfig: kc, Client: env.Client(), Kwok: true}})
	w.Start()
	w.Create("tenant", "p", 8, 16, 0)
	apply(t, "kueue-setup")
	w.WaitReady("tenant", 2, 60*time.Second)
	job := submitJob(t, "granted", "1h")
	waitWorkload(t, job, 30*time.Second, "admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	pods := onNodes(t, job, 2)
	if evs := w.Events("tenant", domain.ReasonPermissionMissing); len(evs) != 0 {
		t.Fatalf("with the documented roles, permissions reported missing: %+v", evs)
	}

	// The operator forgets the queues' role.
	if err := rbac.ClusterRoleBindings().Delete(ctx, "sparecap-queues", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Create("other", "q", 8, 0, 0) // reclaims one of the Job's nodes
	draining := w.WaitDraining("tenant", 30*time.Second)
	if !pods[draining.Name] {
		t.Fatalf("reclaimed %s, which runs none of the Job's pods (%v)", draining.Name, pods)
	}
	// The notice is not the check's: the pods get it, and the node goes
	// once they exited.
	kubeenv.Eventually(t, 30*time.Second, func() error {
		n, err := w.Store().GetNode(ctx, draining.ID)
		if err != nil {
			return err
		}
		if n.State != domain.NodeRemoved && n.State != domain.NodeRemoving {
			return fmt.Errorf("node %s is %s", n.Name, n.State)
		}
		if n.Outcome != domain.OutcomeEarly {
			return fmt.Errorf("node %s removed %s, want early: its pods exited after their notice", n.Name, n.Outcome)
		}
		return nil
	})
	list, err := env.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=PreemptionNotified"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatalf("no PreemptionNotified Event on the Job's pods")
	}
	kubeenv.Eventually(t, 30*time.Second, func() error {
		var msgs []string
		for _, e := range w.Events("tenant", domain.ReasonPermissionMissing) {
			msgs = append(msgs, e.Message)
			if strings.Contains(e.Message, "workloads.kueue.x-k8s.io/status") {
				return nil
			}
		}
		return fmt.Errorf("no PermissionMissing event names the check's write: %q", msgs)
	})
}

// TestTheFlavorsPerTypeAreKueues: docs/queues.md's flavors per GPU type
// are objects Kueue takes (its CRDs and webhooks), beside the setup whose
// check they name.
func TestTheFlavorsPerTypeAreKueues(t *testing.T) {
	reset(t)
	t.Cleanup(func() { reset(t) })
	apply(t, "kueue-setup")
	apply(t, "kueue-flavors-per-type")
	cq, err := env.Dynamic().Resource(kueue("clusterqueues")).Get(t.Context(), "by-type", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(cq.Object["spec"].(map[string]any)["resourceGroups"].([]any)[0].(map[string]any)["flavors"].([]any)[1].(map[string]any)["name"]); got != "sparecap-h200" {
		t.Errorf("the ClusterQueue's second flavor is %s", got)
	}
}
