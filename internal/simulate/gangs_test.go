package simulate

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// node is a preemptible node of 8 GPUs ready from ready on, until stop,
// reclaimed at stop if reclaim (minutes from the epoch).
func node(name string, ready, stop int, reclaim bool) *span {
	at := func(m int) time.Time { return Epoch.Add(time.Duration(m) * time.Minute) }
	n := &domain.Node{Name: name, MachineID: "m-" + name, Class: domain.Preemptible, GPUs: 8, ReadyAt: at(ready)}
	if reclaim {
		n.DrainStartedAt, n.DrainCause = at(stop), domain.CausePreempted
	}
	return &span{n: n, ready: at(ready), stop: at(stop)}
}

// TestGangOfTwoNodes works one gang through by hand: a, b and c (8 GPUs
// each) are ready at 0, 10 and 20 min; gangs are 16 GPUs, so a and b
// start one at 10 and c waits; a is reclaimed at 60: the gang loses its
// 50 minutes since its start modulo the 21-minute checkpoint period (8
// minutes) on 16 GPUs and pays 16 GPUs' restart; b and c start the next
// gang at 60, which runs to the end at 120.
func TestGangOfTwoNodes(t *testing.T) {
	j := Jobs{CheckpointInterval: Duration{20 * time.Minute}, CheckpointCost: Duration{time.Minute},
		RestartCost: Duration{5 * time.Minute}, GangGPUs: 16}
	end := Epoch.Add(120 * time.Minute)
	spans := []*span{node("a", 0, 60, true), node("b", 10, 120, false), node("c", 20, 120, false)}
	got := newGangRunner(j, false).run(spans, end)
	// running: 50 min and 60 min on 16 GPUs; checkpoints 1/21 of each,
	// rounded down per gang.
	want := jobRun{running: 48000 + 57600, checkpoint: 48000/21 + 57600/21, lost: 8 * 60 * 16, restart: 5 * 60 * 16}
	if got.running != want.running || got.checkpoint != want.checkpoint || got.lost != want.lost || got.restart != want.restart {
		t.Errorf("gangs: got %+v, want %+v", got, want)
	}

	// Without a gang size each node runs alone: a loses 60 mod 21 = 18
	// minutes on its 8 GPUs, b and c run from ready to the end.
	j.GangGPUs = 0
	got = newGangRunner(j, false).run(spans, end)
	want = jobRun{running: (60 + 110 + 100) * 60 * 8, checkpoint: 28800/21 + 52800/21 + 48000/21, lost: 18 * 60 * 8, restart: 5 * 60 * 8}
	if got.running != want.running || got.checkpoint != want.checkpoint || got.lost != want.lost || got.restart != want.restart {
		t.Errorf("single nodes: got %+v, want %+v", got, want)
	}

	// A checkpoint at the notice that fits the window saves the work, not
	// the restart.
	j.GangGPUs = 16
	if got = newGangRunner(j, true).run(spans, end); got.lost != 0 || got.restart != 5*60*16 {
		t.Errorf("saved at the notice: %+v", got)
	}
}

// TestGangsInAScenario: to a control plane that sees nothing of the
// jobs (victims youngest first), gangs change what the jobs make of the
// nodes, not its run: the same deliveries and reclaims; every
// tenant's ready time is either waited for a gang or ran, and what ran is
// useful, lost, restarted or checkpointed; a gang as large as the target
// waits more than one of a node.
func TestGangsInAScenario(t *testing.T) {
	s := scenario(t)
	s.Horizon.D, s.Compare = 48*time.Hour, nil
	s.Policy.Victims = VictimsYoungest
	evs := Generate(s)
	alone, err := Run(context.Background(), s, evs, s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Jobs.GangGPUs = 32
	gangs, err := Run(context.Background(), s, evs, s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	waited, lostMore := 0.0, 0
	for i, g := range gangs.Tenants {
		a := alone.Tenants[i]
		if g.DeliveredGPUh != a.DeliveredGPUh || g.Reclaims != a.Reclaims || a.GangWaitGPUh != 0 {
			t.Errorf("%s: alone %+v, in gangs %+v", g.Cluster, a, g)
		}
		sum := g.GangWaitGPUh + g.UsefulGPUh + g.LostGPUh + g.RestartGPUh + g.CheckpointGPUh
		if g.UsefulGPUh > 0 && math.Abs(sum-g.DeliveredGPUh) > 0.005 {
			t.Errorf("%s: waited %g + useful %g + lost %g + restart %g + checkpoint %g = %g, delivered %g", g.Cluster,
				g.GangWaitGPUh, g.UsefulGPUh, g.LostGPUh, g.RestartGPUh, g.CheckpointGPUh, sum, g.DeliveredGPUh)
		}
		waited += g.GangWaitGPUh
		if g.LostGPUh+g.RestartGPUh > a.LostGPUh+a.RestartGPUh {
			lostMore++
		}
	}
	if waited == 0 || lostMore == 0 {
		t.Errorf("gangs of 32 GPUs waited %g GPU-hours and lost more than single nodes for %d of %d tenants", waited, lostMore, len(gangs.Tenants))
	}
	s.Jobs.GangGPUs = 12
	if err := s.Check(); err == nil {
		t.Error("a gang of 12 GPUs was accepted")
	}
}

// TestNodeLeavingBeforeItsGangFormed: a node that leaves while waiting
// for a gang is out of the count: with gangs of 24 GPUs, a (0-10 min), b
// and c (from 5 and 20 min) never make one together.
func TestNodeLeavingBeforeItsGangFormed(t *testing.T) {
	j := Jobs{GangGPUs: 24, RestartCost: Duration{time.Minute}}
	spans := []*span{node("a", 0, 10, true), node("b", 5, 100, false), node("c", 20, 100, false)}
	if got := newGangRunner(j, false).run(spans, Epoch.Add(100*time.Minute)); got.running != 0 || got.lost != 0 || got.restart != 0 {
		t.Errorf("a gang ran with a node gone: %+v", got)
	}
}
