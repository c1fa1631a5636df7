package cli

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

const kubeconfigText = "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"

func attached(cl apiv1.Cluster) apiv1.Cluster {
	at := t0.Add(-5 * time.Minute)
	cl.Kubernetes = apiv1.KubernetesStatus{Attached: true, AttachedAt: &at}
	return cl
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prod.kubeconfig")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runStdin is f.run with stdin.
func (f *fakeAPI) runStdin(stdin string, args ...string) result {
	f.t.Helper()
	e := testEnv(map[string]string{"SPARECAP_CONFIG": f.t.TempDir() + "/none.yaml"})
	var out, errb syncBuffer
	root := newRoot(e)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"--url", f.srv.URL, "--token", "tok-1"}, args...))
	err := root.ExecuteContext(context.Background())
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

func TestClustersAttachDetach(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("PUT /v1/admin/clusters/{id}/kubeconfig", 200, attached(cluster("Ready", 0)))
	f.handle("DELETE /v1/admin/clusters/{id}/kubeconfig", 200, cluster("Ready", 0))
	f.handle("GET /v1/clusters/{id}", 200, attached(cluster("Ready", 0)))

	r := f.run("clusters", "attach", "c1", "--kubeconfig", writeFile(t, kubeconfigText))
	if r.err != nil {
		t.Fatalf("attach: %v\n%s", r.err, r.stderr)
	}
	reqs := f.only("PUT", "/v1/admin/clusters/c1/kubeconfig")
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Body, map[string]any{"kubeconfig": kubeconfigText}) {
		t.Fatalf("requests %+v", reqs)
	}
	mustContain(t, "attach output", r.stdout, "ID:                 c1", "Kubernetes:         attached 2025-03-04 09:55:00 (5m0s ago)")

	r = f.runStdin(kubeconfigText, "clusters", "attach", "c1", "--kubeconfig", "-")
	if r.err != nil {
		t.Fatalf("attach from stdin: %v", r.err)
	}
	if reqs := f.only("PUT", "/v1/admin/clusters/c1/kubeconfig"); len(reqs) != 2 || reqs[1].Body["kubeconfig"] != kubeconfigText {
		t.Fatalf("requests %+v", reqs)
	}

	r = f.run("clusters", "detach", "c1")
	if r.err != nil {
		t.Fatalf("detach: %v", r.err)
	}
	if n := len(f.only("DELETE", "/v1/admin/clusters/c1/kubeconfig")); n != 1 {
		t.Fatalf("%d DELETE requests", n)
	}
	mustContain(t, "detach output", r.stdout, "Kubernetes:         not attached")

	r = f.run("clusters", "detach", "c1", "-o", "json")
	mustContain(t, "detach -o json", r.stdout, `"kubernetes": {`, `"attached": false`)
}

func TestClustersAttachBadFile(t *testing.T) {
	f := newFakeAPI(t)
	missing := filepath.Join(t.TempDir(), "nope.kubeconfig")
	empty := writeFile(t, " \n\t\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"clusters", "attach", "c1", "--kubeconfig", missing}, "read kubeconfig: open " + missing + ": no such file or directory"},
		{"empty file", []string{"clusters", "attach", "c1", "--kubeconfig", empty}, "kubeconfig file " + empty + " is empty"},
		{"no flag", []string{"clusters", "attach", "c1"}, `at least one of the flags in the group [kubeconfig slurm-conf] is required`},
		{"both flags", []string{"clusters", "attach", "c1", "--kubeconfig", empty, "--slurm-conf", empty}, `none of the others can be`},
		{"empty slurm.conf", []string{"clusters", "attach", "c1", "--slurm-conf", empty}, "slurm.conf file " + empty + " is empty"},
		{"empty flag", []string{"clusters", "attach", "c1", "--kubeconfig", ""}, "--kubeconfig needs a file name"},
		{"no cluster", []string{"clusters", "attach", "--kubeconfig", empty}, "accepts 1 arg"},
		{"create, missing file", []string{"clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8",
			"--project-id", "p1", "--kubeconfig", missing}, "no such file or directory"},
		{"create, empty file", []string{"clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8",
			"--project-id", "p1", "--kubeconfig", empty}, "is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.run(tc.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", r.err, tc.want)
			}
		})
	}
	if r := f.runStdin("", "clusters", "attach", "c1", "--kubeconfig", "-"); r.err == nil || !strings.Contains(r.err.Error(), "kubeconfig from stdin is empty") {
		t.Fatalf("empty stdin: %v", r.err)
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Fatalf("requests sent: %v", reqs)
	}
}

