package slurm_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestNodeSaysItsGPUType, on a real Slurm: a node sparecap adds carries
// its machine's GPU type as a feature and as its gres type (the machine
// boots slurmd with NodeConf), and a job that asks for the type by either
// runs on it.
func TestNodeSaysItsGPUType(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 2, window: time.Minute})
	f.createCluster("c1", 8, 8)
	n := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	if n.GPUType != gpu {
		t.Fatalf("node %s has GPU type %q, want its machine's %q", n.Name, n.GPUType, gpu)
	}
	eventually(t, 10*time.Second, func() error {
		s, ok := nodeOf(t, f.env, n.Name)
		if !ok || !slices.Contains(strings.Split(s.Features, ","), gpu) || !strings.Contains(s.Gres, "gpu:"+gpu+":2") {
			return fmt.Errorf("node %s has features %q and gres %q", n.Name, s.Features, s.Gres)
		}
		return nil
	})
	id := submit(t, f.env, job{Name: "typed", OnTerm: "exit 0", Extra: []string{"-C", gpu, "--gres=gpu:" + gpu + ":1"}})
	eventually(t, 20*time.Second, func() error {
		if j := jobByID(t, f.env, id); j.State != "RUNNING" {
			return fmt.Errorf("job %s is %s", id, j.State)
		}
		return nil
	})
}

// TestATargetOverTwoTypesOnSlurm, on a real Slurm: a preemptible target
// over the region's type and H200, whose own type's only machine serves
// the standard node, fills from H200: the node carries H200 as a feature
// and gres type.
func TestATargetOverTwoTypesOnSlurm(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 1, window: time.Minute})
	err := f.st.Update(f.ctx, func(tx store.Tx) error {
		return tx.CreateMachine(f.ctx, domain.Machine{ID: "h200-0", Region: region, GPUType: "H200", GPUs: 8, CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ctrl.CreateCluster(f.ctx, domain.Cluster{ID: "c1", Name: "c1", ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterSlurm, BillingType: domain.BillingOnDemand, NumGPUs: 8, DesiredPreemptibleGPUs: 8,
		PreemptibleGPUTypes: []string{gpu, "H200"}})
	if err != nil {
		t.Fatal(err)
	}
	n := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	if n.GPUType != "H200" || n.MachineID != "h200-0" {
		t.Fatalf("preemptible node %+v, want it on the H200", n)
	}
	eventually(t, 10*time.Second, func() error {
		s, ok := nodeOf(t, f.env, n.Name)
		if !ok || !slices.Contains(strings.Split(s.Features, ","), "H200") || !strings.Contains(s.Gres, "gpu:H200:2") {
			return fmt.Errorf("node %s has features %q and gres %q", n.Name, s.Features, s.Gres)
		}
		return nil
	})
}
