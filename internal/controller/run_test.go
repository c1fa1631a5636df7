package controller

import (
	"context"
	"github.com/sparecap/sparecap/internal/allocator"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// These tests drive the controller the way the server does, with Run:
// node steps are the step runner's, scheduled by each step's answer and
// by the commits that change nodes, never by a walk of every node.

// run starts h.c's loop until the test ends.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	c := h.c
	go func() { c.Run(ctx); close(done) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

// until steps the clock 100 ms at a time until ok, and returns the clock
// time it took; it fails the test after 10 s of wall time.
func (h *harness) until(what string, ok func() bool) time.Duration {
	h.t.Helper()
	start := h.clk.Now()
	for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			h.t.Fatalf("10s (wall), %s of clock time on, still waiting for %s", h.clk.Now().Sub(start), what)
		}
		h.clk.Step(100 * time.Millisecond)
	}
	return h.clk.Now().Sub(start)
}

// stepTo steps the clock 100 ms at a time, every 2 ms of wall time, to t
// and not past it.
func (h *harness) stepTo(t time.Time) {
	for now := h.clk.Now(); now.Before(t); now = h.clk.Now() {
		h.clk.Step(min(100*time.Millisecond, t.Sub(now)))
		time.Sleep(2 * time.Millisecond)
	}
}

// wait waits, without moving the clock, until ok; it fails the test
// after 10 s of wall time.
func (h *harness) wait(what string, ok func() bool) {
	h.t.Helper()
	for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			h.t.Fatalf("10s (wall) at %s, still waiting for %s", h.clk.Now(), what)
		}
	}
}

