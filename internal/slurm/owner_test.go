package slurm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/slurm/slurmenv"
)

// TestAnotherClustersNodeIsNeverOurs: two clusters' drivers on one
// slurmctld (what a slurm.conf attached twice did): a node of A carries
// A's feature, and B's driver never takes it for its own, though the
// controllers name their nodes alike: B neither reports, drains, lists,
// probes, releases nor adopts it.
func TestAnotherClustersNodeIsNeverOurs(t *testing.T) {
	a, b := newCluster(t, env, slurm.Options{}), newCluster(t, env, slurm.Options{})
	ctx := context.Background()
	spec := addNode(t, env, a, a.ID(), "owner-1", domain.Preemptible)
	n, _ := nodeOf(t, env, spec.NodeName)
	if !hasFeature(n.Features, slurm.ClusterFeature(a.ID())) {
		t.Fatalf("A's node has features %q, not %s", n.Features, slurm.ClusterFeature(a.ID()))
	}
	id := submit(t, env, job{Node: spec.NodeName, Name: "a-job"})
	eventually(t, 20*time.Second, func() error {
		if w, err := a.ListWork(ctx, a.ID(), spec.NodeName); err != nil || len(w) != 1 {
			return errors.New("A does not see its job yet")
		}
		return nil
	})
	if h, err := b.Health(ctx, b.ID(), spec.NodeName); err != nil || !h.Gone {
		t.Errorf("B's health of A's node: %+v %v, want gone", h, err)
	}
	if w, err := b.ListWork(ctx, b.ID(), spec.NodeName); err != nil || len(w) != 0 {
		t.Errorf("B lists A's work: %+v %v", w, err)
	}
	err := b.MarkDraining(ctx, b.ID(), spec.NodeName, driver.Marks{Cause: "Reclaimed", Deadline: time.Now().Add(time.Minute)})
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("B's drain of A's node: %v, want not found", err)
	}
	if err := b.AddNode(ctx, driver.NodeSpec{ClusterID: b.ID(), NodeName: spec.NodeName, Class: domain.Preemptible, GPUs: 2}); err == nil {
		t.Error("B's AddNode took A's node")
	}
	if err := b.Release(ctx, b.ID(), spec.NodeName); err != nil {
		t.Errorf("B's release of A's node: %v", err)
	}
	n, ok := nodeOf(t, env, spec.NodeName)
	switch {
	case !ok:
		t.Fatal("B's release deleted A's node")
	case strings.Contains(n.Reason, "sparecap") || hasFeature(n.Features, slurm.ClusterFeature(b.ID())):
		t.Errorf("B changed A's node: reason %q, features %q", n.Reason, n.Features)
	}
	if j := jobByID(t, env, id); j.State != "RUNNING" || j.AdminComment != "" {
		t.Errorf("A's job %s: %s %q", id, j.State, j.AdminComment)
	}
	if h, err := a.Health(ctx, a.ID(), spec.NodeName); err != nil || h.Gone || !h.NotReadySince.IsZero() {
		t.Errorf("A's health of its node: %+v %v", h, err)
	}
}

// TestNodeFromBeforeClusterFeaturesIsAdopted: a node sparecap added
// before nodes carried their cluster's feature (only "sparecap" and its
// class) is not lost after an upgrade: the first call of its cluster's
// controller that names it adopts it, and from then on it is that
// cluster's alone. A node that registers so after the driver started is
// a new machine's: only AddNode, for the node its controller asked for,
// adopts it.
func TestNodeFromBeforeClusterFeaturesIsAdopted(t *testing.T) {
	ctx := context.Background()
	start := func(name string) {
		t.Helper()
		if _, err := env.StartNode(ctx, slurmenv.NodeSpec{Name: name, GPUs: 2, Features: slurm.Features(domain.Preemptible)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			env.StopNode(name)
			env.Run(context.Background(), "scontrol", "delete", "nodename="+name)
		})
		eventually(t, 20*time.Second, func() error {
			if n, ok := nodeOf(t, env, name); !ok || n.State != "idle" {
				return errors.New(name + " is not idle yet")
			}
			return nil
		})
	}
	start("legacy-1") // before the upgrade
	a, b := newCluster(t, env, slurm.Options{}), newCluster(t, env, slurm.Options{})
	if h, err := a.Health(ctx, a.ID(), "legacy-1"); err != nil || h.Gone {
		t.Fatalf("A's health of its node from before: %+v %v", h, err)
	}
	eventually(t, 5*time.Second, func() error {
		if n, _ := nodeOf(t, env, "legacy-1"); !hasFeature(n.Features, slurm.ClusterFeature(a.ID())) {
			return errors.New("features " + n.Features)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // B polls
	if h, err := b.Health(ctx, b.ID(), "legacy-1"); err != nil || !h.Gone {
		t.Errorf("B's health of A's adopted node: %+v %v, want gone", h, err)
	}

	start("legacy-2") // after: a new machine's
	time.Sleep(500 * time.Millisecond)
	if h, err := b.Health(ctx, b.ID(), "legacy-2"); err != nil || !h.Gone {
		t.Errorf("B's health of a node that registered after it started: %+v %v, want gone", h, err)
	}
	spec := driver.NodeSpec{ClusterID: a.ID(), NodeName: "legacy-2", Class: domain.Preemptible, GPUs: 2}
	if err := a.AddNode(ctx, spec); err != nil {
		t.Fatalf("A's AddNode: %v", err)
	}
	if n, _ := nodeOf(t, env, "legacy-2"); !hasFeature(n.Features, slurm.ClusterFeature(a.ID())) {
		t.Errorf("AddNode did not give the node A's feature: %q", n.Features)
	}
}

func hasFeature(features, f string) bool {
	for _, x := range strings.Split(features, ",") {
		if x == f {
			return true
		}
	}
	return false
}
