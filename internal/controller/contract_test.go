package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
)

// These tests pin the reclaim contract on a cluster that misbehaves: the
// machine goes back at the deadline whatever the tenant's API answers,
// every pod on a draining node gets its notice, and a node the cluster
// lost or never registered is taken back and replaced.

// tenantAPI is a simulated cluster whose API can refuse any call.
type tenantAPI struct {
	*sim.Fleet
	// refuse says whether the call op (AddNode, MarkDraining, ListWork, …)
	// fails; nil refuses nothing.
	refuse func(op string) bool
	// addNode, if set, replaces AddNode's answer after the simulation
	// registered the node.
	addNode func(spec driver.NodeSpec) error
	// markDraining, if set, runs before MarkDraining reaches the simulation.
	markDraining func()
}

var errRefused = errors.New("the cluster's API refused the call")

func (a *tenantAPI) check(op string) error {
	if a.refuse != nil && a.refuse(op) {
		return errRefused
	}
	return nil
}

func (a *tenantAPI) AddNode(ctx context.Context, s driver.NodeSpec) error {
	if err := a.check("AddNode"); err != nil {
		return err
	}
	if err := a.Fleet.AddNode(ctx, s); err != nil || a.addNode == nil {
		return err
	}
	return a.addNode(s)
}
func (a *tenantAPI) MarkDraining(ctx context.Context, c, n string, m driver.Marks) error {
	if err := a.check("MarkDraining"); err != nil {
		return err
	}
	if a.markDraining != nil {
		a.markDraining()
	}
	return a.Fleet.MarkDraining(ctx, c, n, m)
}
func (a *tenantAPI) PostNotice(ctx context.Context, c, n string, w *driver.Work, e driver.Notice) error {
	if err := a.check("PostNotice"); err != nil {
		return err
	}
	return a.Fleet.PostNotice(ctx, c, n, w, e)
}
func (a *tenantAPI) ListWork(ctx context.Context, c, n string) ([]driver.Work, error) {
	if err := a.check("ListWork"); err != nil {
		return nil, err
	}
	return a.Fleet.ListWork(ctx, c, n)
}
func (a *tenantAPI) Notify(ctx context.Context, c, n string, w driver.Work, by time.Time) error {
	if err := a.check("Notify"); err != nil {
		return err
	}
	return a.Fleet.Notify(ctx, c, n, w, by)
}
func (a *tenantAPI) Release(ctx context.Context, c, n string) error {
	if err := a.check("Release"); err != nil {
		return err
	}
	return a.Fleet.Release(ctx, c, n)
}
func (a *tenantAPI) Health(ctx context.Context, c, n string) (driver.NodeHealth, error) {
	if err := a.check("Health"); err != nil {
		return driver.NodeHealth{}, err
	}
	return a.Fleet.Health(ctx, c, n)
}

// down refuses every call.
func down(string) bool { return true }

// withAPI makes h's controller drive the simulation through api.
func withAPI(h *harness, api *tenantAPI) {
	api.Fleet = h.sim
	h.lenient = true
	h.c = New(h.st, api, h.sim, h.clk, h.cfg, nil)
	h.c.NewID = func(prefix string) string { h.ids++; return fmt.Sprintf("%s%03d", prefix, h.ids) }
}

// reclaimFor creates cluster b, whose standard node needs the machine of
// a's preemptible node, and returns b's node, pending on it.
func reclaimFor(h *harness) domain.Node {
	h.t.Helper()
	h.create("b", 8, 0)
	return h.onlyNode("b", domain.Standard)
}

