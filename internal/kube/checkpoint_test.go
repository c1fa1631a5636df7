package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// TestCheckpointReportReachesTheDriver, on the real API server: with the
// service account and role of docs/workloads.md, the SDK's reporter
// (preempt.PodReporter, which `sparecap run` uses too), with a token of
// that service account as a pod has, writes the pod's last checkpoint,
// and the driver's load of the node counts the work from it, not from
// the pod's start an hour ago. A service account without the role is
// refused, and nothing changes.
func TestCheckpointReportReachesTheDriver(t *testing.T) {
	const ns = "tenant-ckpt"
	f := newFixture(t, fixtureConfig{machines: 1, window: 30 * time.Second, attached: []string{"c-ckpt"}})
	kl, err := kubelet.Start(f.ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-ckpt", 0, 8)
	node := f.waitNodes("c-ckpt", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	if _, err := kubelet.CreatePods(f.ctx, env.Client(), ns, node.Name, 1, 30, podOptions("train-0", time.Second, false)); err != nil {
		t.Fatal(err)
	}
	applyCheckpointRBAC(t, ns)
	setStarted(t, f, ns, "train-0", time.Now().Add(-time.Hour))
	eventually(t, 10*time.Second, func() error {
		if l := f.router.Load("c-ckpt", node.Name); l.LostGPUSeconds < 3000 {
			return fmt.Errorf("load %+v: the hour since the start not seen yet", l)
		}
		return nil
	})

	if preempt.AnnotationLastCheckpoint != domain.AnnotationLastCheckpoint {
		t.Fatalf("the SDK writes %s, the driver reads %s", preempt.AnnotationLastCheckpoint, domain.AnnotationLastCheckpoint)
	}
	if _, err := env.Client().CoreV1().ServiceAccounts(ns).Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	as := func(sa string) func(context.Context, time.Time) error { return reporter(t, f.ctx, ns, sa, "train-0") }
	var refused *preempt.ReportError
	if err := as("nobody")(f.ctx, time.Now()); !errors.As(err, &refused) || refused.Status != 403 || !strings.Contains(refused.Message, "forbidden") {
		t.Fatalf("a service account without the role: %v, want 403 forbidden", err)
	}
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	if err := as("train-llm")(f.ctx, at); err != nil {
		t.Fatalf("the documented service account: %v", err)
	}
	p, err := env.Client().CoreV1().Pods(ns).Get(f.ctx, "train-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[domain.AnnotationLastCheckpoint]; got != at.UTC().Format(time.RFC3339) {
		t.Fatalf("the pod's %s is %q, want %s", domain.AnnotationLastCheckpoint, got, at.UTC().Format(time.RFC3339))
	}
	eventually(t, 10*time.Second, func() error {
		if l := f.router.Load("c-ckpt", node.Name); l.LostGPUSeconds > 120 || l.LostGPUSeconds < 60 {
			return fmt.Errorf("load %+v, want about a minute of work", l)
		}
		return nil
	})
}

// reporter is the SDK's checkpoint reporter of pod in ns, as service
// account sa.
func reporter(t *testing.T, ctx context.Context, ns, sa, pod string) func(context.Context, time.Time) error {
	t.Helper()
	tok, err := env.Client().CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tok.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	rest := env.RESTConfig()
	rep, err := preempt.NewPodReporter(rest.Host, file, rest.CAData, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Report
}

// TestACheckpointWithinTheNoticeSavesTheWork: a pod that reports a
// checkpoint (through the SDK) after its node's notice and is gone at
// once saved the work the lost-work ledger put at risk at the notice: its
// entry is marked saved at that checkpoint, though no drain pass saw the
// pod with it.
func TestACheckpointWithinTheNoticeSavesTheWork(t *testing.T) {
	const ns = "tenant-ckpt-notice"
	f := newFixture(t, fixtureConfig{machines: 1, window: 30 * time.Second, attached: []string{"c-ckpt2"}})
	kl, err := kubelet.Start(f.ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-ckpt2", 0, 8)
	node := f.waitNodes("c-ckpt2", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	if _, err := kubelet.CreatePods(f.ctx, env.Client(), ns, node.Name, 1, 30, podOptions("train-1", -1, false)); err != nil {
		t.Fatal(err)
	}
	applyCheckpointRBAC(t, ns)
	setStarted(t, f, ns, "train-1", time.Now().Add(-time.Hour))
	eventually(t, 10*time.Second, func() error {
		if l := f.router.Load("c-ckpt2", node.Name); l.WorkGPUSeconds < 3000 {
			return fmt.Errorf("load %+v: the hour since the start not seen yet", l)
		}
		return nil
	})
	report := reporter(t, f.ctx, ns, "train-llm", "train-1")
	drained := f.reclaim(node.ID)
	f.waitNotified(node.ID)
	at := time.Now().Truncate(time.Second)
	if err := report(f.ctx, at); err != nil {
		t.Fatal(err)
	}
	if err := env.Client().CoreV1().Pods(ns).Delete(f.ctx, "train-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	f.waitUndrained(drained)
	entries, err := f.st.ListLostWork(f.ctx, store.LostWorkFilter{ClusterID: "c-ckpt2"})
	if err != nil || len(entries) != 1 {
		t.Fatalf("ledger %+v (%v)", entries, err)
	}
	if e := entries[0]; e.GPUSeconds < 3000 || !e.SavedAt.Equal(at.UTC()) {
		t.Fatalf("the entry %+v: want about an hour at risk, saved at %v", e, at.UTC())
	}
}

// applyCheckpointRBAC creates docs/workloads.md's service account, role
// and binding in ns, from the page's very text.
func applyCheckpointRBAC(t *testing.T, ns string) {
	t.Helper()
	doc, err := docs.Snippet("workloads.md", "checkpoint-rbac")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(doc, "\n---\n")
	if len(parts) != 3 {
		t.Fatalf("the snippet has %d objects, want 3", len(parts))
	}
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	for i, v := range []any{&sa, &role, &binding} {
		if err := yaml.UnmarshalStrict([]byte(parts[i]), v); err != nil {
			t.Fatalf("object %d of the snippet: %v", i+1, err)
		}
	}
	ctx := context.Background()
	c := env.Client()
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
