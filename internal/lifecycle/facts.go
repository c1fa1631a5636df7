package lifecycle

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// facts gathers in's Facts: the world's, then the drivers' (from what
// they watch: no call out), then the executor's own memory.
func (e *Executor) facts(ctx context.Context, in *Input) error {
	n, f := in.Node, &in.Facts
	if err := e.world.Facts(ctx, n, f); err != nil {
		return err
	}
	switch {
	case in.Cleanup:
	case n.State == domain.NodeDraining:
		f.Load = e.cluster.Load(n.ClusterID, n.Name)
		_, f.Saved = e.saved.Load(n.ID)
	case n.State == domain.NodeReady:
		h, err := e.cluster.Health(ctx, n.ClusterID, n.Name)
		f.Health, f.HealthKnown = h, err == nil
	}
	f.Tells = driver.Tells(e.cluster, n.ClusterID)
	f.ProviderTells = driver.Tells(e.machines, n.ClusterID)
	if t, ok := e.first.Load(n.ID); ok {
		f.FirstPrepare = t.(time.Time)
	}
	key := n.ID
	if in.Cleanup {
		key = CleanupKey(n.ID)
	}
	f.LastErr = e.runner.Err(key)
	return nil
}

// specOf is what the drivers are told of node n, on a cluster of type t.
func specOf(n domain.Node, t domain.ClusterType) driver.NodeSpec {
	sp := driver.Spec(n)
	sp.Platform = t
	return sp
}
