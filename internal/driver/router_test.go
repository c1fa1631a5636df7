package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// named is a ClusterDriver that says who it is through Health and Idle.
type named struct {
	name string
	idle bool
}

func (n *named) AddNode(context.Context, NodeSpec) error                   { return nil }
func (n *named) MarkDraining(context.Context, string, string, Marks) error { return nil }
func (n *named) ListWork(context.Context, string, string) ([]Work, error)  { return nil, nil }
func (n *named) Notify(context.Context, string, string, Work, time.Time) error {
	return nil
}
func (n *named) PostNotice(context.Context, string, string, *Work, Notice) error { return nil }
func (n *named) Release(context.Context, string, string) error                   { return nil }
func (n *named) SetClass(context.Context, NodeSpec) error                        { return nil }
func (n *named) Health(context.Context, string, string) (NodeHealth, error) {
	return NodeHealth{Lost: n.name}, nil
}
func (n *named) Load(string, string) domain.NodeLoad {
	return domain.NodeLoad{Known: true, Idle: n.idle}
}
func (n *named) Running(string, string) ([]domain.Running, bool) {
	return []domain.Running{{Key: n.name}}, true
}
func (n *named) SetHooks(Hooks) {}

// platform drives the clusters in attached; the others have nothing
// attached.
type platform struct {
	attached map[string]*named
	known    map[string]bool
	reloads  []string
	hooked   bool
}

func (p *platform) Driver(_ context.Context, id string) (ClusterDriver, error) {
	p.known[id] = true
	if d := p.attached[id]; d != nil {
		return d, nil
	}
	return nil, nil
}

func (p *platform) Known(id string) (ClusterDriver, bool) {
	if !p.known[id] {
		return nil, false
	}
	if d := p.attached[id]; d != nil {
		return d, true
	}
	return nil, true
}

func (p *platform) Reload(id string) { p.reloads = append(p.reloads, id); delete(p.known, id) }
func (p *platform) SetHooks(Hooks)   { p.hooked = true }

// TestRouter: a call goes by the cluster's type to its platform's driver
// of the cluster, or to the fallback when nothing is attached or no
// platform drives the type; the type is asked once per cluster; Idle
// never builds a driver; Reload and SetHooks reach every platform.
func TestRouter(t *testing.T) {
	kd, sd := &named{name: "kube-a", idle: true}, &named{name: "slurm-b"}
	kube := &platform{attached: map[string]*named{"a": kd}, known: map[string]bool{}}
	slurm := &platform{attached: map[string]*named{"b": sd}, known: map[string]bool{}}
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
	}, map[domain.ClusterType]Platform{domain.ClusterKubernetes: kube, domain.ClusterSlurm: slurm}, sim)

	ctx := context.Background()
	if l := r.Load("a", "n"); l.Idle || l.Known {
		t.Fatal("Idle of a cluster not used yet is known")
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
	r.Reload("a")
	if len(kube.reloads) != 1 || len(slurm.reloads) != 1 {
		t.Errorf("Reload reached %v and %v", kube.reloads, slurm.reloads)
	}
	if r.Load("a", "n").Known {
		t.Error("Idle after a Reload built the driver again")
	}
	if h, _ := r.Health(ctx, "a", "n"); h.Lost != "kube-a" || asked["a"] != 2 {
		t.Errorf("after a Reload: went to %q, type asked %d times (want again)", h.Lost, asked["a"])
	}
	r.SetHooks(Hooks{})
	if !kube.hooked || !slurm.hooked {
		t.Error("SetHooks did not reach every platform")
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
