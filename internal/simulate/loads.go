package simulate

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
)

// loadFleet is the simulated fleet as the controller's cluster driver,
// with what its nodes run (Load) told by the tenants' job model, as a
// tenant's pods would tell the Kubernetes driver: a node waiting for a
// gang is idle, a gang's members share the gang's name, and each loses
// its GPUs times the time since the gang's last checkpoint and the
// restart. The policy's
// Victims says how much of that the control plane sees.
type loadFleet struct {
	*sim.Fleet
	w     *world
	cache map[string]*tenantLoads
}

// tenantLoads is one tenant's nodes' loads, made at a tick and an instant.
type tenantLoads struct {
	tick int
	at   time.Time
	by   map[string]domain.NodeLoad // by node name
	own  bool                       // not a tenant: the fleet's own answer
}

// Load is what the node runs, as Policy.Victims lets the control plane see.
func (f *loadFleet) Load(clusterID, nodeName string) domain.NodeLoad {
	if f.w.pol.Victims == VictimsYoungest {
		return domain.NodeLoad{}
	}
	now := f.w.clk.Now()
	tl := f.cache[clusterID]
	if tl == nil || tl.tick != f.w.ticks || !tl.at.Equal(now) {
		tl = f.tenant(clusterID, now)
		f.cache[clusterID] = tl
	}
	if tl.own {
		return f.Fleet.Load(clusterID, nodeName)
	}
	l := tl.by[nodeName]
	if f.w.pol.Victims == VictimsIdleFirst {
		return domain.NodeLoad{Known: l.Known, Idle: l.Idle}
	}
	return l
}

// tenant plays the job model of a tenant's preemptible nodes up to now.
func (f *loadFleet) tenant(clusterID string, now time.Time) *tenantLoads {
	tl := &tenantLoads{tick: f.w.ticks, at: now, by: map[string]domain.NodeLoad{}}
	ctx := context.Background()
	c, err := f.w.st.GetCluster(ctx, clusterID)
	if err != nil || !tenant(c) {
		tl.own = true
		return tl
	}
	nodes, err := f.w.st.ListNodes(ctx, store.NodeFilter{ClusterID: clusterID, IncludeRemoved: true})
	if err != nil {
		tl.own = true
		return tl
	}
	end := Epoch.Add(f.w.sc.Horizon.D)
	var spans []*span
	for i := range nodes {
		if nodes[i].Class == domain.Preemptible {
			s := spanOf(&nodes[i], end)
			spans = append(spans, &s)
		}
	}
	j := f.w.sc.Jobs.JobsOf(c.Name)
	g := newGangRunner(j, savesAtNotice(j, f.w.pol))
	g.play(steps(spans), now, end)
	for _, s := range g.free {
		tl.by[s.n.Name] = domain.NodeLoad{Known: true, Idle: true}
	}
	for s, gg := range g.of {
		// What stopping it loses: the work since the last checkpoint
		// and the restart, as the job model counts them at a reclaim.
		lost := g.lostAfter(now.Sub(gg.start)) + j.RestartCost.D
		l := domain.NodeLoad{Known: true, LostGPUSeconds: int64(s.n.GPUs) * int64(lost/time.Second)}
		l.WorkGPUSeconds = l.LostGPUSeconds
		if j.GangGPUs > 0 {
			l.Gang = "gang/" + gg.members[0].n.Name
		}
		tl.by[s.n.Name] = l
	}
	return tl
}
