package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/store"
)

// The API server address and credential of testKubeconfig: neither may
// ever appear in a response.
const (
	kubeHost  = "k8s-api.tenant.internal"
	kubeToken = "kube-bearer-token-7f3a9c"
)

var testKubeconfig = fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://%s:6443
    certificate-authority-data: Y2VydA==
contexts:
- name: prod
  context: {cluster: prod, user: sparecap}
users:
- name: sparecap
  user:
    token: %s
current-context: prod
`, kubeHost, kubeToken)

// kubeEnv is an env whose server seals kubeconfigs and records the
// OnKubeconfig calls.
type kubeEnv struct {
	*env
	sealer *secret.Sealer
	mu     sync.Mutex
	calls  []string
}

func newKubeEnv(t *testing.T) *kubeEnv {
	t.Helper()
	return newKubeEnvOpts(t, Options{})
}

// newKubeEnvOpts is newKubeEnv with opts; Sealer and OnKubeconfig are set
// here.
func newKubeEnvOpts(t *testing.T, opts Options) *kubeEnv {
	t.Helper()
	sealer, err := secret.NewSealer(bytes.Repeat([]byte{3}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	k := &kubeEnv{sealer: sealer}
	opts.Sealer = sealer
	opts.OnKubeconfig = func(id string) {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.calls = append(k.calls, id)
	}
	k.env = newEnvOpts(t, opts)
	return k
}

func (k *kubeEnv) reloads() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// stored returns the kubeconfig the store holds for a cluster, opened.
func (k *kubeEnv) stored(id string) string {
	k.t.Helper()
	sealed, err := k.st.GetKubeconfig(k.ctx, id)
	if err != nil {
		k.t.Fatal(err)
	}
	if sealed == nil {
		return ""
	}
	if bytes.Contains(sealed, []byte(kubeToken)) || bytes.Contains(sealed, []byte(kubeHost)) {
		k.t.Fatal("the store holds the kubeconfig unsealed")
	}
	text, err := k.sealer.Open(sealed, id)
	if err != nil {
		k.t.Fatal(err)
	}
	return string(text)
}

func attachBody(kubeconfig string) string {
	return fmt.Sprintf(`{"kubeconfig":%q}`, kubeconfig)
}

// mustNotLeak fails if a response body contains the kubeconfig or any
// part of its server address or credential.
func mustNotLeak(t *testing.T, what string, body []byte) {
	t.Helper()
	for _, secret := range []string{kubeHost, kubeToken, "6443", "current-context", "certificate-authority", "Y2VydA=="} {
		if bytes.Contains(body, []byte(secret)) {
			t.Fatalf("%s contains %q:\n%s", what, secret, body)
		}
	}
}

func kubeconfigPath(id string) string { return "/v1/admin/clusters/" + id + "/kubeconfig" }

func TestKubeconfigAttachDetach(t *testing.T) {
	e := newKubeEnv(t)
	c := e.create("p", createBody)
	if c.Kubernetes.Attached || c.Kubernetes.AttachedAt != nil {
		t.Fatalf("new cluster: %+v", c.Kubernetes)
	}
	raw := e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, nil)
	if !bytes.Contains(raw, []byte(`"kubernetes":{`)) || !bytes.Contains(raw, []byte(`"attached":false`)) || bytes.Contains(raw, []byte("attached_at")) {
		t.Fatalf("detached cluster JSON:\n%s", raw)
	}

	var got apiv1.Cluster
	raw = e.do("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 200, &got)
	mustNotLeak(t, "attach response", raw)
	if got.ClusterID != c.ClusterID || !got.Kubernetes.Attached || got.Kubernetes.AttachedAt == nil || !got.Kubernetes.AttachedAt.Equal(e.clk.Now()) {
		t.Fatalf("attached: %+v", got.Kubernetes)
	}
	if text := e.stored(c.ClusterID); text != testKubeconfig {
		t.Fatalf("stored kubeconfig:\n%s", text)
	}
	if r := e.reloads(); len(r) != 1 || r[0] != c.ClusterID {
		t.Fatalf("OnKubeconfig calls %v", r)
	}

	// Everyone who sees the cluster sees that it is attached, and nothing
	// of the kubeconfig: not its text, not its server.
	for _, who := range []string{"p", "admin"} {
		raw = e.do(who, "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
		mustNotLeak(t, who+" GET cluster", raw)
		if !got.Kubernetes.Attached || got.Kubernetes.AttachedAt == nil {
			t.Fatalf("%s sees %+v", who, got.Kubernetes)
		}
		var list apiv1.ClusterList
		raw = e.do(who, "GET", "/v1/clusters", "", 200, &list)
		mustNotLeak(t, who+" GET clusters", raw)
		if len(list.Clusters) != 1 || !list.Clusters[0].Kubernetes.Attached {
			t.Fatalf("%s lists %+v", who, list.Clusters)
		}
	}
	e.apiErr("q", "GET", "/v1/clusters/"+c.ClusterID, "", 404)

	// Attaching again replaces the kubeconfig.
	e.clk.Step(60e9)
	other := strings.Replace(testKubeconfig, "sparecap\n", "sparecap-2\n", 1)
	other = strings.Replace(other, "user: sparecap}", "user: sparecap-2}", 1)
	e.do("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(other), 200, &got)
	if e.stored(c.ClusterID) != other || !got.Kubernetes.AttachedAt.Equal(e.clk.Now()) {
		t.Fatalf("replaced: %+v", got.Kubernetes)
	}

	got = apiv1.Cluster{}
	raw = e.do("admin", "DELETE", kubeconfigPath(c.ClusterID), "", 200, &got)
	if got.Kubernetes.Attached || got.Kubernetes.AttachedAt != nil || bytes.Contains(raw, []byte("attached_at")) {
		t.Fatalf("detached: %s", raw)
	}
	if text := e.stored(c.ClusterID); text != "" {
		t.Fatalf("kubeconfig left after detach:\n%s", text)
	}
	// Detaching again is harmless.
	e.do("admin", "DELETE", kubeconfigPath(c.ClusterID), "", 200, &got)
	if r := e.reloads(); len(r) != 4 {
		t.Fatalf("OnKubeconfig calls %v, want one per attach and detach", r)
	}
}

func TestKubeconfigProjectTokenRefused(t *testing.T) {
	e := newKubeEnv(t)
	c := e.create("p", createBody)
	for _, method := range []string{"PUT", "DELETE"} {
		for _, who := range []string{"p", "q"} {
			got := e.apiErr(who, method, kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 403)
			if got.Code != apiv1.CodeForbidden || !strings.Contains(got.Message, "only an operator (admin token) may attach or detach a kubeconfig") {
				t.Fatalf("%s %s: %+v", who, method, got)
			}
		}
	}
	e.apiErr("", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 401)
	if e.stored(c.ClusterID) != "" || len(e.reloads()) != 0 {
		t.Fatal("a refused request changed something")
	}
	// The Slurm route's 403 names what it attaches.
	for _, method := range []string{"PUT", "DELETE"} {
		got := e.apiErr("p", method, "/v1/admin/clusters/"+c.ClusterID+"/slurm", `{"slurm_conf":"x"}`, 403)
		if got.Message != "only an operator (admin token) may attach or detach a slurm.conf" {
			t.Errorf("%s slurm: %+v", method, got)
		}
	}
}

func TestKubeconfigValidation(t *testing.T) {
	e := newKubeEnv(t)
	c := e.create("p", createBody)
	withCluster := func(cluster string) string {
		return strings.Replace(testKubeconfig, "    server: https://"+kubeHost+":6443\n    certificate-authority-data: Y2VydA==\n", cluster, 1)
	}
	cases := []struct {
		name, body, want string
	}{
		{"no body", "", "request body is empty"},
		{"not JSON", "kubeconfig: x", "malformed JSON"},
		{"unknown field", `{"kubeconfig":"x","server":"y"}`, `unknown field "server"`},
		{"empty kubeconfig", attachBody(""), "kubeconfig: it is empty"},
		{"bad YAML", attachBody("apiVersion: v1\nclusters: [\n"), "kubeconfig: not a valid kubeconfig: yaml"},
		{"not a kubeconfig", attachBody("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"), `kubeconfig: not a valid kubeconfig: no kind "Pod"`},
		{"a YAML list", attachBody("- a\n- b\n"), "kubeconfig: not a valid kubeconfig"},
		{"no current context", attachBody(strings.Replace(testKubeconfig, "current-context: prod\n", "", 1)), "it has no current-context"},
		{"unknown current context", attachBody(strings.Replace(testKubeconfig, "current-context: prod", "current-context: staging", 1)), `current-context "staging" is not one of its contexts ("prod")`},
		{"unknown cluster", attachBody(strings.Replace(testKubeconfig, "{cluster: prod,", "{cluster: dev,", 1)), `names cluster "dev", which is not one of its clusters ("prod")`},
		{"no server", attachBody(withCluster("    insecure-skip-tls-verify: true\n")), `cluster "prod" has no server`},
		{"bad server", attachBody(withCluster("    server: ftp://example.org\n")), "not an http(s)://HOST[:PORT] address"},
		{"CA file", attachBody(withCluster("    server: https://a.example:6443\n    certificate-authority: /etc/kubernetes/ca.crt\n")),
			"certificate-authority of cluster prod is a file path (/etc/kubernetes/ca.crt)"},
		{"token file", attachBody(strings.Replace(testKubeconfig, "token: "+kubeToken, "tokenFile: /var/run/token", 1)), "tokenFile of user sparecap is a file path"},
		{"client key file", attachBody(strings.Replace(testKubeconfig, "token: "+kubeToken, "client-key: key.pem", 1)), "client-key of user sparecap is a file path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := e.apiErr("admin", "PUT", kubeconfigPath(c.ClusterID), tc.body, 400)
			if got.Code != apiv1.CodeInvalid || !strings.Contains(got.Message, tc.want) {
				t.Fatalf("got %+v\nwant a message with %q", got, tc.want)
			}
			if strings.HasPrefix(got.Message, "kubeconfig:") && got.Field != "kubeconfig" {
				t.Fatalf("field %q", got.Field)
			}
		})
	}
	if e.stored(c.ClusterID) != "" || len(e.reloads()) != 0 {
		t.Fatal("a refused kubeconfig was stored")
	}
}

// pluginKubeconfigs are kubeconfigs that would run code on the server or
// send its traffic elsewhere, each with the field its refusal names.
var pluginKubeconfigs = []struct{ name, kubeconfig, field string }{
	{"exec", strings.Replace(testKubeconfig, "    token: "+kubeToken+"\n",
		"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, 'echo $SPARECAP_ADMIN_TOKEN']\n      interactiveMode: Never\n", 1),
		`user "sparecap" has an exec credential plugin (users[].user.exec)`},
	{"auth-provider", strings.Replace(testKubeconfig, "    token: "+kubeToken+"\n",
		"    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: 'https://issuer.example'}\n", 1),
		`user "sparecap" has an auth-provider (users[].user.auth-provider)`},
	{"proxy-url", strings.Replace(testKubeconfig, "    certificate-authority-data: Y2VydA==\n",
		"    certificate-authority-data: Y2VydA==\n    proxy-url: 'http://proxy.example:3128'\n", 1),
		`cluster "prod" has a proxy-url (clusters[].cluster.proxy-url)`},
	// Not only the current context's entries: every one in the file.
	{"exec in another user", strings.Replace(testKubeconfig, "users:\n",
		"users:\n- name: spare\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, interactiveMode: Never}\n", 1),
		`user "spare" has an exec credential plugin`},
}

// TestKubeconfigPluginsRefused: exec plugins, auth-providers and
// proxy-urls are refused with a 400 naming the field, on attach and on
// create, and nothing is stored.
func TestKubeconfigPluginsRefused(t *testing.T) {
	e := newKubeEnv(t)
	c := e.create("p", createBody)
	for _, tc := range pluginKubeconfigs {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct{ method, path, body string }{
				{"PUT", kubeconfigPath(c.ClusterID), attachBody(tc.kubeconfig)},
				{"POST", "/v1/clusters", createWithKubeconfig("p", tc.kubeconfig)},
			} {
				got := e.apiErr("admin", req.method, req.path, req.body, 400)
				if got.Code != apiv1.CodeInvalid || got.Field != "kubeconfig" || !strings.HasPrefix(got.Message, "kubeconfig: ") ||
					!strings.Contains(got.Message, tc.field) || !strings.Contains(got.Message, "--allow-kubeconfig-plugins") {
					t.Fatalf("%s %s: got %+v\nwant a 400 for field kubeconfig naming %q and the flag", req.method, req.path, got, tc.field)
				}
			}
		})
	}
	if e.stored(c.ClusterID) != "" || len(e.reloads()) != 0 {
		t.Fatal("a refused kubeconfig was stored")
	}
	if cs, _ := e.st.ListClusters(e.ctx, ""); len(cs) != 1 {
		t.Fatalf("refused creates left clusters: %+v", cs)
	}
}

// TestKubeconfigPluginsAllowed: a server told to allow them stores them.
func TestKubeconfigPluginsAllowed(t *testing.T) {
	e := newKubeEnvOpts(t, Options{AllowKubeconfigPlugins: true})
	c := e.create("p", createBody)
	for _, tc := range pluginKubeconfigs {
		e.do("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(tc.kubeconfig), 200, nil)
		if e.stored(c.ClusterID) != tc.kubeconfig {
			t.Fatalf("%s: not stored", tc.name)
		}
	}
}

// TestKubeconfigBoundToCluster: the stored kubeconfig is sealed for its
// cluster; copied onto another cluster's row it does not open.
func TestKubeconfigBoundToCluster(t *testing.T) {
	e := newKubeEnv(t)
	a := e.create("p", createBody)
	var b apiv1.Cluster
	// b gets its kubeconfig at creation, a by an attach.
	e.do("admin", "POST", "/v1/clusters", strings.Replace(createWithKubeconfig("p", testKubeconfig), `"train"`, `"infer"`, 1), 201, &b)
	e.do("admin", "PUT", kubeconfigPath(a.ClusterID), attachBody(testKubeconfig), 200, nil)
	for _, id := range []string{a.ClusterID, b.ClusterID} {
		if e.stored(id) != testKubeconfig {
			t.Fatalf("cluster %s: kubeconfig not stored", id)
		}
	}
	sealedA, err := e.st.GetKubeconfig(e.ctx, a.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sealer.Open(sealedA, b.ClusterID); !errors.Is(err, secret.ErrOpen) {
		t.Fatalf("cluster %s's kubeconfig opened for %s: err = %v, want secret.ErrOpen", a.ClusterID, b.ClusterID, err)
	}
	// Copied onto b's row, it does not open there either.
	err = e.st.Update(e.ctx, func(tx store.Tx) error { return tx.SetKubeconfig(e.ctx, b.ClusterID, sealedA, e.clk.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.st.GetKubeconfig(e.ctx, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sealer.Open(got, b.ClusterID); !errors.Is(err, secret.ErrOpen) {
		t.Fatalf("a copied kubeconfig opened: err = %v", err)
	}
}

func TestKubeconfigUnknownCluster(t *testing.T) {
	e := newKubeEnv(t)
	for _, method := range []string{"PUT", "DELETE"} {
		got := e.apiErr("admin", method, kubeconfigPath("c-nope"), attachBody(testKubeconfig), 404)
		if got.Code != apiv1.CodeNotFound || got.Message != `cluster "c-nope" not found` {
			t.Fatalf("%s: %+v", method, got)
		}
	}
	e.apiErr("admin", "GET", kubeconfigPath("c-nope"), "", 405) // the kubeconfig cannot be read back
	if len(e.reloads()) != 0 {
		t.Fatal("OnKubeconfig called for an unknown cluster")
	}
}

func TestKubeconfigWithoutSealer(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	got := e.apiErr("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 503)
	if got.Code != apiv1.CodeUnavailable || !strings.Contains(got.Message, "without a secret key") {
		t.Fatalf("%+v", got)
	}
	body := strings.Replace(createBody, `"cluster_name":"train"`, `"cluster_name":"other","project_id":"p","kubeconfig":`+fmt.Sprintf("%q", testKubeconfig), 1)
	e.apiErr("admin", "POST", "/v1/clusters", body, 503)
	e.do("admin", "DELETE", kubeconfigPath(c.ClusterID), "", 200, nil)
	var list apiv1.ClusterList
	e.do("admin", "GET", "/v1/clusters", "", 200, &list)
	if len(list.Clusters) != 1 {
		t.Fatalf("clusters %+v", list.Clusters)
	}
}

func createWithKubeconfig(project, kubeconfig string) string {
	return strings.Replace(createBody, `"cluster_name":"train"`,
		fmt.Sprintf(`"cluster_name":"train","project_id":%q,"kubeconfig":%q`, project, kubeconfig), 1)
}

func TestCreateClusterWithKubeconfig(t *testing.T) {
	e := newKubeEnv(t)

	// A project token may not attach, not even to its own new cluster;
	// nothing is created.
	got := e.apiErr("p", "POST", "/v1/clusters", createWithKubeconfig("p", testKubeconfig), 403)
	if got.Code != apiv1.CodeForbidden || got.Message != "only an operator (admin token) may attach a kubeconfig" {
		t.Fatalf("%+v", got)
	}
	// A bad kubeconfig creates nothing either.
	got = e.apiErr("admin", "POST", "/v1/clusters", createWithKubeconfig("p", "apiVersion: v1\nkind: Config\n"), 400)
	if got.Field != "kubeconfig" || !strings.Contains(got.Message, "no current-context") {
		t.Fatalf("%+v", got)
	}
	if cs, _ := e.st.ListClusters(e.ctx, ""); len(cs) != 0 {
		t.Fatalf("refused creates left clusters: %+v", cs)
	}

	var c apiv1.Cluster
	raw := e.do("admin", "POST", "/v1/clusters", createWithKubeconfig("p", testKubeconfig), 201, &c)
	mustNotLeak(t, "create response", raw)
	if c.ProjectID != "p" || !c.Kubernetes.Attached || c.Kubernetes.AttachedAt == nil {
		t.Fatalf("created: %+v", c)
	}
	if e.stored(c.ClusterID) != testKubeconfig {
		t.Fatal("kubeconfig not stored")
	}
	if r := e.reloads(); len(r) != 1 || r[0] != c.ClusterID {
		t.Fatalf("OnKubeconfig calls %v", r)
	}
	raw = e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &c)
	mustNotLeak(t, "tenant GET", raw)
	if !c.Kubernetes.Attached {
		t.Fatalf("tenant sees %+v", c.Kubernetes)
	}
}

// TestNodeLastError: a node's last error is shown, with the cluster's API
// server address masked.
func TestNodeLastError(t *testing.T) {
	e := newKubeEnv(t)
	c := e.create("p", createBody)
	e.do("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 200, nil)
	nodes, err := e.st.ListNodes(e.ctx, store.NodeFilter{ClusterID: c.ClusterID})
	if err != nil || len(nodes) < 2 {
		t.Fatalf("nodes %v, %v", nodes, err)
	}
	failing := map[string]string{
		nodes[0].ID: `Get "https://` + kubeHost + `:6443/api/v1/nodes/gpu-dp-1": dial tcp ` + kubeHost + `:6443: connect: connection refused`,
		nodes[1].ID: "provision hook exited 2: no such machine (see https://hooks.example.org/runs/17)",
	}
	err = e.st.Update(e.ctx, func(tx store.Tx) error {
		for _, n := range nodes[:2] {
			n.LastError = failing[n.ID]
			if err := tx.UpdateNode(e.ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got apiv1.Cluster
	raw := e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	mustNotLeak(t, "cluster with failing nodes", raw)
	want := map[string]string{
		nodes[0].ID: `Get "[cluster API]/api/v1/nodes/gpu-dp-1": dial tcp [cluster API]: connect: connection refused`,
		nodes[1].ID: "provision hook exited 2: no such machine (see [URL])",
	}
	seen := 0
	for _, n := range got.GPUWorkerNodes {
		if w, ok := want[n.NodeID]; ok {
			seen++
			if n.LastError != w {
				t.Errorf("last_error of %s = %q, want %q", n.NodeName, n.LastError, w)
			}
		} else if n.LastError != "" {
			t.Errorf("node %s without an error shows %q", n.NodeName, n.LastError)
		}
	}
	if bytes.Contains(raw, []byte(`"last_error":""`)) {
		t.Errorf("an empty last_error is not omitted:\n%s", raw)
	}
	if seen != 2 {
		t.Fatalf("nodes %+v", got.GPUWorkerNodes)
	}
	var list apiv1.ClusterList
	raw = e.do("admin", "GET", "/v1/clusters", "", 200, &list)
	mustNotLeak(t, "cluster list with failing nodes", raw)
	if !bytes.Contains(raw, []byte(`"last_error":"provision hook exited 2`)) {
		t.Fatalf("list lacks last_error:\n%s", raw)
	}
}