func TestRunTakesANodeFromPlanToRemovalOnItsOwnSchedule(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	h.run()
	h.create("a", 8, 0)
	n := h.onlyNode("a", domain.Standard)
	// The machine takes 20 s to prepare; the node is asked every second.
	if took := h.until("the node to be ready", func() bool { return h.node(n.ID).State == domain.NodeReady }); took > 25*time.Second {
		t.Errorf("ready %s after the create, want about 20 s", took)
	}
	if _, err := h.c.DeleteCluster(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// Its pods exit 30 s after their notice; the wipe takes 5 s.
	if took := h.until("the node to be removed", func() bool { return h.node(n.ID).State == domain.NodeRemoved }); took > 41*time.Second {
		t.Errorf("removed %s after the delete, want about 35 s", took)
	}
	if got := h.node(n.ID); got.Outcome != domain.OutcomeEarly {
		t.Errorf("outcome %s", got.Outcome)
	}
}

// A new leader's controller has nothing queued: it hands every node in
// flight to its runner once, at the start of its term.
func TestANewTermStepsEveryNodeInFlight(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	h.create("a", 8, 0)
	n := h.onlyNode("a", domain.Standard)
	if n.State != domain.NodeProvisioning {
		t.Fatalf("state %s", n.State)
	}
	h.c = New(h.st, h.sim, h.sim, h.clk, h.cfg, nil) // the next leader
	h.run()
	h.until("the node to be ready under the new leader", func() bool { return h.node(n.ID).State == domain.NodeReady })
}

// countingAPI counts the calls listing a node's work, and keeps the hooks
// the controller set.
type countingAPI struct {
	*tenantAPI
	lists atomic.Int64
	mu    sync.Mutex
	hooks driver.Hooks
}

func (a *countingAPI) ListWork(ctx context.Context, c, n string) ([]driver.Work, error) {
	a.lists.Add(1)
	return a.tenantAPI.ListWork(ctx, c, n)
}

func (a *countingAPI) SetHooks(hk driver.Hooks) {
	a.mu.Lock()
	a.hooks = hk
	a.mu.Unlock()
	a.tenantAPI.SetHooks(hk)
}

func withCounting(h *harness) *countingAPI {
	api := &countingAPI{tenantAPI: &tenantAPI{Fleet: h.sim}}
	h.lenient = true
	h.c = New(h.st, api, h.sim, h.clk, h.cfg, nil)
	return api
}

// silent is a cluster driver that cannot tell: no wakes reach the
// controller, and it does not say it tells (no Tells), so steps poll.
type silent struct{ *countingAPI }

func (silent) SetHooks(driver.Hooks) {}

func (silent) Tells(string) bool { return false }

// A drain waiting for its work is woken by its driver, never by the loop's
// passes: on a driver that tells, it does not look at its work again
// until told (its stubborn pod never exits: until the deadline); on one
// that cannot tell, once a poll, however often the loop runs.
func TestADrainWaitsToBeToldNotForThePasses(t *testing.T) {
	for _, tells := range []bool{true, false} {
		t.Run(map[bool]string{true: "tells", false: "polls"}[tells], func(t *testing.T) {
			h := newHarness(t, stubbornPods, 2)
			pre := fillPreemptible(h)
			api := withCounting(h)
			if !tells {
				h.c = New(h.st, silent{api}, h.sim, h.clk, h.cfg, nil)
			}
			h.run()
			reclaimFor(h)
			h.until("the notice", func() bool { return h.node(pre.ID).Notified })
			from := api.lists.Load()
			for range 300 { // 30 s of clock time, the loop kicked at every tick
				h.clk.Step(100 * time.Millisecond)
				h.c.Kick()
				time.Sleep(time.Millisecond)
			}
			got := api.lists.Load() - from
			if tells && got != 0 {
				t.Errorf("the drain listed its work %d times in 30 s with nothing to tell it, the loop kicked 300 times", got)
			}
			if !tells && (got < 10 || got > 40) {
				t.Errorf("the drain listed its work %d times in 30 s of polls at 1 s, with the loop kicked 300 times", got)
			}
		})
	}
}

// What a driver sees of one node wakes that node alone: of two drains
// whose pods are both gone, the one woken ends early, the other waits (no
// poll: the driver tells) for its own word or its deadline.
func TestAWakeReachesItsNodeAlone(t *testing.T) {
	h := newHarness(t, quickPods, 3)
	h.create("a", 8, 16)
	h.advance(time.Minute)
	pres := h.nodes("a", domain.NodeReady)
	var ids []string
	for _, n := range pres {
		if n.Class == domain.Preemptible {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("preemptible nodes %v", ids)
	}
	h.cfg.SweepEvery = time.Hour // no backstop meanwhile
	api := withCounting(h)
	h.c = New(h.st, api, h.sim, h.clk, h.cfg, nil)
	api.mu.Lock()
	wake := api.hooks.Wake
	api.mu.Unlock()
	h.sim.SetHooks(driver.Hooks{}) // the fleet's own word is lost
	zero := 0
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &zero}); err != nil {
		t.Fatal(err)
	}
	h.reconcile() // the notices
	h.clk.Step(31 * time.Second)
	h.reconcile()
	for _, id := range ids {
		if got := h.node(id); got.State != domain.NodeDraining || !got.Notified {
			t.Fatalf("%s before any word: %s", id, got.State)
		}
	}
	first := h.node(ids[0])
	wake("a", first.Name, time.Time{})
	h.reconcile()
	if got := h.node(ids[0]); got.State == domain.NodeDraining || got.Outcome != domain.OutcomeEarly {
		t.Errorf("the woken node: %s, outcome %s", got.State, got.Outcome)
	}
	if got := h.node(ids[1]); got.State != domain.NodeDraining {
		t.Errorf("the other node moved without a word: %s", got.State)
	}
}

// Node steps that move nodes wake the loop to replan, at most every half
// interval however many move: while a fleet comes up, a replan after each
// batch of transitions held the plan lock they commit under.
func TestStepMovesReplanAtMostEveryHalfInterval(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	var plans atomic.Int64
	h.c.checkParts = func(allocator.Plan, allocator.Token, time.Time, allocator.Config) { plans.Add(1) }
	h.run()
	settle := func() int64 { return settled(&plans) }
	before := settle()
	for range 100 {
		h.c.movedNodes()
		time.Sleep(time.Millisecond)
	}
	mid := settle()
	if got := mid - before; got > 2 {
		t.Fatalf("%d plans for 100 step moves within half an interval, want at most 2", got)
	}
	h.clk.Step(h.c.cfg.Interval / 2)
	h.c.movedNodes()
	h.until("a replan once half an interval passed", func() bool { return plans.Load() > mid })
}