func TestClustersCreateWithKubeconfig(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("POST /v1/clusters", 201, attached(cluster("WaitingForDataPlaneNodes", 0)))
	r := f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8",
		"--project-id", "p1", "--kubeconfig", writeFile(t, kubeconfigText))
	if r.err != nil {
		t.Fatal(r.err)
	}
	reqs := f.only("POST", "/v1/clusters")
	if len(reqs) != 1 || reqs[0].Body["kubeconfig"] != kubeconfigText || reqs[0].Body["project_id"] != "p1" {
		t.Fatalf("requests %+v", reqs)
	}
	mustContain(t, "stdout", r.stdout, "Kubernetes:         attached")

	// Without --kubeconfig no kubeconfig field is sent.
	r = f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if reqs := f.only("POST", "/v1/clusters"); len(reqs) != 2 || reqs[1].Body["kubeconfig"] != nil {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestClustersAttachRefused(t *testing.T) {
	f := newFakeAPI(t)
	f.sequence("PUT /v1/admin/clusters/{id}/kubeconfig", apiErr(403, "permission_denied", "only an operator (admin token) may attach or detach a kubeconfig"))
	f.sequence("GET /v1/clusters/{id}", apiErr(404, "not_found", `cluster "c9" not found`))
	r := f.run("clusters", "attach", "c1", "--kubeconfig", writeFile(t, kubeconfigText))
	mustContain(t, "stderr", r.stderr,
		"Error: attach kubeconfig to cluster c1: 403 permission_denied: only an operator (admin token) may attach or detach a kubeconfig",
		"admin commands need the admin token")
	r = f.run("clusters", "detach", "c9")
	mustContain(t, "stderr", r.stderr, `Error: detach cluster c9: 404 not_found: cluster "c9" not found`)
}

// TestClustersAttachDetachSlurm: a SLURM cluster's slurm.conf goes to its
// own endpoint, and detach finds it by the cluster's type.
func TestClustersAttachDetachSlurm(t *testing.T) {
	f := newFakeAPI(t)
	at := t0.Add(-5 * time.Minute)
	slurmCl := cluster("Ready", 0)
	slurmCl.ClusterType = "SLURM"
	slurmCl.Slurm = &apiv1.AttachStatus{Attached: true, AttachedAt: &at}
	detached := slurmCl
	detached.Slurm = &apiv1.AttachStatus{}
	f.handle("PUT /v1/admin/clusters/{id}/slurm", 200, slurmCl)
	f.handle("GET /v1/clusters/{id}", 200, slurmCl)
	f.handle("DELETE /v1/admin/clusters/{id}/slurm", 200, detached)
	conf := "ClusterName=tenant\nSlurmctldHost=ctl\n"
	r := f.run("clusters", "attach", "c1", "--slurm-conf", writeFile(t, conf))
	if r.err != nil {
		t.Fatalf("attach: %v\n%s", r.err, r.stderr)
	}
	if reqs := f.only("PUT", "/v1/admin/clusters/c1/slurm"); len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Body, map[string]any{"slurm_conf": conf}) {
		t.Fatalf("requests %+v", reqs)
	}
	mustContain(t, "attach output", r.stdout, "Type:               SLURM", "Slurm:              attached 2025-03-04 09:55:00 (5m0s ago)")
	r = f.run("clusters", "detach", "c1")
	if r.err != nil {
		t.Fatalf("detach: %v", r.err)
	}
	if n := len(f.only("DELETE", "/v1/admin/clusters/c1/slurm")); n != 1 {
		t.Fatalf("%d DELETE requests", n)
	}
	if n := len(f.only("DELETE", "/v1/admin/clusters/c1/kubeconfig")); n != 0 {
		t.Fatalf("%d kubeconfig DELETE requests for a SLURM cluster", n)
	}
	mustContain(t, "detach output", r.stdout, "Slurm:              not attached")
}