func (h *harness) node(id string) domain.Node {
	h.t.Helper()
	n, err := h.st.GetNode(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestMachineGoesBackAtTheDeadlineWhileTheAPIIsDown: the tenant's API
// stops answering before the notice. At the deadline the machine is taken
// back anyway and handed to the standard node waiting for it; the Node
// object is deleted once the API answers again.
func TestMachineGoesBackAtTheDeadlineWhileTheAPIIsDown(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	api := &tenantAPI{refuse: down}
	withAPI(h, api)
	tNotice := h.clk.Now()
	bn := reclaimFor(h)
	deadline := tNotice.Add(5 * time.Minute)
	h.advance(5*time.Minute - time.Second)
	if n := h.node(pre.ID); n.State != domain.NodeDraining || n.Notified {
		t.Fatalf("before the deadline: %s notified=%v", n.State, n.Notified)
	}
	h.advance(time.Second)
	n := h.node(pre.ID)
	if n.State != domain.NodeRemoving || !n.RemovedAt.Equal(deadline) || !n.DrainedAt.Equal(deadline) || !n.CleanupPending {
		t.Fatalf("at the deadline: %+v", n)
	}
	if e, ok := h.event("a", pre.ID, domain.ReasonNodeRemoved); !ok || !strings.Contains(e.Message, "cleanup pending") {
		t.Fatalf("NodeRemoved %+v", e)
	}
	// The wipe takes 5 s; then b's node starts on the machine.
	h.advance(6 * time.Second)
	if n := h.node(pre.ID); n.State != domain.NodeRemoved {
		t.Fatalf("machine not handed on: %s", n.State)
	}
	if b := h.node(bn.ID); b.State != domain.NodeProvisioning && b.State != domain.NodeReady {
		t.Fatalf("b's node %s", b.State)
	}
	// The preemptible node stopped billing at its notice.
	if stop, known, _ := billing.Stop(n); !known || !stop.Equal(tNotice) {
		t.Fatalf("billing stop %v (known %v), want T+0", stop, known)
	}
	if _, ok := h.sim.Node("a", pre.Name); !ok {
		t.Fatal("the Node object went while the API was down?")
	}
	// The API answers again: cleanup finishes within its backoff.
	api.refuse = nil
	h.advance(10 * time.Second)
	if n := h.node(pre.ID); n.CleanupPending {
		t.Fatalf("cleanup still pending: %+v", n)
	}
	if _, ok := h.sim.Node("a", pre.Name); ok {
		t.Fatal("Node object left behind after cleanup")
	}
	if e, ok := h.event("a", pre.ID, domain.ReasonCleanupFinished); !ok || !strings.Contains(e.Message, "pods left on it") {
		t.Fatalf("CleanupFinished %+v", e)
	}
}

// TestMachineGoesBackWhenDeleteNodeIsRefused: the API answers everything
// but refuses to delete the Node (an admission policy, a revoked
// permission). The drain runs as usual, the machine goes back at the
// deadline, and the Node is deleted once the refusal ends.
func TestMachineGoesBackWhenDeleteNodeIsRefused(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	api := &tenantAPI{refuse: func(op string) bool { return op == "Release" }}
	withAPI(h, api)
	tNotice := h.clk.Now()
	reclaimFor(h)
	h.advance(time.Second)
	if n := h.node(pre.ID); !n.Notified {
		t.Fatal("not notified")
	}
	h.advance(5*time.Minute + 6*time.Second) // the deadline, then the 5 s wipe
	n := h.node(pre.ID)
	if n.State != domain.NodeRemoved || !n.RemovedAt.Equal(tNotice.Add(5*time.Minute)) || !n.CleanupPending {
		t.Fatalf("after the deadline: %+v", n)
	}
	v, _ := h.sim.Node("a", pre.Name)
	for _, p := range v.Pods {
		if p.State != sim.PodGone {
			t.Fatalf("pod %s left running: %+v", p.Name, p)
		}
	}
	api.refuse = nil
	h.advance(10 * time.Second)
	if n := h.node(pre.ID); n.CleanupPending {
		t.Fatal("cleanup still pending")
	}
	if _, ok := h.sim.Node("a", pre.Name); ok {
		t.Fatal("Node object left behind")
	}
}

// TestDeletedClusterGoesAtTheDeadlineWithoutItsAPI: a cluster deleted
// after its control plane was torn down finishes deleting at its nodes'
// deadline; its standard node bills until then, not forever.
func TestDeletedClusterGoesAtTheDeadlineWithoutItsAPI(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	fillPreemptible(h)
	withAPI(h, &tenantAPI{refuse: down})
	tDel := h.clk.Now()
	if _, err := h.c.DeleteCluster(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	h.advance(5*time.Minute + 10*time.Second)
	if _, err := h.st.GetCluster(h.ctx, "a"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("cluster not gone: %v", err)
	}
	for _, n := range h.nodes("a") {
		if n.State != domain.NodeRemoved || n.RemovedAt.After(tDel.Add(5*time.Minute)) {
			t.Fatalf("node %s: %s removed at %v", n.Name, n.State, n.RemovedAt)
		}
		if stop, known, _ := billing.Stop(n); !known || stop.After(tDel.Add(5*time.Minute)) {
			t.Fatalf("%s %s bills until %v", n.Class, n.Name, stop)
		}
	}
	// Its cleanup is dropped with it: nothing keeps retrying a cluster
	// whose credentials are gone.
	h.advance(10 * time.Second)
	left, _ := h.st.ListNodes(h.ctx, store.NodeFilter{CleanupPending: true, IncludeRemoved: true})
	if len(left) != 0 {
		t.Fatalf("cleanup of a deleted cluster still pending: %+v", left)
	}
}

// TestLatePodsGetTheirNotice: a pod bound to the node after T+0 (the
// tenant's scheduler, a pod tolerating everything) gets its SIGTERM with
// grace to the deadline, and its Event, instead of a force-deletion.
func TestLatePodsGetTheirNotice(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	tNotice := h.clk.Now()
	reclaimFor(h)
	h.reconcile()
	h.advance(100 * time.Second)
	if err := h.sim.AddPod("a", pre.Name, sim.PodTemplate{Namespace: "late", Name: "early-bird", TerminationGracePeriod: time.Minute, ExitAfter: sim.NeverExits}); err != nil {
		t.Fatal(err)
	}
	h.advance(180 * time.Second) // T+280s
	if err := h.sim.AddPod("a", pre.Name, sim.PodTemplate{Namespace: "late", Name: "last-minute", TerminationGracePeriod: 2 * time.Minute, ExitAfter: sim.NeverExits}); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second)
	v, _ := h.sim.Node("a", pre.Name)
	got := map[string]sim.PodView{}
	for _, p := range v.Pods {
		got[p.Name] = p
	}
	if p := got["early-bird"]; !p.SIGTERMAt.Equal(tNotice.Add(101*time.Second)) || p.Grace != time.Minute || p.End != sim.PodKilled {
		t.Fatalf("pod bound at T+100s: %+v", p)
	}
	if p := got["last-minute"]; !p.SIGTERMAt.Equal(tNotice.Add(281*time.Second)) || p.Grace != 19*time.Second {
		t.Fatalf("pod bound at T+280s: %+v, want SIGTERM with the 19 s left", p)
	}
	for _, name := range []string{"late/early-bird", "late/last-minute"} {
		if ev := podEvents(v, name); len(ev) != 1 || ev[0].Reason != "PreemptionNotified" {
			t.Fatalf("events on %s: %+v", name, ev)
		}
	}
}

// TestUncordonDuringADrainIsUndone: the tenant uncordons the node and
// removes its taint mid-drain; the next pass marks it again.
func TestUncordonDuringADrainIsUndone(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	reclaimFor(h)
	h.reconcile()
	if err := h.sim.Uncordon("a", pre.Name); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second)
	v, _ := h.sim.Node("a", pre.Name)
	if !v.Unschedulable || len(v.Taints) != 1 || v.Taints[0].Key != domain.TaintPreempted {
		t.Fatalf("after the tenant's uncordon: unschedulable=%v taints=%+v", v.Unschedulable, v.Taints)
	}
}

// TestTerminatingPodWithALongGraceIsCut: a pod already terminating at
// T+0 with a grace period ending after the deadline is deleted again with
// the time left, so it is gone by the deadline.
func TestTerminatingPodWithALongGraceIsCut(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	if err := h.sim.Notify(h.ctx, "a", pre.Name, driver.Work{Namespace: "default", Name: "worker"}, h.clk.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	h.advance(10 * time.Second)
	tNotice := h.clk.Now()
	reclaimFor(h)
	h.reconcile()
	v, _ := h.sim.Node("a", pre.Name)
	for _, p := range v.Pods {
		if p.Name == "worker" && p.SIGTERMAt.Add(p.Grace).After(tNotice.Add(5*time.Minute)) {
			t.Fatalf("worker keeps a grace past the deadline: SIGTERM %v + %v", p.SIGTERMAt, p.Grace)
		}
	}
}

// TestJoinedButNotReadyNodeGetsTheNotice: a node whose Node object joined
// (and took pods) but that the controller has not recorded ready yet is
// drained with the full notice, not removed silently.
func TestJoinedButNotReadyNodeGetsTheNotice(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	withAPI(h, &tenantAPI{addNode: func(s driver.NodeSpec) error {
		if s.Class == domain.Preemptible {
			return driver.ErrNotReady
		}
		return nil
	}})
	h.create("a", 8, 8)
	h.reconcile()
	h.advance(20 * time.Second)
	pre := h.onlyNode("a", domain.Preemptible)
	if pre.State != domain.NodeProvisioning {
		t.Fatalf("preemptible node %s", pre.State)
	}
	if _, ok := h.sim.Node("a", pre.Name); !ok {
		t.Fatal("the node did not join the simulated cluster")
	}
	reclaimFor(h)
	n := h.node(pre.ID)
	if n.State != domain.NodeDraining || n.Deadline.IsZero() {
		t.Fatalf("a joined node reclaimed: %+v", n)
	}
	h.reconcile()
	v, _ := h.sim.Node("a", pre.Name)
	if !v.Unschedulable {
		t.Fatal("not cordoned")
	}
	for _, p := range v.Pods {
		if p.State != sim.PodTerminating || p.Grace <= 0 {
			t.Fatalf("pod %s got no graceful notice: %+v", p.Name, p)
		}
	}
}

// countingWipes counts wipes per machine and fails the test when a
// machine is wiped while another node than the one wiped for is active
// on it.
type countingWipes struct {
	driver.MachineProvider
	h     *harness
	wipes int
}

func (w *countingWipes) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	w.wipes++
	return w.MachineProvider.Wipe(ctx, m, clusterID, nodeName)
}

// TestStaleStepNeverWipesAnotherNodesMachine: a step working from a copy
// of a node read before its machine was handed on must not wipe the
// machine from under the node that has it now.
func TestStaleStepNeverWipesAnotherNodesMachine(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	reclaimFor(h)
	h.advance(31 * time.Second) // SIGTERM at T+1s, pods exit 30 s later
	stale := h.node(pre.ID)
	if stale.State != domain.NodeRemoving {
		t.Fatalf("state %s", stale.State)
	}
	h.advance(10 * time.Second) // wiped, handed to b
	if b := h.onlyNode("b", domain.Standard); b.MachineID != stale.MachineID || !b.State.Active() {
		t.Fatalf("b's node %+v", b)
	}
	w := &countingWipes{MachineProvider: h.sim, h: h}
	h.c = New(h.st, h.sim, w, h.clk, h.cfg, nil)
	// A turn of the old node, as a step that read it removing would run:
	// it reads the node as it is now.
	h.c.exec.Runner().Add(stale.ID, lifecycle.Due{})
	if errs := h.c.exec.Runner().RunDue(h.ctx); len(errs) > 0 {
		t.Fatal(errs)
	}
	if w.wipes != 0 {
		t.Fatalf("machine %s wiped %d times while it serves b", stale.MachineID, w.wipes)
	}
}

// TestOverdueWorkBacksOff: a removal whose wipe keeps failing is retried
// with backoff; the loop never plans to wake up in the past (which would
// make it spin).
func TestOverdueWorkBacksOff(t *testing.T) {
	if d := nextWait(t0.Add(-time.Second), t0, time.Second); d != time.Second {
		t.Fatalf("nextWait for overdue work: %v, want the interval", d)
	}
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	h.c = New(h.st, h.sim, wipeBroken{h.sim}, h.clk, h.cfg, nil)
	h.lenient = true
	reclaimFor(h)
	h.advance(5*time.Minute + time.Second)
	if n := h.node(pre.ID); n.State != domain.NodeRemoving {
		t.Fatalf("state %s", n.State)
	}
	for range 20 {
		next, _ := h.c.Turn(h.ctx)
		if !next.IsZero() && !next.After(h.clk.Now()) { // zero: sleep the interval
			t.Fatalf("next wake %v is not after now %v", next, h.clk.Now())
		}
		h.clk.Step(100 * time.Millisecond)
	}
}

type wipeBroken struct{ driver.MachineProvider }

func (wipeBroken) Wipe(context.Context, domain.Machine, string, string) (bool, error) {
	return false, errInjected
}

// TestDeletingAClusterWakesEventStreams: ClusterDeleting is an event like
// any other: a delete whose plan adds no event still wakes the streams.
func TestDeletingAClusterWakesEventStreams(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	fillPreemptible(h)
	reclaimFor(h) // b's only node is pending: deleting b adds no plan event
	changed := h.c.Changed()
	if _, err := h.c.DeleteCluster(h.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("event streams not woken by ClusterDeleting")
	}
	if _, ok := h.event("b", "", domain.ReasonClusterDeleting); !ok {
		t.Fatal("no ClusterDeleting event")
	}
}

// TestNodeDeletedBehindOurBackIsLost: the tenant deletes the Node object
// (kubectl delete node). The node is lost: billing stops then, its
// machine is taken back, and the target is refilled.
func TestNodeDeletedBehindOurBackIsLost(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	h.advance(time.Minute)
	tLost := h.clk.Now()
	if err := h.sim.Release(h.ctx, "a", pre.Name); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second) // the node watch reports it: a sweep at once
	n := h.node(pre.ID)
	if n.State.Live() || n.Outcome != domain.OutcomeLost || n.RemovedAt.Before(tLost) || n.RemovedAt.After(tLost.Add(time.Second)) {
		t.Fatalf("a second after its Node was deleted: %+v", n)
	}
	if e, ok := h.event("a", pre.ID, domain.ReasonNodeLost); !ok || !strings.Contains(e.Message, "deleted") {
		t.Fatalf("NodeLost %+v", e)
	}
	if stop, known, _ := billing.Stop(n); !known || !stop.Equal(n.RemovedAt) {
		t.Fatalf("billing stop %v", stop)
	}
	h.advance(30 * time.Second) // wipe, then a new node provisions
	var ready int
	for _, m := range h.nodes("a", domain.NodeReady) {
		if m.Class == domain.Preemptible {
			ready++
		}
	}
	if ready != 1 {
		t.Fatalf("target not refilled: %d preemptible nodes ready", ready)
	}
}

