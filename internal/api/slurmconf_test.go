package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/slurm"
)

const slurmCreateBody = `{"cluster_name":"hpc","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"SLURM","num_gpus":8,"num_preemptible_gpus":16}`

const testSlurmConf = "ClusterName=tenant\nSlurmctldHost=ctl-secret-host\nAuthInfo=socket=/run/sparecap/tenant/munge.socket\n"

func slurmPath(id string) string { return "/v1/admin/clusters/" + id + "/slurm" }

func slurmBody(conf string) string { return fmt.Sprintf(`{"slurm_conf":%q}`, conf) }

// TestSlurmAttachDetach: a SLURM cluster is created as any other, its
// slurm.conf is checked, stored sealed, never returned, and shown as
// attached; a Kubernetes cluster takes no slurm.conf and a SLURM cluster
// no kubeconfig.
func TestSlurmAttachDetach(t *testing.T) {
	var checked []string
	e := newKubeEnvOpts(t, Options{CheckSlurm: func(ctx context.Context, conf []byte) error {
		checked = append(checked, string(conf))
		if strings.Contains(string(conf), "down-host") {
			return errors.New("slurmctld did not answer: Unable to contact slurm controller (connect failure)")
		}
		return nil
	}})
	c := e.create("p", slurmCreateBody)
	if c.ClusterType != "SLURM" || c.Slurm == nil || c.Slurm.Attached || c.Kubernetes.Attached {
		t.Fatalf("new SLURM cluster: %+v %+v", c.Slurm, c.Kubernetes)
	}
	var got apiv1.Cluster
	raw := e.do("admin", "PUT", slurmPath(c.ClusterID), slurmBody(testSlurmConf), 200, &got)
	if bytes.Contains(raw, []byte("ctl-secret-host")) || bytes.Contains(raw, []byte("munge.socket")) {
		t.Fatalf("the response shows the slurm.conf:\n%s", raw)
	}
	if got.Slurm == nil || !got.Slurm.Attached || got.Slurm.AttachedAt == nil || got.Kubernetes.Attached {
		t.Fatalf("attached: %+v", got.Slurm)
	}
	if e.stored(c.ClusterID) != testSlurmConf || len(checked) != 1 {
		t.Fatalf("stored %q, checked %d", e.stored(c.ClusterID), len(checked))
	}
	if r := e.reloads(); len(r) != 1 || r[0] != c.ClusterID {
		t.Fatalf("reloads %v", r)
	}
	// Refused, changing nothing: a slurmctld that does not answer, an
	// empty file, a project token, a kubeconfig on a SLURM cluster, a
	// slurm.conf on a Kubernetes cluster.
	down := strings.Replace(testSlurmConf, "ctl-secret-host", "down-host", 1)
	if got := e.apiErr("admin", "PUT", slurmPath(c.ClusterID), slurmBody(down), 400); !strings.Contains(got.Message, "Unable to contact slurm controller") {
		t.Fatalf("down: %+v", got)
	}
	if got := e.apiErr("admin", "PUT", slurmPath(c.ClusterID), slurmBody(""), 400); !strings.Contains(got.Message, "slurm_conf is required") {
		t.Fatalf("empty: %+v", got)
	}
	e.apiErr("p", "PUT", slurmPath(c.ClusterID), slurmBody(testSlurmConf), 403)
	if got := e.apiErr("admin", "PUT", kubeconfigPath(c.ClusterID), attachBody(testKubeconfig), 400); !strings.Contains(got.Message, "is a SLURM cluster") {
		t.Fatalf("kubeconfig on SLURM: %+v", got)
	}
	k := e.create("p", createBody)
	if got := e.apiErr("admin", "PUT", slurmPath(k.ClusterID), slurmBody(testSlurmConf), 400); !strings.Contains(got.Message, "is a KUBERNETES cluster") {
		t.Fatalf("slurm.conf on KUBERNETES: %+v", got)
	}
	if e.stored(c.ClusterID) != testSlurmConf || e.stored(k.ClusterID) != "" || len(e.reloads()) != 1 {
		t.Fatal("a refused attach changed something")
	}
	raw = e.do("admin", "DELETE", slurmPath(c.ClusterID), "", 200, &got)
	if got.Slurm == nil || got.Slurm.Attached || e.stored(c.ClusterID) != "" {
		t.Fatalf("detached: %s", raw)
	}
}

