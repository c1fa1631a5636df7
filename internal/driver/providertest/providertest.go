// Package providertest is the behaviour suite every
// driver.MachineProvider passes: the simulated fleet (internal/sim), the
// register provider (internal/kube, against a real API server) and the
// exec provider (internal/provider/exechook, running a hook that behaves
// like a site's). What the controller relies on is written here once:
// Prepare and Wipe are polled until done and report done only once the
// work is; a call repeated after done stays done and starts nothing new
// (the controller asks Prepare again on every turn until the node
// registers, and after a crash); a Prepare for another node after a Wipe
// starts anew; an error is returned, never reported as done; a call on a
// cancelled context returns at once; and a provider that says it tells
// (driver.Teller) wakes the node when the work it reported not done is
// done, so a step waiting on it needs no poll.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Harness is one machine provider and what the outside world shows of
// the machines it works on.
type Harness interface {
	Provider() driver.MachineProvider
	// ClusterID is the cluster the suite's nodes join: one the provider
	// can prepare machines for (attached, for a provider that reaches
	// the cluster).
	ClusterID() string
	// Machine is what the outside world shows of machine m and the node
	// nodeName of cluster clusterID.
	Machine(t *testing.T, m domain.Machine, clusterID, nodeName string) Machine
	// Failing returns a machine and a node of ClusterID whose Prepare
	// fails (a hook that exits non-zero, an attachment that cannot be
	// read); wipeFails says whether their Wipe fails too.
	Failing(t *testing.T) (m domain.Machine, spec driver.NodeSpec, wipeFails bool)
	// Pass lets d go by (a fake clock advances; real time is waited).
	Pass(d time.Duration)
	// Now is the time on the provider's clock.
	Now() time.Time
}

// Machine is what the outside world shows of a machine.
type Machine struct {
	// Prepared: the machine serves the node (the hook's record says so,
	// the simulated machine holds it, its Node is registered Ready).
	Prepared bool
	// Wiped: the machine was wiped after the node (true where there is
	// nothing to wipe).
	Wiped bool
	// Work names the last work the provider started for the node on the
	// machine (a hook run, a simulated job, a Node object); it changes
	// whenever the provider starts that work again.
	Work string
}

// Poll is how long the suite lets pass between two calls of a poll, and
// Within how long it polls before it gives up.
const (
	Poll   = 100 * time.Millisecond
	Within = time.Minute
)

// Run runs the suite. Every test uses machines and nodes of its own, so
// one provider serves them all.
func Run(t *testing.T, h Harness) {
	t.Run("Prepare", func(t *testing.T) { testPrepare(t, h) })
	t.Run("Wipe", func(t *testing.T) { testWipe(t, h) })
	t.Run("PrepareAfterWipe", func(t *testing.T) { testPrepareAfterWipe(t, h) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, h) })
	t.Run("Cancelled", func(t *testing.T) { testCancelled(t, h) })
	t.Run("Wakes", func(t *testing.T) { testWakes(t, h) })
}

// Spec is the node nodeName of h's cluster on machine m, as the
// controller asks a provider to prepare it.
func Spec(h Harness, m domain.Machine, nodeName string) driver.NodeSpec {
	return driver.NodeSpec{ClusterID: h.ClusterID(), NodeName: nodeName, MachineID: m.ID, Class: domain.Preemptible, GPUs: m.GPUs,
		Platform: domain.ClusterKubernetes,
		Labels:   map[string]string{domain.LabelComputeClass: string(domain.Preemptible)}}
}

func machine(id string) domain.Machine {
	return domain.Machine{ID: id, Region: "us-east", GPUType: "H100", GPUs: 8}
}

// call is one Prepare or Wipe.
type call func(ctx context.Context) (bool, error)

func prepare(h Harness, m domain.Machine, spec driver.NodeSpec) call {
	return func(ctx context.Context) (bool, error) { return h.Provider().Prepare(ctx, m, spec) }
}

func wipe(h Harness, m domain.Machine, clusterID, nodeName string) call {
	return func(ctx context.Context) (bool, error) { return h.Provider().Wipe(ctx, m, clusterID, nodeName) }
}