// TestNotReadyNodeIsLostAfterTheTimeout: a kubelet that dies leaves its
// node NotReady; after NodeLostAfter it is lost.
func TestNotReadyNodeIsLostAfterTheTimeout(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	if err := h.sim.SetReady("a", pre.Name, false); err != nil {
		t.Fatal(err)
	}
	notReady := h.clk.Now()
	h.advance(5*time.Minute - time.Second)
	if n := h.node(pre.ID); n.State != domain.NodeReady {
		t.Fatalf("lost too early: %s", n.State)
	}
	h.advance(time.Second) // the sweep is due when NodeLostAfter runs out
	if n := h.node(pre.ID); n.Outcome != domain.OutcomeLost || !n.RemovedAt.Equal(notReady.Add(5*time.Minute)) {
		t.Fatalf("NotReady for 5 min: %+v, want lost at %s", n, notReady.Add(5*time.Minute))
	}
}

// TestUnreportedNodeChangeIsFoundByTheBackstop: a Node deleted with no
// watch to report it is found by the periodic sweep, within Config.SweepEvery.
func TestUnreportedNodeChangeIsFoundByTheBackstop(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	h.sim.SetHooks(driver.Hooks{})
	h.advance(time.Minute)
	tLost := h.clk.Now()
	if err := h.sim.Release(h.ctx, "a", pre.Name); err != nil {
		t.Fatal(err)
	}
	h.advance(h.c.cfg.SweepEvery)
	n := h.node(pre.ID)
	if n.State.Live() || n.Outcome != domain.OutcomeLost || n.RemovedAt.After(tLost.Add(h.c.cfg.SweepEvery)) {
		t.Fatalf("%s after its Node was deleted unreported: %+v", h.c.cfg.SweepEvery, n)
	}
}

