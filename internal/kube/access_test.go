package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/kube"
)

// docRole returns the objects docs/kubernetes.md tells operators to
// apply: its ServiceAccount, ClusterRole and ClusterRoleBinding, decoded
// from the very text of the docs.
func docRole(t testing.TB) (corev1.ServiceAccount, rbacv1.ClusterRole, rbacv1.ClusterRoleBinding) {
	t.Helper()
	text, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(text), "```yaml\n")[1:] {
		if b, _, ok := strings.Cut(part, "```"); ok && strings.Contains(b, "kind: ClusterRole\n") {
			block = b
			break
		}
	}
	if block == "" {
		t.Fatal("docs/kubernetes.md has no yaml block with the ClusterRole")
	}
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
	)
	for _, doc := range strings.Split(block, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("docs' role: %v\n%s", err, doc)
		}
		var into any
		switch meta.Kind {
		case "ServiceAccount":
			into = &sa
		case "ClusterRole":
			into = &role
		case "ClusterRoleBinding":
			into = &binding
		default:
			t.Fatalf("docs' role block has a %q", meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("docs' %s: %v", meta.Kind, err)
		}
	}
	if role.Name == "" || sa.Name == "" || binding.Name == "" {
		t.Fatalf("docs' role block lacks an object: %q %q %q", sa.Name, role.Name, binding.Name)
	}
	return sa, role, binding
}

// grants are the (verb, resource) pairs a role grants in the core group.
func grants(role rbacv1.ClusterRole) []string {
	var out []string
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%q %s %s", g, v, res))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDocumentedRoleIsTheDriversList: the role operators copy from the
// docs grants exactly what the driver uses (kube.Permissions), and its
// binding binds it to its service account.
func TestDocumentedRoleIsTheDriversList(t *testing.T) {
	sa, role, binding := docRole(t)
	if got, want := grants(role), grants(kube.ClusterRole()); !slices.Equal(got, want) {
		t.Errorf("the docs' ClusterRole grants\n  %s\nthe driver uses (kube.Permissions)\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("the docs' binding %+v does not bind role %s to %s/%s", binding, role.Name, sa.Namespace, sa.Name)
	}
}

// grant applies the docs' service account, role and binding under names
// of their own (sparecap-<name>), the role without the permissions
// listed ("VERB RESOURCE"), and returns the account's kubeconfig and a
// function that changes what the role leaves out. They are deleted when
// the test ends.
func grant(t testing.TB, name string, without ...string) (kubeconfig []byte, set func(without ...string)) {
	t.Helper()
	ctx := context.Background()
	sa, full, binding := docRole(t)
	name = "sparecap-" + name
	sa.Name, full.Name, binding.Name = name, name, name
	binding.RoleRef.Name, binding.Subjects[0].Name = name, name
	rbac := env.Client().RbacV1()
	roleWithout := func(without []string) *rbacv1.ClusterRole {
		role := full.DeepCopy()
		for i := range role.Rules {
			group := ""
			if g := role.Rules[i].APIGroups; len(g) > 0 && g[0] != "" {
				group = "." + g[0]
			}
			for _, res := range role.Rules[i].Resources {
				role.Rules[i].Verbs = slices.DeleteFunc(role.Rules[i].Verbs, func(v string) bool {
					return slices.Contains(without, v+" "+res+group)
				})
			}
		}
		role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return len(r.Verbs) == 0 })
		return role
	}
	role := roleWithout(without)
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		env.Client().CoreV1().ServiceAccounts(sa.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	kc, err := env.ServiceAccountKubeconfig(ctx, sa.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	client := clientOf(t, kc)
	// RBAC reaches the authorizer through a watch: wait until it says so.
	settled := func(without []string) {
		eventually(t, 10*time.Second, func() error {
			missing, err := kube.CheckAccess(ctx, client, true)
			if err != nil {
				return err
			}
			var got []string
			for _, p := range missing {
				got = append(got, p.String())
			}
			want := slices.Clone(without)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				return fmt.Errorf("the account lacks %v, want %v", got, without)
			}
			return nil
		})
	}
	settled(without)
	return kc, func(without ...string) {
		t.Helper()
		role := roleWithout(without)
		cur, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		role.ResourceVersion = cur.ResourceVersion
		if _, err := rbac.ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		settled(without)
	}
}

func clientOf(t testing.TB, kubeconfig []byte) kubernetes.Interface {
	t.Helper()
	rc, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// t0 is the time checks are stamped with.
func t0() time.Time { return time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC) }

// TestAccessCheck: the docs' role lacks nothing; without an essential
// permission the attach check refuses, naming it and the identity;
// without a courtesy it accepts, and the access record says what the
// tenant loses.
func TestAccessCheck(t *testing.T) {
	ctx := context.Background()
	kc, _ := grant(t, "check-full")
	a, err := kube.CheckKubeconfigAccess(ctx, kc, true, kube.DefaultTimeout, t0())
	if err != nil || len(a.Missing) != 0 || !a.CheckedAt.Equal(t0()) {
		t.Fatalf("the docs' role: %+v, %v", a, err)
	}

	kc, _ = grant(t, "check-no-delete", "delete pods", "delete nodes")
	_, err = kube.CheckKubeconfigAccess(ctx, kc, true, kube.DefaultTimeout, t0())
	if !errors.Is(err, kube.ErrEssentialMissing) || !strings.Contains(err.Error(), "delete nodes, delete pods") ||
		!strings.Contains(err.Error(), "system:serviceaccount:kube-system:sparecap-check-no-delete") {
		t.Fatalf("without delete on pods and nodes: %v", err)
	}

	kc, _ = grant(t, "check-no-status", "patch pods/status")
	a, err = kube.CheckKubeconfigAccess(ctx, kc, true, kube.DefaultTimeout, t0())
	if err != nil || len(a.Missing) != 1 {
		t.Fatalf("without patch on pods/status: %+v, %v", a, err)
	}
	if m := a.Missing[0]; m.Permission != "patch pods/status" || m.Essential || !strings.Contains(m.Effect, "Jobs count") || !m.Since.Equal(t0()) {
		t.Errorf("without patch on pods/status: %+v", m)
	}
	// Register's permissions are asked only for the register provider.
	kc, _ = grant(t, "check-no-register", "create nodes", "update nodes/status")
	if a, err := kube.CheckKubeconfigAccess(ctx, kc, false, kube.DefaultTimeout, t0()); err != nil || len(a.Missing) != 0 {
		t.Errorf("without register's permissions, for another provider: %+v, %v", a, err)
	}
	if _, err := kube.CheckKubeconfigAccess(ctx, kc, true, kube.DefaultTimeout, t0()); !errors.Is(err, kube.ErrEssentialMissing) {
		t.Errorf("without register's permissions, for the register provider: %v", err)
	}

	// A cluster that does not answer cannot be checked.
	_, err = kube.CheckKubeconfigAccess(ctx, []byte(strings.Replace(string(kc), env.RESTConfig().Host, "https://127.0.0.1:1", 1)), true, kube.DefaultTimeout, t0())
	if err == nil || errors.Is(err, kube.ErrEssentialMissing) || apierrors.IsForbidden(err) {
		t.Errorf("an unreachable cluster: %v", err)
	}
}
