package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
)

// flaky fails driver calls on demand, standing in for a process killed in
// the middle of acting on the outside world (whatever it did before the
// failure stays done, and nothing after it happens) and for a tenant's
// API that refuses calls or never answers them.
type flaky struct {
	driver.ClusterDriver
	driver.MachineProvider
	fail func() bool
	// hang, if set, is asked after fail: a call that hangs costs clock time
	// (see hangFor) and then fails as a timed-out call does.
	hang func() bool
	clk  interface{ Step(time.Duration) }
	// wiped, if set, is called before each wipe.
	wiped func(m domain.Machine, clusterID, nodeName string)
}

var errInjected = errors.New("injected failure")

// hangFor is the clock time a hanging call costs before it times out.
const hangFor = 200 * time.Millisecond

func (f *flaky) check() error {
	if f.fail() {
		return errInjected
	}
	if f.hang != nil && f.hang() {
		f.clk.Step(hangFor)
		return context.DeadlineExceeded
	}
	return nil
}

func (f *flaky) MarkDraining(ctx context.Context, c, n string, m driver.Marks) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.ClusterDriver.MarkDraining(ctx, c, n, m)
}
func (f *flaky) ListWork(ctx context.Context, c, n string) ([]driver.Work, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.ClusterDriver.ListWork(ctx, c, n)
}
func (f *flaky) PostNotice(ctx context.Context, c, n string, w *driver.Work, e driver.Notice) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.ClusterDriver.PostNotice(ctx, c, n, w, e)
}
func (f *flaky) AddNode(ctx context.Context, s driver.NodeSpec) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.ClusterDriver.AddNode(ctx, s)
}
func (f *flaky) Notify(ctx context.Context, c, n string, w driver.Work, by time.Time) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.ClusterDriver.Notify(ctx, c, n, w, by)
}
func (f *flaky) Release(ctx context.Context, c, n string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.ClusterDriver.Release(ctx, c, n)
}
func (f *flaky) Prepare(ctx context.Context, m domain.Machine, s driver.NodeSpec) (bool, error) {
	if err := f.check(); err != nil {
		return false, err
	}
	return f.MachineProvider.Prepare(ctx, m, s)
}
func (f *flaky) Wipe(ctx context.Context, m domain.Machine, c, n string) (bool, error) {
	if f.wiped != nil {
		f.wiped(m, c, n)
	}
	if err := f.check(); err != nil {
		return false, err
	}
	return f.MachineProvider.Wipe(ctx, m, c, n)
}