// TestRegistrationTimeout: a machine whose node never registers Ready goes
// back after the timeout and the node is replaced; after MaxFailures in a
// row the machine is taken out of service, with the reason.
func TestRegistrationTimeout(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	withAPI(h, &tenantAPI{addNode: func(driver.NodeSpec) error { return driver.ErrNotReady }})
	h.create("a", 8, 0)
	first := h.onlyNode("a", domain.Standard)
	h.reconcile() // the first Prepare: the window starts now
	h.advance(15*time.Minute - time.Second)
	if n := h.node(first.ID); n.State != domain.NodeProvisioning {
		t.Fatalf("before the timeout: %s", n.State)
	}
	h.advance(time.Second)
	if n := h.node(first.ID); n.State.Live() || !n.ReadyAt.IsZero() {
		t.Fatalf("after the timeout: %+v", n)
	}
	if e, ok := h.event("a", first.ID, domain.ReasonRegistrationFailed); !ok || !strings.Contains(e.Message, "did not register Ready") {
		t.Fatalf("RegistrationFailed %+v", e)
	}
	h.advance(10 * time.Second)
	if repl := h.onlyNode("a", domain.Standard); repl.ID == first.ID {
		t.Fatal("node not replaced")
	}
	m, _ := h.st.GetMachine(h.ctx, first.MachineID)
	if m.Failures != 1 || m.OutOfService {
		t.Fatalf("machine after one failure: %+v", m)
	}
	h.advance(31 * time.Minute)
	m, _ = h.st.GetMachine(h.ctx, first.MachineID)
	if !m.OutOfService || m.Failures != MaxFailures || !strings.Contains(m.OutOfServiceReason, "did not register Ready") {
		t.Fatalf("machine after %d failures: %+v", MaxFailures, m)
	}
}

