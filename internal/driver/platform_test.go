package driver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// named is a cluster driver that says who it is through Health, Load and
// Running, and keeps the hooks it was given.
type named struct {
	name   string
	idle   bool
	closed atomic.Bool
	hooks  atomic.Pointer[Hooks]
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
func (n *named) SetHooks(h Hooks) { n.hooks.Store(&h) }
func (n *named) Close()           { n.closed.Store(true) }

var _ Drivers = (*Platform[*named])(nil)

// attachments is a Loader: a cluster's attachment is its name, none for
// the clusters it does not hold.
type attachments map[string]bool

func (a attachments) load(_ context.Context, id string) ([]byte, error) {
	if id == "broken" {
		return nil, errors.New("store down")
	}
	if !a[id] {
		return nil, nil
	}
	return []byte(id), nil
}

// TestPlatform: a cluster's driver is built once from its attachment and
// kept, a cluster with nothing attached is remembered as such, Known never
// builds, Reload closes and forgets, a failed build is tried again, and
// Close closes every driver.
func TestPlatform(t *testing.T) {
	var builds atomic.Int32
	fail := true
	p := NewPlatform("Test", attachments{"a": true, "flaky": true}.load,
		func(_ context.Context, id string, a []byte, _ Hooks) (*named, error) {
			builds.Add(1)
			if id == "flaky" && fail {
				return nil, errors.New("down")
			}
			return &named{name: string(a)}, nil
		}, nil)
	ctx := context.Background()
	if _, ok := p.Known("a"); ok {
		t.Fatal("Known before any use")
	}
	a, err := p.Attached(ctx, "a")
	if err != nil || a == nil || a.name != "a" {
		t.Fatalf("a: %v, %v", a, err)
	}
	if again, _ := p.Attached(ctx, "a"); again != a || builds.Load() != 1 {
		t.Fatalf("a built again (%d builds)", builds.Load())
	}
	if d, err := p.Driver(ctx, "none"); d != nil || err != nil {
		t.Fatalf("none: %v, %v", d, err)
	}
	if d, ok := p.Known("none"); d != nil || !ok {
		t.Fatal("a cluster with nothing attached is not remembered")
	}
	if _, err := p.Attached(ctx, "broken"); err == nil {
		t.Fatal("an attachment that cannot be loaded built a driver")
	}
	if _, err := p.Attached(ctx, "flaky"); err == nil {
		t.Fatal("a failed build succeeded")
	}
	fail = false
	if f, err := p.Attached(ctx, "flaky"); err != nil || f == nil {
		t.Fatalf("a failed build is not tried again: %v", err)
	}
	if got := len(p.All()); got != 2 {
		t.Fatalf("All: %d drivers, want a and flaky", got)
	}
	p.Reload("a")
	if !a.closed.Load() {
		t.Fatal("Reload did not close a")
	}
	if b, _ := p.Attached(ctx, "a"); b == a || b.closed.Load() {
		t.Fatal("a not rebuilt after Reload")
	}
	all := p.All()
	p.Close()
	for _, d := range all {
		if !d.closed.Load() {
			t.Fatalf("Close did not close %s", d.name)
		}
	}
	if _, ok := p.Known("flaky"); ok {
		t.Fatal("a driver is known after Close")
	}
}

// TestPlatformFirstCallsAtOnce: two first calls at once keep one driver
// and close the other.
func TestPlatformFirstCallsAtOnce(t *testing.T) {
	gate := make(chan struct{})
	var built []*named
	var mu sync.Mutex
	p := NewPlatform("Test", attachments{"r": true}.load, func(context.Context, string, []byte, Hooks) (*named, error) {
		<-gate
		d := &named{name: "r"}
		mu.Lock()
		built = append(built, d)
		mu.Unlock()
		return d, nil
	}, nil)
	got := make([]*named, 2)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], _ = p.Attached(context.Background(), "r") })
	}
	close(gate)
	wg.Wait()
	if got[0] != got[1] || got[0].closed.Load() {
		t.Fatal("two first calls got different drivers, or a closed one")
	}
	if len(built) == 2 && !built[0].closed.Load() && !built[1].closed.Load() {
		t.Fatal("the driver built in vain was not closed")
	}
}

// TestPlatformHooks: the hooks set reach the drivers built before and
// after, and a build gets them.
func TestPlatformHooks(t *testing.T) {
	var given atomic.Int32
	p := NewPlatform("Test", attachments{"a": true, "b": true}.load, func(_ context.Context, id string, _ []byte, h Hooks) (*named, error) {
		if h.Wake != nil {
			given.Add(1)
		}
		return &named{name: id}, nil
	}, nil)
	ctx := context.Background()
	a, _ := p.Attached(ctx, "a")
	woken := map[string]int{}
	var mu sync.Mutex
	p.SetHooks(Hooks{Wake: func(_, node string, _ time.Time) { mu.Lock(); woken[node]++; mu.Unlock() }})
	b, _ := p.Attached(ctx, "b")
	for _, d := range []*named{a, b} {
		d.hooks.Load().Wake("c", d.name, time.Time{})
	}
	if woken["a"] != 1 || woken["b"] != 1 {
		t.Fatalf("woken %v: the hooks did not reach every driver", woken)
	}
	if given.Load() != 1 {
		t.Fatal("a driver built after SetHooks was not built with them")
	}
}

// TestPlatformStart: Start builds the drivers of the given clusters in
// the background, and a cluster whose driver cannot be built is built on
// first use later.
func TestPlatformStart(t *testing.T) {
	var builds atomic.Int32
	p := NewPlatform("Test", attachments{"a": true, "b": true}.load, func(_ context.Context, id string, _ []byte, _ Hooks) (*named, error) {
		builds.Add(1)
		return &named{name: id}, nil
	}, nil)
	p.Start(context.Background(), []string{"a", "b", "broken"})
	for end := time.Now().Add(10 * time.Second); builds.Load() < 2; {
		if time.Now().After(end) {
			t.Fatal("Start did not build the drivers")
		}
		time.Sleep(time.Millisecond)
	}
	if _, ok := p.Known("a"); !ok {
		t.Fatal("a started driver is not known")
	}
	p.Close()
}