func TestKubernetesAndLastErrorColumns(t *testing.T) {
	failing := node("gpu-preemptible-dp-2", "preemptible", "provisioning", nil)
	failing.LastError = "provision hook exited 1:\n\tno route to host"
	f := newFakeAPI(t)
	f.handle("GET /v1/clusters/c1", 200, attached(cluster("Ready", 0, node("gpu-dp-1", "standard", "ready", nil), failing)))
	f.handle("GET /v1/clusters/c2", 200, cluster("Ready", 0, node("gpu-dp-1", "standard", "ready", nil)))
	f.handle("GET /v1/clusters", 200, apiv1.ClusterList{Clusters: []apiv1.Cluster{attached(cluster("Ready", 0))}})

	for _, args := range [][]string{{"nodes", "list", "--cluster", "c1"}, {"clusters", "get", "c1"}} {
		r := f.run(args...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		mustContain(t, strings.Join(args, " "), r.stdout,
			"NAME                   CLASS         STATUS         GPUS   GPU TYPE   AGE    DEADLINE   LAST ERROR",
			"gpu-dp-1               standard      ready          8      H100       3m0s   -          -\n",
			"gpu-preemptible-dp-2   preemptible   provisioning   8      H100       3m0s   -          provision hook exited 1: no route to host\n")
	}
	// No node has an error: no column.
	r := f.run("nodes", "list", "--cluster", "c2")
	if r.err != nil || strings.Contains(r.stdout, "LAST ERROR") {
		t.Fatalf("nodes without errors: %v\n%s", r.err, r.stdout)
	}
	r = f.run("nodes", "list", "--cluster", "c1", "-o", "json")
	mustContain(t, "nodes -o json", r.stdout, `"last_error": "provision hook exited 1:\n\tno route to host"`)

	r = f.run("clusters", "list")
	mustContain(t, "clusters list", r.stdout, "KUBERNETES", "0/16          attached     1h30m")
	mustContain(t, "clusters list", r.stdout, "PREEMPTIBLE   KUBERNETES   AGE")
}

// TestClustersGetShowsAccess: a cluster whose API lacks permissions shows
// each and what it costs; one that has them all says so.
func TestClustersGetShowsAccess(t *testing.T) {
	f := newFakeAPI(t)
	cl := attached(cluster("Ready", 0))
	checked := t0.Add(-time.Minute)
	cl.Access = &apiv1.Access{CheckedAt: &checked, Missing: []apiv1.MissingPermission{
		{Permission: "patch pods/status", Effect: "Jobs count the reclaim as a failure: grant patch on pods/status", Since: checked},
		{Permission: "delete nodes", Essential: true, Effect: "Node objects stay: grant delete on nodes\x1b[31m", Since: checked},
	}}
	f.handle("GET /v1/clusters/{id}", 200, cl)
	r := f.run("clusters", "get", "c1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "get", r.stdout, "Permissions:        2 missing (checked 2025-03-04 09:59:00 (1m0s ago))",
		"patch pods/status (courtesy): Jobs count the reclaim as a failure: grant patch on pods/status",
		"delete nodes (essential): Node objects stay: grant delete on nodes")
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("terminal escape printed: %q", r.stdout)
	}
	g := newFakeAPI(t)
	cl.Access.Missing = nil
	g.handle("GET /v1/clusters/{id}", 200, cl)
	mustContain(t, "get", g.run("clusters", "get", "c1").stdout, "Permissions:        all granted (checked")
}

// TestLeaseEndColumn: a node inside its pool's minimum lease shows when
// the lease ends, counted down; the column is there only when a node has
// a lease.
func TestLeaseEndColumn(t *testing.T) {
	end := t0.Add(7 * time.Minute)
	leased := node("gpu-preemptible-dp-2", "preemptible", "ready", nil)
	leased.LeaseEnd = &end
	f := newFakeAPI(t)
	f.handle("GET /v1/clusters/c1", 200, cluster("Ready", 8, node("gpu-dp-1", "standard", "ready", nil), leased))
	r := f.run("nodes", "list", "--cluster", "c1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "nodes list", r.stdout,
		"NAME                   CLASS         STATUS   GPUS   GPU TYPE   AGE    DEADLINE   LEASE END",
		"gpu-dp-1               standard      ready    8      H100       3m0s   -          -\n",
		"gpu-preemptible-dp-2   preemptible   ready    8      H100       3m0s   -          "+end.Format(time.RFC3339)+" (in 7m0s)\n")
	r = f.run("nodes", "list", "--cluster", "c1", "-o", "json")
	mustContain(t, "nodes -o json", r.stdout, `"lease_end": "`+end.Format(time.RFC3339)+`"`)
}
