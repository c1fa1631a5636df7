package slurm_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
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