// poll calls c, letting Poll pass between calls, until it reports done
// or an error, as the controller does; it fails the test if that takes
// longer than Within, or if a call reports done with an error.
func poll(t *testing.T, h Harness, what string, c call) error {
	t.Helper()
	for waited := time.Duration(0); ; waited += Poll {
		done, err := c(context.Background())
		if done && err != nil {
			t.Fatalf("%s reported done with an error: %v", what, err)
		}
		if done || err != nil {
			return err
		}
		if waited >= Within {
			t.Fatalf("%s not done after %s", what, Within)
		}
		h.Pass(Poll)
	}
}

// untilDone polls c until it is done, failing the test on an error.
func untilDone(t *testing.T, h Harness, what string, c call) {
	t.Helper()
	if err := poll(t, h, what, c); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// staysDone calls c again a few times, Poll apart: each must report done
// and start no new work (Work of the machine and node unchanged).
func staysDone(t *testing.T, h Harness, what string, c call, work func() string) {
	t.Helper()
	before := work()
	for i := range 3 {
		h.Pass(Poll)
		if done, err := c(context.Background()); !done || err != nil {
			t.Fatalf("%s repeated after done (call %d) = %v, %v; want done", what, i+1, done, err)
		}
	}
	if after := work(); after != before {
		t.Fatalf("%s repeated after done started new work: %q, was %q", what, after, before)
	}
}

// testPrepare: Prepare is polled until done, and done means the machine
// serves the node; asked again it stays done and starts nothing new.
func testPrepare(t *testing.T, h Harness) {
	m := machine("m-pt-prepare")
	spec := Spec(h, m, "pt-prepare")
	untilDone(t, h, "Prepare", prepare(h, m, spec))
	if !h.Machine(t, m, spec.ClusterID, spec.NodeName).Prepared {
		t.Fatal("Prepare reported done before the machine was prepared")
	}
	staysDone(t, h, "Prepare", prepare(h, m, spec), func() string { return h.Machine(t, m, spec.ClusterID, spec.NodeName).Work })
}

// testWipe: Wipe after the node is polled until done, and done means the
// machine is wiped; asked again it stays done and starts nothing new.
func testWipe(t *testing.T, h Harness) {
	m := machine("m-pt-wipe")
	spec := Spec(h, m, "pt-wipe")
	untilDone(t, h, "Prepare", prepare(h, m, spec))
	untilDone(t, h, "Wipe", wipe(h, m, spec.ClusterID, spec.NodeName))
	if !h.Machine(t, m, spec.ClusterID, spec.NodeName).Wiped {
		t.Fatal("Wipe reported done before the machine was wiped")
	}
	staysDone(t, h, "Wipe", wipe(h, m, spec.ClusterID, spec.NodeName), func() string { return h.Machine(t, m, spec.ClusterID, spec.NodeName).Work })
}

// testPrepareAfterWipe: a machine wiped after one node and prepared for
// the next is prepared anew, for the new node: the old node's done is
// not the new one's.
func testPrepareAfterWipe(t *testing.T, h Harness) {
	m := machine("m-pt-again")
	first, next := Spec(h, m, "pt-again-1"), Spec(h, m, "pt-again-2")
	untilDone(t, h, "Prepare", prepare(h, m, first))
	untilDone(t, h, "Wipe", wipe(h, m, first.ClusterID, first.NodeName))
	untilDone(t, h, "Prepare for the next node", prepare(h, m, next))
	if !h.Machine(t, m, next.ClusterID, next.NodeName).Prepared {
		t.Fatal("Prepare for the next node reported done before the machine was prepared for it")
	}
	staysDone(t, h, "Prepare for the next node", prepare(h, m, next), func() string { return h.Machine(t, m, next.ClusterID, next.NodeName).Work })
}

// testErrors: a failure is returned (never done), and asked again the
// provider tries again and reports the failure again, never done.
func testErrors(t *testing.T, h Harness) {
	m, spec, wipeFails := h.Failing(t)
	calls := map[string]call{"Prepare": prepare(h, m, spec)}
	if wipeFails {
		calls["Wipe"] = wipe(h, m, spec.ClusterID, spec.NodeName)
	}
	for what, c := range calls {
		for i := range 2 {
			err := poll(t, h, what, c)
			if err == nil {
				t.Fatalf("%s of a failing machine reported done (try %d)", what, i+1)
			}
			t.Logf("%s: %v", what, err)
		}
	}
}

// testCancelled: a call on a cancelled context returns promptly with the
// context's error, reports nothing done and starts no work.
func testCancelled(t *testing.T, h Harness) {
	m := machine("m-pt-cancelled")
	spec := Spec(h, m, "pt-cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for what, c := range map[string]call{"Prepare": prepare(h, m, spec), "Wipe": wipe(h, m, spec.ClusterID, spec.NodeName)} {
		before := h.Machine(t, m, spec.ClusterID, spec.NodeName)
		type result struct {
			done bool
			err  error
		}
		got := make(chan result, 1)
		go func() {
			done, err := c(ctx)
			got <- result{done, err}
		}()
		select {
		case r := <-got:
			if r.done || !errors.Is(r.err, context.Canceled) {
				t.Errorf("%s on a cancelled context = %v, %v; want not done, context.Canceled", what, r.done, r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on a cancelled context did not return", what)
		}
		if after := h.Machine(t, m, spec.ClusterID, spec.NodeName); after != before {
			t.Errorf("%s on a cancelled context started work: %+v, was %+v", what, after, before)
		}
	}
}

// wake is one Hooks.Wake of a node.
type wake struct {
	cluster, node string
	at            time.Time
}

// testWakes: a provider that tells wakes the node of a Prepare or Wipe it
// reported not done, at a time when it is done: a step that runs only
// when woken gets to done.
func testWakes(t *testing.T, h Harness) {
	p := h.Provider()
	if !driver.Tells(p, h.ClusterID()) {
		t.Skip("the provider does not tell (driver.Teller): its steps poll")
	}
	// The controller sets a provider's hooks as it sets its cluster
	// driver's, where it has them.
	hooked, ok := p.(interface{ SetHooks(driver.Hooks) })
	if !ok {
		t.Fatal("the provider says it tells, but takes no hooks (SetHooks) to tell with")
	}
	wakes := make(chan wake, 1024)
	hooked.SetHooks(driver.Hooks{Wake: func(cluster, node string, at time.Time) {
		select {
		case wakes <- wake{cluster, node, at}:
		default:
		}
	}})
	defer hooked.SetHooks(driver.Hooks{})
	m := machine("m-pt-wakes")
	spec := Spec(h, m, "pt-wakes")
	onlyWoken(t, h, "Prepare", prepare(h, m, spec), spec, wakes)
	onlyWoken(t, h, "Wipe", wipe(h, m, spec.ClusterID, spec.NodeName), spec, wakes)
}

// onlyWoken runs c as a step that runs only when its node is woken: after
// each call that is not done, it waits for the node's latest wake and
// lets time pass until then.
func onlyWoken(t *testing.T, h Harness, what string, c call, spec driver.NodeSpec, wakes <-chan wake) {
	t.Helper()
	for i := 0; ; i++ {
		done, err := c(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if done {
			return
		}
		if i == 10 {
			t.Fatalf("%s not done after %d wakes", what, i)
		}
		at, err := woken(wakes, spec)
		if err != nil {
			t.Fatalf("%s reported not done: %v", what, err)
		}
		if d := at.Sub(h.Now()); d > 0 {
			h.Pass(d)
		}
	}
}

// woken waits for a wake of the node (a Teller may wake it after the call
// returns), and returns the time of the latest of those come by then (the
// zero time: now).
func woken(wakes <-chan wake, spec driver.NodeSpec) (time.Time, error) {
	timeout := time.After(10 * time.Second)
	var at time.Time
	for got := false; ; {
		var w wake
		if got {
			select {
			case w = <-wakes:
			default:
				return at, nil
			}
		} else {
			select {
			case w = <-wakes:
			case <-timeout:
				return at, fmt.Errorf("node %s was never woken", spec.NodeName)
			}
		}
		if w.cluster == spec.ClusterID && w.node == spec.NodeName {
			got = true
			if w.at.After(at) {
				at = w.at
			}
		}
	}
}