// TestDrainsEndByDeadlineDespiteCrashes runs random workloads through
// random tenant actions, with driver calls failing or hanging (ListWork,
// PostNotice, Release and the rest) and the controller restarting at
// random moments, and checks that every machine is back by its deadline
// plus one reconcile interval whatever the cluster answers, that no
// machine is ever wiped while another node holds it, that no machine ever
// serves two live nodes, and that every target is eventually met.
func TestDrainsEndByDeadlineDespiteCrashes(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pods := []sim.PodTemplate{{
			Name:                   "worker",
			TerminationGracePeriod: time.Duration(rapid.IntRange(0, 900).Draw(rt, "grace")) * time.Second,
			ExitAfter:              time.Duration(rapid.IntRange(-1, 600).Draw(rt, "exitAfter")) * time.Second,
		}}
		h := newHarness(t, pods, 4)
		h.lenient = true // injected failures are retried, as the loop retries them
		ctx0 := context.Background()
		strictSince = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		h.cfg.Cooldown = time.Duration(rapid.IntRange(-1, 60).Draw(rt, "cooldown")) * time.Second
		// One step at a time, in order: rapid's draws (the injected
		// failures) must come from one goroutine and repeat on replay.
		h.cfg.Workers = 1
		// The retry jitter comes from the run's seed: a failure replays.
		h.cfg.Random = random.New(rapid.Uint64().Draw(rt, "seed"))
		failRate := rapid.IntRange(0, 30).Draw(rt, "failRate")
		hangRate := rapid.IntRange(0, 10).Draw(rt, "hangRate")
		reopen := func() {
			h.restart()
			fl := &flaky{ClusterDriver: h.sim, MachineProvider: h.sim, clk: h.clk,
				fail: func() bool { return rapid.IntRange(0, 99).Draw(rt, "fail") < failRate },
				hang: func() bool { return rapid.IntRange(0, 99).Draw(rt, "hang") < hangRate },
				wiped: func(m domain.Machine, clusterID, nodeName string) {
					active, err := h.st.ListNodes(ctx0, store.NodeFilter{MachineID: m.ID,
						States: []domain.NodeState{domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining, domain.NodeRemoving}})
					if err != nil {
						rt.Fatal(err)
					}
					for _, o := range active {
						if o.ClusterID != clusterID || o.Name != nodeName {
							rt.Fatalf("machine %s wiped for %s/%s while it serves %s (%s)", m.ID, clusterID, nodeName, o.Name, o.State)
						}
					}
				}}
			h.c = New(h.st, fl, fl, h.clk, h.cfg, nil)
		}
		reopen()
		ctx := context.Background()
		create := func(id string, std, pre int) {
			_, err := h.c.CreateCluster(ctx, domain.Cluster{ID: id, Name: id, ProjectID: "p", Region: region, GPUType: gpu,
				Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: std, DesiredPreemptibleGPUs: pre})
			var sf *ShortfallError
			if err != nil && !errors.As(err, &sf) {
				rt.Fatal(err)
			}
		}
		create("a", 8, 8*rapid.IntRange(0, 3).Draw(rt, "aPre"))
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				create(fmt.Sprintf("b%d", i), 8*rapid.IntRange(1, 3).Draw(rt, "bStd"), 0)
			case 1:
				cs, _ := h.st.ListClusters(ctx, "")
				if len(cs) > 0 {
					c := cs[rapid.IntRange(0, len(cs)-1).Draw(rt, "del")]
					if _, err := h.c.DeleteCluster(ctx, c.ID); err != nil && !errors.Is(err, domain.ErrNotFound) {
						rt.Fatal(err)
					}
				}
			case 2:
				pre := 8 * rapid.IntRange(0, 3).Draw(rt, "pre")
				if _, err := h.c.UpdateCluster(ctx, "a", Change{PreemptibleGPUs: &pre}); err != nil && !errors.Is(err, domain.ErrNotFound) && !errors.Is(err, ErrDeleting) {
					rt.Fatal(err)
				}
			case 3:
				reopen()
			}
			run(rt, h, time.Duration(rapid.IntRange(0, 320).Draw(rt, "secs"))*time.Second)
		}
		// With failures stopped, everything settles: every target met.
		failRate, hangRate = 0, 0
		strictSince = h.clk.Now()
		run(rt, h, 420*time.Second)
		all, _ := h.st.ListNodes(ctx, store.NodeFilter{States: []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeDraining, domain.NodeRemoving}})
		if len(all) != 0 {
			rt.Fatalf("nodes still in flight after settling: %+v", all)
		}
		cs, _ := h.st.ListClusters(ctx, "")
		for _, c := range cs {
			if c.Deleting {
				rt.Fatalf("cluster %s still deleting", c.ID)
			}
			if c.Status != domain.StatusReady && c.Status != domain.StatusDegraded {
				rt.Fatalf("cluster %s is %s after settling", c.ID, c.Status)
			}
		}
	})
}

// run reconciles for d of clock time the way the Run loop does, sleeping
// nextWait between passes with a 10s interval. Injected failures surface
// as errors and are retried by the next pass.
func run(rt *rapid.T, h *harness, d time.Duration) {
	end := h.clk.Now().Add(d)
	for h.clk.Now().Before(end) {
		next := h.reconcile()
		checkDrains(rt, h)
		h.clk.Step(nextWait(next, h.clk.Now(), 10*time.Second))
	}
	h.reconcile()
	checkDrains(rt, h)
}

// lateness is how late a machine may come back: one reconcile interval
// of the test loop (the pass at or after the deadline takes it back,
// whatever the cluster answers), plus clock time lost to hanging calls in
// that pass. Deadlines after strictSince, when nothing fails, must be met
// exactly.
const lateness = 10*time.Second + 10*hangFor

var strictSince time.Time

func checkDrains(rt *rapid.T, h *harness) {
	nodes, err := h.st.ListNodes(h.ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		rt.Fatal(err)
	}
	now := h.clk.Now()
	live := map[string]string{}
	for _, n := range nodes {
		late := lateness
		if !n.Deadline.Before(strictSince) {
			late = 0
		}
		if n.State == domain.NodeDraining && now.After(n.Deadline.Add(late)) {
			rt.Fatalf("node %s still draining %s after its deadline", n.Name, now.Sub(n.Deadline))
		}
		if !n.DrainedAt.IsZero() && n.DrainedAt.After(n.Deadline.Add(late)) {
			rt.Fatalf("node %s drained %s after its deadline", n.Name, n.DrainedAt.Sub(n.Deadline))
		}
		if n.State.Active() {
			if other, dup := live[n.MachineID]; dup {
				rt.Fatalf("machine %s serves %s and %s", n.MachineID, other, n.ID)
			}
			live[n.MachineID] = n.ID
		}
	}
}
