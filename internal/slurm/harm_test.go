package slurm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestScaleDownTakesIdleThenTheWholeJob, on a real Slurm: of four
// preemptible nodes, two run one 2-node job, one a single-node job and
// one nothing. Giving three back takes the idle node first, then both
// nodes of the 2-node job (one job stopped, not two), and the events
// say why; the single-node job keeps its node.
func TestScaleDownTakesIdleThenTheWholeJob(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 5, window: time.Minute})
	f.createCluster("c1", 8, 32)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 4, 30*time.Second)
	gang := submit(t, f.env, job{Name: "gang", Extra: []string{"-N", "2", "-C", "preemptible"}})
	var gangNodes []string
	eventually(t, 20*time.Second, func() error {
		j := jobByID(t, f.env, gang)
		if j.State != "RUNNING" {
			return fmt.Errorf("job %s is %s", gang, j.State)
		}
		out, err := f.env.Run(context.Background(), "scontrol", "show", "hostnames", j.Nodes)
		if err != nil {
			return err
		}
		names := strings.Fields(out)
		gangNodes = nil
		for _, n := range pre {
			if slices.Contains(names, n.Name) {
				gangNodes = append(gangNodes, n.ID)
			}
		}
		if len(gangNodes) != 2 {
			return fmt.Errorf("job %s runs on %q", gang, j.Nodes)
		}
		return nil
	})
	var solo, idle domain.Node
	for _, n := range pre {
		if !slices.Contains(gangNodes, n.ID) {
			if solo.ID == "" {
				solo = n
			} else {
				idle = n
			}
		}
	}
	id := submit(t, f.env, job{Name: "solo", Node: solo.Name, Extra: []string{"-C", "preemptible"}})
	eventually(t, 20*time.Second, func() error {
		if j := jobByID(t, f.env, id); j.State != "RUNNING" {
			return fmt.Errorf("job %s is %s", id, j.State)
		}
		return nil
	})
	time.Sleep(time.Second) // a few of the driver's polls (every 250 ms)

	f.setPreemptible("c1", 8)
	eventually(t, 10*time.Second, func() error {
		var going []string
		for _, n := range pre {
			if f.node(n.ID).State != domain.NodeReady {
				going = append(going, n.ID)
			}
		}
		if len(going) < 3 {
			return fmt.Errorf("%d nodes going", len(going))
		}
		slices.Sort(going)
		want := append([]string{idle.ID}, gangNodes...)
		slices.Sort(want)
		if !slices.Equal(going, want) {
			t.Fatalf("nodes going %v, want the idle %s and the 2-node job's %v", going, idle.ID, gangNodes)
		}
		return nil
	})
	var why []string
	for _, e := range f.events("c1") {
		if e.Reason == domain.ReasonScaledDown {
			why = append(why, e.Message)
		}
	}
	all := strings.Join(why, "\n")
	if !strings.Contains(all, "another of the cluster: idle") || !strings.Contains(all, "stops gang slurm/"+gang) {
		t.Fatalf("the events do not say why: %q", why)
	}
}
