package driver

import (
	"context"
	"time"
)

// Routed is a ClusterDriver that sends each call to the driver Pick
// chooses for its cluster: a router's calls, written once, so a router
// never loses a method of the interface. SetHooks is the router's own.
type Routed struct {
	Pick func(ctx context.Context, clusterID string) (ClusterDriver, error)
}

func (r Routed) AddNode(ctx context.Context, spec NodeSpec) error {
	d, err := r.Pick(ctx, spec.ClusterID)
	if err != nil {
		return err
	}
	return d.AddNode(ctx, spec)
}

func (r Routed) MarkDraining(ctx context.Context, clusterID, nodeName string, m Marks) error {
	d, err := r.Pick(ctx, clusterID)
	if err != nil {
		return err
	}
	return d.MarkDraining(ctx, clusterID, nodeName, m)
}

func (r Routed) ListWork(ctx context.Context, clusterID, nodeName string) ([]Work, error) {
	d, err := r.Pick(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	return d.ListWork(ctx, clusterID, nodeName)
}

func (r Routed) Notify(ctx context.Context, clusterID, nodeName string, w Work, by time.Time) error {
	d, err := r.Pick(ctx, clusterID)
	if err != nil {
		return err
	}
	return d.Notify(ctx, clusterID, nodeName, w, by)
}

func (r Routed) PostNotice(ctx context.Context, clusterID, nodeName string, w *Work, n Notice) error {
	d, err := r.Pick(ctx, clusterID)
	if err != nil {
		return err
	}
	return d.PostNotice(ctx, clusterID, nodeName, w, n)
}

func (r Routed) SetClass(ctx context.Context, spec NodeSpec) error {
	d, err := r.Pick(ctx, spec.ClusterID)
	if err != nil {
		return err
	}
	return d.SetClass(ctx, spec)
}

func (r Routed) Release(ctx context.Context, clusterID, nodeName string) error {
	d, err := r.Pick(ctx, clusterID)
	if err != nil {
		return err
	}
	return d.Release(ctx, clusterID, nodeName)
}

func (r Routed) Health(ctx context.Context, clusterID, nodeName string) (NodeHealth, error) {
	d, err := r.Pick(ctx, clusterID)
	if err != nil {
		return NodeHealth{}, err
	}
	return d.Health(ctx, clusterID, nodeName)
}
