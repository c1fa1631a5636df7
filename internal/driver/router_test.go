package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// testPlatform is a platform whose attached clusters' drivers are named
// for the platform and the cluster; it counts what it builds.
func testPlatform(name string, attached ...string) (*Platform[*named], map[string]int) {
	a := attachments{}
	for _, id := range attached {
		a[id] = true
	}
	builds := map[string]int{}
	return NewPlatform(name, a.load, func(_ context.Context, id string, _ []byte, _ Hooks) (*named, error) {
		builds[id]++
		return &named{name: name + "-" + id, idle: name == "kube"}, nil
	}, nil), builds
}

// TestRouter: a call goes by the cluster's type to its platform's driver
// of the cluster, or to the fallback when nothing is attached or no
// platform drives the type; the type is asked once per cluster; Load and
// Running never build a driver; Reload, SetHooks and Close reach every
// platform.
func TestRouter(t *testing.T) {
	kube, kubeBuilds := testPlatform("kube", "a")
	slurm, _ := testPlatform("slurm", "b")
	sim := &named{name: "sim", idle: true}
	types := map[string]domain.ClusterType{"a": domain.ClusterKubernetes, "b": domain.ClusterSlurm,
		"c": domain.ClusterKubernetes, "d": domain.ClusterSlurm, "e": "OTHER"}
	asked := map[string]int{}
	r := NewRouter(func(_ context.Context, id string) (domain.ClusterType, error) {
		asked[id]++
		typ, ok := types[id]
		if !ok {
			return "", errors.New("no such cluster")
		}
		return typ, nil
	}, map[domain.ClusterType]Drivers{domain.ClusterKubernetes: kube, domain.ClusterSlurm: slurm}, sim)

	ctx := context.Background()
	if l := r.Load("a", "n"); l.Idle || l.Known || kubeBuilds["a"] != 0 {
		t.Fatal("Load of a cluster not used yet is known, or built its driver")
	}
	for id, want := range map[string]string{"a": "kube-a", "b": "slurm-b", "c": "sim", "d": "sim", "e": "sim"} {
		for range 2 {
			h, err := r.Health(ctx, id, "n")
			if err != nil || h.Lost != want {
				t.Fatalf("cluster %s went to %q (%v), want %s", id, h.Lost, err, want)
			}
		}
		if asked[id] != 1 {
			t.Errorf("cluster %s's type asked %d times, want once", id, asked[id])
		}
	}
	if kubeBuilds["a"] != 1 {
		t.Errorf("a's driver built %d times, want once", kubeBuilds["a"])
	}
	if _, err := r.Health(ctx, "z", "n"); err == nil {
		t.Error("a cluster whose type cannot be told went somewhere")
	}
	for id, want := range map[string][2]bool{"a": {true, true}, "b": {false, true}, "c": {true, true}, "e": {true, true}} {
		if l := r.Load(id, "n"); l.Idle != want[0] || l.Known != want[1] {
			t.Errorf("Load of %s: %+v, want %v", id, l, want)
		}
	}
	for id, want := range map[string]string{"a": "kube-a", "b": "slurm-b", "c": "sim"} {
		if w, ok := r.Running(id, "n"); !ok || len(w) != 1 || w[0].Key != want {
			t.Errorf("Running of %s went to %v (%v), want %s", id, w, ok, want)
		}
	}
	if _, ok := r.Running("z", "n"); ok {
		t.Error("Running of a cluster never used is known")
	}
	a, _ := kube.Attached(ctx, "a")
	r.Reload("a")
	if !a.closed.Load() {
		t.Error("Reload did not close the cluster's driver")
	}
	if r.Load("a", "n").Known || kubeBuilds["a"] != 1 {
		t.Error("Load after a Reload built the driver again")
	}
	if h, _ := r.Health(ctx, "a", "n"); h.Lost != "kube-a" || asked["a"] != 2 || kubeBuilds["a"] != 2 {
		t.Errorf("after a Reload: went to %q, type asked %d times (want again)", h.Lost, asked["a"])
	}
	b, _ := slurm.Attached(ctx, "b")
	r.Close()
	if a, _ := kube.Known("a"); a != nil || !b.closed.Load() {
		t.Error("Close did not close every platform's drivers")
	}
}

// TestRouterHooks: the hooks set on the router reach the fallback, the
// drivers built already and those built later, on every platform.
func TestRouterHooks(t *testing.T) {
	kube, _ := testPlatform("kube", "a", "c")
	slurm, _ := testPlatform("slurm", "b")
	sim := &named{name: "sim"}
	types := map[string]domain.ClusterType{"a": domain.ClusterKubernetes, "b": domain.ClusterSlurm, "c": domain.ClusterKubernetes}
	r := NewRouter(func(_ context.Context, id string) (domain.ClusterType, error) { return types[id], nil },
		map[domain.ClusterType]Drivers{domain.ClusterKubernetes: kube, domain.ClusterSlurm: slurm}, sim)
	ctx := context.Background()
	r.Health(ctx, "a", "n")
	woken := map[string]int{}
	r.SetHooks(Hooks{Wake: func(_, node string, _ time.Time) { woken[node]++ }})
	r.Health(ctx, "b", "n")
	r.Health(ctx, "c", "n")
	a, _ := kube.Attached(ctx, "a")
	b, _ := slurm.Attached(ctx, "b")
	c, _ := kube.Attached(ctx, "c")
	for _, d := range []*named{a, b, c, sim} {
		if h := d.hooks.Load(); h != nil && h.Wake != nil {
			h.Wake("x", d.name, time.Time{})
		}
	}
	for _, n := range []string{"kube-a", "slurm-b", "kube-c", "sim"} {
		if woken[n] != 1 {
			t.Errorf("%s's hooks are not the router's (woken %v)", n, woken)
		}
	}
}

// tellingDriver is a driver that says whether it tells of a cluster.
type tellingDriver struct {
	ClusterDriver
	tells bool
}

func (d tellingDriver) Tells(string) bool { return d.tells }

// TestRouterTellsWhatItsClustersDriverTells: a step on a cluster polls
// unless the driver of that cluster wakes it, and the router asks that
// driver (a cluster not used yet cannot be told of).
func TestRouterTellsWhatItsClustersDriverTells(t *testing.T) {
	fallback := tellingDriver{tells: true}
	r := NewRouter(func(context.Context, string) (domain.ClusterType, error) { return domain.ClusterKubernetes, nil }, nil, fallback)
	if r.Tells("c") {
		t.Fatal("a cluster not used yet is told of")
	}
	if _, err := r.pick(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if !r.Tells("c") {
		t.Fatal("the fallback tells, the router does not say so")
	}
	silent := NewRouter(func(context.Context, string) (domain.ClusterType, error) { return domain.ClusterKubernetes, nil }, nil, tellingDriver{})
	silent.pick(context.Background(), "c")
	if silent.Tells("c") {
		t.Fatal("a driver that cannot tell is said to")
	}
}
