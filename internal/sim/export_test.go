package sim

import (
	"context"
	"errors"
	"time"

	"github.com/sparecap/sparecap/internal/driver"
)

// Single changes the simulation's tests make to a node, apart from the
// driver interface (which marks a node in one write, MarkDraining).

func (f *Fleet) Cordon(ctx context.Context, clusterID, nodeName string) error {
	return f.changeNode(ctx, "cordon", clusterID, nodeName, cordon)
}

func (f *Fleet) Taint(ctx context.Context, clusterID, nodeName string, t Taint) error {
	if t.Key == "" {
		return errors.New("sim: taint has no key")
	}
	return f.changeNode(ctx, "taint", clusterID, nodeName, func(n *node) bool { return taint(n, t) })
}

func (f *Fleet) Annotate(ctx context.Context, clusterID, nodeName, key, value string) error {
	return f.changeNode(ctx, "annotate", clusterID, nodeName, func(n *node) bool { return annotate(n, key, value) })
}

func (f *Fleet) PostEvent(ctx context.Context, clusterID, nodeName string, e driver.Notice) error {
	return f.PostNotice(ctx, clusterID, nodeName, nil, e)
}

// DeletePod deletes the pod with a grace period of the test's choosing
// (0 forces), with the API server's rules (see Notify).
func (f *Fleet) DeletePod(ctx context.Context, clusterID, nodeName string, w driver.Work, grace time.Duration) error {
	return f.deletePod(ctx, clusterID, nodeName, w, time.Time{}, func(*pod, time.Time) time.Duration { return grace })
}