// TestRegisteredNodeClearsMachineFailures: failures count in a row, so a
// node that registers on a machine that failed once clears its count.
func TestRegisteredNodeClearsMachineFailures(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	var accept atomic.Bool
	withAPI(h, &tenantAPI{addNode: func(driver.NodeSpec) error {
		if accept.Load() {
			return nil
		}
		return driver.ErrNotReady
	}})
	h.create("a", 8, 0)
	first := h.onlyNode("a", domain.Standard)
	h.reconcile()
	h.advance(15*time.Minute + 10*time.Second)
	if m, _ := h.st.GetMachine(h.ctx, first.MachineID); m.Failures != 1 {
		t.Fatalf("machine after one failure: %+v", m)
	}
	accept.Store(true)
	h.advance(5 * time.Minute)
	repl := h.onlyNode("a", domain.Standard)
	if repl.ID == first.ID || repl.State != domain.NodeReady {
		t.Fatalf("replacement %s: %s (%s)", repl.ID, repl.State, repl.LastError)
	}
	if m, _ := h.st.GetMachine(h.ctx, first.MachineID); m.Failures != 0 {
		t.Fatalf("machine after a node registered on it: %+v", m)
	}
}

// TestLateStepFindsNodeRegistered: a provisioning step that runs only
// after the registration deadline (a controller too busy to step the node
// sooner) still asks the node first: one that registered becomes ready,
// and its machine is not blamed.
func TestLateStepFindsNodeRegistered(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	h.create("a", 8, 0)
	n := h.onlyNode("a", domain.Standard)
	h.reconcile() // the machine starts booting
	// No pass for 16 minutes: the node joined long ago, unseen.
	h.clk.Step(16 * time.Minute)
	h.reconcile()
	got := h.node(n.ID)
	if got.State != domain.NodeReady {
		t.Fatalf("a node that registered, stepped after the deadline: %s (%s)", got.State, got.LastError)
	}
	if _, failed := h.event("a", n.ID, domain.ReasonRegistrationFailed); failed {
		t.Fatal("RegistrationFailed for a node that registered")
	}
	if m, _ := h.st.GetMachine(h.ctx, n.MachineID); m.Failures != 0 {
		t.Fatalf("machine blamed: %+v", m)
	}
}

