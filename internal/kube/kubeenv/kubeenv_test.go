package kubeenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

func TestEnv(t *testing.T) {
	e := kubeenv.StartT(t)
	ctx := t.Context()
	c := e.Client()

	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeenv"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kubeenv"},
		Spec: corev1.PodSpec{
			NodeName:   "node-1", // no scheduler: bound at creation
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	created, err := c.CoreV1().Pods("kubeenv").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The real configuration: an etcd of 3.5 or later, and a watch opened
	// at a fresh list's resource version served by the watch cache (with
	// Debian's etcd 3.4 the cache refused it as "too large").
	resp, err := http.Get(e.EtcdURL() + "/version")
	if err != nil {
		t.Fatal(err)
	}
	var ver struct {
		Server string `json:"etcdserver"`
	}
	json.NewDecoder(resp.Body).Decode(&ver)
	resp.Body.Close()
	var major, minor int
	if _, err := fmt.Sscanf(ver.Server, "%d.%d", &major, &minor); err != nil || major < 3 || major == 3 && minor < 5 {
		t.Fatalf("etcd %q: want 3.5 or later", ver.Server)
	}
	list, err := c.CoreV1().Pods("kubeenv").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CoreV1().Pods("kubeenv").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("a watch from a fresh list: %v", err)
	}
	w.Stop()
	got, err := c.CoreV1().Pods("kubeenv").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "node-1" || got.UID != created.UID {
		t.Fatalf("got pod on %q uid %s, want node-1 uid %s", got.Spec.NodeName, got.UID, created.UID)
	}

	// The kubeconfig alone is enough to reach the cluster as admin.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(e.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Pods("kubeenv").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatalf("client from kubeconfig: %v", err)
	}
	// RBAC is on (system:masters passes it); an unknown token is refused.
	bad := e.RESTConfig()
	bad.BearerToken = "nope"
	if _, err := kubernetes.NewForConfigOrDie(bad).CoreV1().Pods("kubeenv").List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("a wrong token was accepted")
	}

	// Restarting kube-apiserver keeps the data (etcd keeps running), the
	// address and the certificates: the same clients work afterwards.
	if err := e.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = c.CoreV1().Pods("kubeenv").Get(short, "p", metav1.GetOptions{})
	cancel()
	if err == nil {
		t.Fatal("kube-apiserver answered while stopped")
	}
	if err := e.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	for _, client := range []kubernetes.Interface{c, kc} {
		got, err = client.CoreV1().Pods("kubeenv").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		if got.UID != created.UID {
			t.Fatalf("after restart uid %s, want %s", got.UID, created.UID)
		}
	}

	// Close stops both processes and is idempotent (StartT's cleanup
	// closes again).
	apiHost := mustHost(t, e.RESTConfig().Host)
	etcdHost := mustHost(t, e.EtcdURL())
	dir := e.Dir()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{apiHost, etcdHost} {
		if conn, err := net.DialTimeout("tcp", h, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Close", h)
		}
	}
	if _, err := http.Get(e.EtcdURL() + "/health"); err == nil {
		t.Error("etcd still answers after Close")
	}
	if m, _ := filepath.Glob(dir); len(m) != 0 {
		t.Errorf("%s still exists after Close", dir)
	}
}

func mustHost(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// The Go lookup must find the same binary the build script produces.
func TestAPIServerPathMatchesScript(t *testing.T) {
	t.Setenv("SPARECAP_KUBE_APISERVER", "")
	out, err := exec.Command("../../../scripts/kube-apiserver-path.sh").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(out))
	got, err := kubeenv.APIServerPath()
	if err != nil {
		t.Fatal(err) // also when the binary is missing: run scripts/ensure-kube.sh
	}
	if got != want {
		t.Fatalf("APIServerPath() = %s, script says %s", got, want)
	}

	t.Setenv("SPARECAP_KUBE_APISERVER", filepath.Join(t.TempDir(), "missing"))
	if _, err := kubeenv.APIServerPath(); err == nil || !strings.Contains(err.Error(), "scripts/ensure-kube.sh") {
		t.Fatalf("missing binary: error %v should say how to get it", err)
	}
}
