package manager

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/queues"
	"github.com/sparecap/sparecap/internal/store"
)

// StoreFleet is the Fleet the server gives the queue integrations: views
// read from the store's snapshot (the leader's in-memory copy) through an
// index by cluster built once per version of it, and requests through the
// controller.
type StoreFleet struct {
	Store      store.Store
	Controller *controller.Controller

	mu  sync.Mutex
	idx *fleetIndex
}

type fleetIndex struct {
	snap     store.Snapshot
	clusters map[string]int
	nodes    map[string][]int
	gpus     map[[2]string]int // GPUs of a machine, by region and GPU type
}

func (f *StoreFleet) index(ctx context.Context) (*fleetIndex, error) {
	snap, err := f.Store.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ix := f.idx; ix != nil && store.Same(ix.snap.Clusters, snap.Clusters) && store.Same(ix.snap.Nodes, snap.Nodes) &&
		store.Same(ix.snap.Machines, snap.Machines) {
		return ix, nil
	}
	ix := &fleetIndex{snap: snap, clusters: map[string]int{}, nodes: map[string][]int{}, gpus: map[[2]string]int{}}
	for i, c := range snap.Clusters {
		ix.clusters[c.ID] = i
	}
	for i, n := range snap.Nodes {
		ix.nodes[n.ClusterID] = append(ix.nodes[n.ClusterID], i)
	}
	for _, m := range snap.Machines {
		k := [2]string{m.Region, m.GPUType}
		ix.gpus[k] = max(ix.gpus[k], m.GPUs)
	}
	f.idx = ix
	return ix, nil
}

// View implements queues.Fleet.
func (f *StoreFleet) View(ctx context.Context, clusterID string) (queues.View, error) {
	ix, err := f.index(ctx)
	if err != nil {
		return queues.View{}, err
	}
	i, ok := ix.clusters[clusterID]
	if !ok {
		return queues.View{}, fmt.Errorf("cluster %s: %w", clusterID, domain.ErrNotFound)
	}
	c := ix.snap.Clusters[i]
	v := queues.View{Cluster: c, GPUsPerNode: cmp.Or(ix.gpus[[2]string{c.Region, c.GPUType}], domain.DefaultGPUsPerMachine)}
	for _, ni := range ix.nodes[clusterID] {
		v.Nodes = append(v.Nodes, *ix.snap.Nodes[ni])
	}
	return v, nil
}

// Clusters lists the clusters not deleted, straight from the snapshot:
// the manager asks at every commit with events, and indexing the fleet's
// nodes and machines for it cost a third of a 1M-GPU server's CPU while
// its nodes came up.
func (f *StoreFleet) Clusters(ctx context.Context) ([]domain.Cluster, error) {
	snap, err := f.Store.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return snap.Clusters, nil
}

// SetRequested implements queues.Fleet.
func (f *StoreFleet) SetRequested(ctx context.Context, clusterID string, gpus int) error {
	_, err := f.Controller.SetRequested(ctx, clusterID, gpus)
	return err
}

// Changed implements queues.Fleet.
func (f *StoreFleet) Changed() <-chan struct{} { return f.Controller.Changed() }