// TestQueuedFirstStepGetsItsWindow: a node whose first provisioning step
// runs only after the registration window (its step queued behind
// thousands in a busy controller) was never started on its machine: the
// window counts from the first Prepare the provider accepted, so the node
// is not failed and its machine is not blamed.
func TestQueuedFirstStepGetsItsWindow(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	h.create("a", 8, 0)
	n := h.onlyNode("a", domain.Standard)
	// No step for 16 minutes: the machine was never asked to prepare.
	h.clk.Step(16 * time.Minute)
	h.reconcile() // the first Prepare: the machine starts booting now
	if got := h.node(n.ID); got.State != domain.NodeProvisioning {
		t.Fatalf("a node first stepped after the window: %s (%s)", got.State, got.LastError)
	}
	h.advance(5 * time.Minute)
	if got := h.node(n.ID); got.State != domain.NodeReady {
		t.Fatalf("5 min after its first Prepare: %s (%s)", got.State, got.LastError)
	}
	if _, failed := h.event("a", n.ID, domain.ReasonRegistrationFailed); failed {
		t.Fatal("RegistrationFailed for a node whose machine was never asked in time")
	}
	if m, _ := h.st.GetMachine(h.ctx, n.MachineID); m.Failures != 0 {
		t.Fatalf("machine blamed: %+v", m)
	}
}

