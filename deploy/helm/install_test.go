package helm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInstallUpgradeKeepsSecrets installs a release in the test API server
// (nothing runs its pods: there is no kubelet), upgrades it and installs it
// again after an uninstall, and checks that the secret key and the admin
// token the chart generated stay the same throughout: every replica, old
// and new, must read the same ones, and kubeconfigs sealed under the key
// must still open.
func TestInstallUpgradeKeepsSecrets(t *testing.T) {
	const ns = "install"
	createNamespace(t, ns)
	c := clients(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secrets := func() (key, token string) {
		t.Helper()
		k, err := c.typed.CoreV1().Secrets(ns).Get(ctx, fullname+"-secret-key", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := c.typed.CoreV1().Secrets(ns).Get(ctx, fullname+"-admin-token", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(k.Data["secret.key"]) != 32 || !strings.HasPrefix(string(tok.Data["token"]), "sc_") {
			t.Fatalf("secret key of %d bytes, admin token %q; want 32 bytes and sc_...", len(k.Data["secret.key"]), tok.Data["token"])
		}
		return string(k.Data["secret.key"]), string(tok.Data["token"])
	}
	pg := "postgres.url=" + postgresURL
	mustHelm := func(args ...string) string {
		t.Helper()
		out, _, err := helm(t, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}

	out := mustHelm("install", release, chartDir, "-n", ns, "--set", pg)
	key, token := secrets()
	// The notes tell how to reach the API and the console, and where the
	// admin token is.
	for _, want := range []string{
		"kubectl -n install port-forward service/rel-sparecap 8407:8407",
		"http://127.0.0.1:8407/console/",
		"http://rel-sparecap.install.svc:8407",
		"kubectl -n install get secret rel-sparecap-admin-token -o jsonpath='{.data.token}' | base64 -d",
		"Secret rel-sparecap-secret-key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install's notes lack %q:\n%s", want, out)
		}
	}
	t.Logf("helm install printed:\n%s", out)

	mustHelm("upgrade", release, chartDir, "-n", ns, "--set", pg, "--set", "replicaCount=2")
	if k, tok := secrets(); k != key || tok != token {
		t.Error("helm upgrade changed the generated secret key or admin token")
	}
	d, err := c.typed.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("after the upgrade, replicas = %v; want 2", d.Spec.Replicas)
	}

	mustHelm("uninstall", release, "-n", ns)
	if _, err := c.typed.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, the Deployment: %v; want it gone", err)
	}
	if _, err := c.typed.CoreV1().Secrets(ns).Get(ctx, fullname+"-postgres", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, the postgres Secret: %v; want it gone", err)
	}
	if k, tok := secrets(); k != key || tok != token {
		t.Error("helm uninstall changed the generated secret key or admin token")
	}

	out = mustHelm("install", release, chartDir, "-n", ns, "--set", pg, "--set", "podDisruptionBudget.minAvailable=3",
		"--set", "ingress.enabled=true", "--set", "ingress.tls[0].secretName=tls", "--set", "ingress.tls[0].hosts[0]=sparecap.example.com")
	for _, want := range []string{
		"WARNING: podDisruptionBudget.minAvailable (3) is not below replicaCount (3)",
		"Through the Ingress: https://sparecap.example.com/  (console: https://sparecap.example.com/console/)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install's notes lack %q:\n%s", want, out)
		}
	}
	if k, tok := secrets(); k != key || tok != token {
		t.Error("installing again after an uninstall did not reuse the kept secret key and admin token")
	}
}