// settled waits until n stops changing for 100 ms (wall) and returns it.
// (20 ms was too short on a loaded 2-core machine: a pass still to come
// of what came before was then counted as the next step's.)
func settled(n *atomic.Int64) int64 {
	for last := int64(-1); ; time.Sleep(100 * time.Millisecond) {
		if got := n.Load(); got == last {
			return got
		} else {
			last = got
		}
	}
}

// A pass that takes long (at a million GPUs a plan and its commit take
// 40-60 ms) spaces the passes made for step moves out to four times its
// length, not half an interval, so they hold the plan lock a fifth of the
// time at most.
func TestSlowPassesSpaceOutTheReplansForMoves(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	var plans atomic.Int64
	var slow atomic.Bool
	took := 2 * h.c.cfg.Interval
	counted := func() {
		plans.Add(1)
		if slow.CompareAndSwap(true, false) {
			h.clk.Step(took) // this pass takes that long
		}
	}
	h.c.checkParts = func(allocator.Plan, allocator.Token, time.Time, allocator.Config) { counted() }
	h.run()
	before := settled(&plans)
	slow.Store(true)
	h.c.Kick()
	h.until("the slow pass", func() bool { return !slow.Load() })
	if got := replanGap(h.c.cfg.Interval, took); got != 4*took {
		t.Fatalf("gap after a pass of %s: %s, want %s", took, got, 4*took)
	}
	mid := settled(&plans)
	if mid <= before {
		t.Fatal("no pass was counted")
	}
	h.c.movedNodes()
	h.clk.Step(h.c.cfg.Interval) // past half an interval, within four slow passes
	if got := settled(&plans); got != mid {
		t.Fatalf("%d passes for a step move an interval after a pass of %s, want none until %s after its start", got-mid, took, 4*took)
	}
	h.until("the pass for the move", func() bool { return plans.Load() > mid })
	if since := h.clk.Now().Sub(t0); since < 4*took {
		t.Errorf("the pass for the move came %s after the start, before 4 x %s", since, took)
	}
}

// Under Run, with the tenant's API down from the notice on: the failed
// notice backs off, yet the runner runs the deadline step at the deadline
// (its By), the machine goes back then, and the cleanup left pending is
// retried on the runner's schedule until the API answers again.
func TestRunMeetsTheDeadlineWhileTheAPIIsDown(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	var isDown atomic.Bool
	isDown.Store(true)
	withAPI(h, &tenantAPI{refuse: func(string) bool { return isDown.Load() }})
	h.run()
	tNotice := h.clk.Now()
	reclaimFor(h)
	deadline := tNotice.Add(5 * time.Minute)
	// The clock runs to the deadline while the notice fails again and
	// again, its backoff growing, and stays there: the deadline step must
	// run at it, not wait for the backoff to end. (A clock stepped on
	// while a busy machine runs the step would make it look late.)
	h.stepTo(deadline)
	if h.c.exec.Runner().Err(pre.ID) == nil {
		t.Fatal("the notice never failed")
	}
	h.wait("the deadline step at the deadline", func() bool { return h.node(pre.ID).State != domain.NodeDraining })
	n := h.node(pre.ID)
	if !n.RemovedAt.Equal(deadline) || !n.CleanupPending || n.Notified {
		t.Fatalf("at the deadline (%s): %+v", deadline, n)
	}
	h.until("the machine's hand-over", func() bool { return h.node(pre.ID).State == domain.NodeRemoved })
	isDown.Store(false)
	h.until("the cleanup once the API answers", func() bool { return !h.node(pre.ID).CleanupPending })
	if _, ok := h.sim.Node("a", pre.Name); ok {
		t.Fatal("the Node object is left after the cleanup")
	}
}