// TestPreparingForgetsNodesThatLeft: a node removed while provisioning
// (its cluster deleted) leaves no record of its first Prepare behind.
func TestPreparingForgetsNodesThatLeft(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	h.create("a", 8, 0)
	n := h.onlyNode("a", domain.Standard)
	h.reconcile()
	if h.c.exec.FirstPrepare(n.ID).IsZero() {
		t.Fatal("the first Prepare was not recorded")
	}
	if _, err := h.c.DeleteCluster(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Minute)
	if got := h.node(n.ID); got.State.Live() {
		t.Fatalf("node of a deleted cluster: %s", got.State)
	}
	if at := h.c.exec.FirstPrepare(n.ID); !at.IsZero() {
		t.Fatalf("the record of its first Prepare (%s) is left", at)
	}
}

// TestBackgroundWorkAnswersWaitingCreatesFirst: whoever takes the plan
// lock for background work (a node's transition, a replan) first answers
// the creates waiting for it, so a client's create never queues behind a
// fleet's worth of node steps.
func TestBackgroundWorkAnswersWaitingCreatesFirst(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	r := &createReq{cl: domain.Cluster{ID: "a", Name: "a", ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 8}, done: make(chan struct{})}
	h.c.cq.push(r)
	h.c.lock(h.ctx)
	h.c.mu.Unlock()
	select {
	case <-r.done:
	default:
		t.Fatal("the waiting create was not answered by the lock's holder")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := h.onlyNode("a", domain.Standard); got.State != domain.NodeProvisioning {
		t.Fatalf("the create's node: %s", got.State)
	}
}

// TestNoticesDoNotWaitBehindOtherSteps: every worker is held by a
// provisioning step stuck in a slow cluster API, and a reclaim's notice
// still goes out at once: notices have workers of their own.
func TestNoticesDoNotWaitBehindOtherSteps(t *testing.T) {
	h := newHarness(t, quickPods, 3)
	pre := fillPreemptible(h)
	h.cfg.Workers = 1
	var stuck atomic.Bool
	release := make(chan struct{})
	withAPI(h, &tenantAPI{addNode: func(s driver.NodeSpec) error {
		if s.ClusterID == "x" {
			stuck.Store(true)
			<-release
		}
		return nil
	}})
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() { close(release) }) // first: the stuck step returns
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("10s (wall) on, still waiting for %s", what)
			}
			h.clk.Step(100 * time.Millisecond)
		}
	}
	h.create("x", 8, 0) // the free machine: its node's AddNode hangs
	waitFor("x's node to hang in AddNode, holding the only worker", stuck.Load)
	h.create("b", 8, 0) // reclaims a's preemptible node
	waitFor("the notice of a's preemptible node", func() bool { return h.node(pre.ID).Notified })
}