// slurmCluster creates a SLURM cluster of project p named name.
func (k *kubeEnv) slurmCluster(name string) apiv1.Cluster {
	k.t.Helper()
	return k.create("p", strings.Replace(slurmCreateBody, `"cluster_name":"hpc"`, `"cluster_name":"`+name+`"`, 1))
}

// TestSlurmConfAttachedOnce: one Slurm is one cluster's. A slurm.conf
// whose ClusterName or slurmctld (address and port) another attached
// cluster's has is refused with 409 naming that cluster (a second attach
// of the same file would let each cluster's reclaims drain the other's
// nodes); one with neither in common is attached.
func TestSlurmConfAttachedOnce(t *testing.T) {
	e := newKubeEnvOpts(t, Options{})
	a, b := e.slurmCluster("hpc-a"), e.slurmCluster("hpc-b")
	const confA = "ClusterName=tenant-a\nSlurmctldHost=ctl-a(10.1.0.10)\nSlurmctldPort=6817\n"
	e.do("admin", "PUT", slurmPath(a.ClusterID), slurmBody(confA), 200, nil)
	e.do("admin", "PUT", slurmPath(a.ClusterID), slurmBody(confA), 200, nil) // its own again
	for what, conf := range map[string]string{
		"the same file":           confA,
		"the same ClusterName":    "ClusterName=TENANT-A\nSlurmctldHost=ctl-x(10.9.0.10)\n",
		"the same slurmctld":      "ClusterName=other\nSlurmctldHost=ctl-a2(10.1.0.10)\nSlurmctldPort=6815-6820\n",
		"its backup slurmctld":    "ClusterName=other\nSlurmctldHost=ctl-y(10.9.0.11)\nSlurmctldHost=ctl-a(10.1.0.10)\n",
		"the same host, no alias": "ClusterName=other\nSlurmctldHost=10.1.0.10\n",
	} {
		got := e.apiErr("admin", "PUT", slurmPath(b.ClusterID), slurmBody(conf), 409)
		if !strings.Contains(got.Message, a.ClusterID) {
			t.Errorf("%s: the 409 does not name cluster %s: %+v", what, a.ClusterID, got)
		}
	}
	if e.stored(b.ClusterID) != "" {
		t.Fatal("a refused attach stored the slurm.conf")
	}
	for _, conf := range []string{
		"ClusterName=tenant-b\nSlurmctldHost=ctl-b(10.2.0.10)\n",
		"ClusterName=tenant-b\nSlurmctldHost=ctl-a(10.1.0.10)\nSlurmctldPort=6900\n", // another slurmctld on the same host
	} {
		e.do("admin", "PUT", slurmPath(b.ClusterID), slurmBody(conf), 200, nil)
	}
	// Detached, A's slurmctld is free again.
	e.do("admin", "DELETE", slurmPath(a.ClusterID), "", 200, nil)
	e.do("admin", "PUT", slurmPath(b.ClusterID), slurmBody(confA), 200, nil)
}

// TestSlurmAttachRefusesInclude: a slurm.conf that includes another file
// is refused by the real check, and nothing of that file reaches the
// answer (scontrol quotes the lines of a file it cannot parse: given
// Include /etc/shadow, it answered with root's line).
func TestSlurmAttachRefusesInclude(t *testing.T) {
	if _, err := exec.LookPath("scontrol"); err != nil {
		t.Fatal("scontrol is not installed (scripts/ensure-slurm.sh installs it):", err)
	}
	dir := t.TempDir()
	const marker = "MARKER-7f3a9c1e is a line of a file the server can read"
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newKubeEnvOpts(t, Options{CheckSlurm: func(ctx context.Context, conf []byte) error {
		return slurm.Check(ctx, conf, slurm.Options{Dir: t.TempDir(), Timeout: 5 * time.Second, Retries: -1})
	}})
	c := e.create("p", slurmCreateBody)
	conf := "ClusterName=tenant\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\nInclude " + secret + "\n"
	raw := e.do("admin", "PUT", slurmPath(c.ClusterID), slurmBody(conf), 400, nil)
	if bytes.Contains(raw, []byte("MARKER-7f3a9c1e")) {
		t.Fatalf("the answer shows the included file:\n%s", raw)
	}
	if !bytes.Contains(raw, []byte("line 4: Include")) {
		t.Errorf("the answer does not name the Include on line 4:\n%s", raw)
	}
}