// TestKubeconfigAccessChecked: an attach asks the cluster what the
// kubeconfig's identity may do (Options.CheckAccess) before it stores
// anything. Refused, nothing is stored and the message masks the API
// server's address; with courtesies missing, the access record and a
// PermissionMissing event say so, to the tenant too; a detach clears it.
func TestKubeconfigAccessChecked(t *testing.T) {
	var answer error
	missing := []domain.MissingPermission{{Permission: "patch pods/status", Effect: "Jobs count it: grant patch on pods/status"}}
	e := newKubeEnvOpts(t, Options{CheckAccess: func(_ context.Context, kc []byte) (domain.Access, error) {
		if string(kc) != testKubeconfig {
			t.Errorf("checked %q", kc)
		}
		if answer != nil {
			return domain.Access{}, answer
		}
		a, _ := domain.Access{}.Merge(true, missing, time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
		return a, nil
	}})
	c := e.create("p", createBody)

	answer = fmt.Errorf("%w: delete pods (identity sa)", kube.ErrEssentialMissing)
	got := e.apiErr("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 400)
	if got.Field != "kubeconfig" || !strings.Contains(got.Message, "delete pods") || strings.Contains(got.Message, "must answer") {
		t.Fatalf("%+v", got)
	}
	answer = fmt.Errorf("cannot check: Post \"https://%s:6443/apis/authorization.k8s.io/v1/selfsubjectaccessreviews\": dial tcp %s:6443: i/o timeout", kubeHost, kubeHost)
	got = e.apiErr("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 400)
	raw, _ := json.Marshal(got)
	mustNotLeak(t, "refused attach", raw)
	if !strings.Contains(got.Message, "[cluster API]") || !strings.Contains(got.Message, "must answer") {
		t.Fatalf("%+v", got)
	}
	got = e.apiErr("admin", "POST", "/v1/clusters", createWithKubeconfig("p", testKubeconfig), 400)
	if cs, _ := e.st.ListClusters(e.ctx, ""); len(cs) != 1 || e.stored(c.ClusterID) != "" || len(e.reloads()) != 0 {
		t.Fatalf("refused attaches stored something: %+v, %v", cs, e.reloads())
	}

	answer = nil
	var cl apiv1.Cluster
	e.do("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 200, &cl)
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &cl)
	if a := cl.Access; a == nil || a.CheckedAt == nil || len(a.Missing) != 1 || a.Missing[0].Permission != "patch pods/status" || a.Missing[0].Essential {
		t.Fatalf("tenant sees access %+v", cl.Access)
	}
	evs, err := e.st.ListEvents(e.ctx, store.EventFilter{ClusterID: c.ClusterID})
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Reason != domain.ReasonPermissionMissing || !strings.Contains(evs[len(evs)-1].Message, "patch pods/status (courtesy): Jobs count it") {
		t.Fatalf("events %+v, %v", evs, err)
	}
	var detached apiv1.Cluster
	raw = e.do("admin", "DELETE", kubeconfigPath(c.ClusterID), "", 200, &detached)
	if detached.Access != nil || bytes.Contains(raw, []byte(`"access"`)) {
		t.Fatalf("detached cluster keeps access: %s", raw)
	}
}