// TestNoticesRunTogether: a burst's notices run at once, NoticeWorkers of
// them, not Workers: each of four cordons waits until all four have
// reached the cluster's API, which only happens if four run together.
func TestNoticesRunTogether(t *testing.T) {
	const burst = 4
	h := newHarness(t, quickPods, 1+burst)
	h.create("a", 8, 8*burst)
	h.reconcile()
	h.advance(20 * time.Second)
	if got := len(h.nodes("a", domain.NodeReady)); got != 1+burst {
		t.Fatalf("%d of a's nodes ready, want %d", got, 1+burst)
	}
	h.cfg.Workers, h.cfg.NoticeWorkers = 1, burst
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
		stop    = make(chan struct{})
	)
	withAPI(h, &tenantAPI{markDraining: func() {
		mu.Lock()
		if arrived++; arrived == burst {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-stop:
		}
	}})
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() { close(stop) }) // first: cordons held at the barrier return
	h.create("b", 8*burst, 0)         // reclaims a's four preemptible nodes
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		notified := 0
		for _, n := range h.nodes("a") {
			if n.Class == domain.Preemptible && n.Notified {
				notified++
			}
		}
		if notified == burst {
			return
		}
		if time.Now().After(end) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("10s (wall) on, %d of %d notices delivered; %d cordons reached the API together", notified, burst, arrived)
		}
		h.clk.Step(100 * time.Millisecond)
	}
}

// TestCourtesiesNeverHoldTheNotice: the cluster refuses every courtesy of
// a drain (the marks and every Event). The pods still get their SIGTERM at
// T+0, the notice is recorded, the node goes as soon as they exit, and its
// cleanup (the Node object) is not left pending for want of an Event.
func TestCourtesiesNeverHoldTheNotice(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	courtesies := []string{"MarkDraining", "PostNotice"}
	withAPI(h, &tenantAPI{refuse: func(op string) bool { return slices.Contains(courtesies, op) }})
	tNotice := h.clk.Now()
	reclaimFor(h)
	h.reconcile()
	v, _ := h.sim.Node("a", pre.Name)
	for _, p := range v.Pods {
		if p.State != sim.PodTerminating || !p.SIGTERMAt.Equal(tNotice) {
			t.Fatalf("pod %s at T+0: %+v", p.Name, p)
		}
	}
	if n := h.node(pre.ID); !n.Notified {
		t.Fatal("the notice is not recorded: a refused courtesy held it")
	}
	h.advance(40 * time.Second) // the pods exit 30 s after SIGTERM; the wipe takes 5 s
	n := h.node(pre.ID)
	if n.State != domain.NodeRemoved || n.Outcome != domain.OutcomeEarly || n.CleanupPending {
		t.Fatalf("after the pods exited: %s, outcome %s, cleanup pending %v (%s)", n.State, n.Outcome, n.CleanupPending, n.LastError)
	}
	if _, ok := h.sim.Node("a", pre.Name); ok {
		t.Fatal("Node object left behind")
	}
}
