package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
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
