package slurm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/slurm/slurmenv"
)

// reclaimOne makes a SLURM cluster with one standard and one preemptible
// node, runs a job on the preemptible one, and reclaims it (the target
// goes to 0). It returns the node and the job's ID.
func reclaimOne(t *testing.T, f *fixture, j job, tr trail) (domain.Node, string) {
	t.Helper()
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	j.Extra = append(j.Extra, "-C", "preemptible")
	id := submit(t, f.env, j)
	waitTrail(t, tr, "start_restart=0", 1, 20*time.Second)
	f.setPreemptible("c1", 0)
	return pre, id
}

// TestJobIgnoringSIGTERMIsGoneByTheDeadline: a job that ignores its
// notice is requeued at the deadline minus KillWait (SIGTERM again, then
// SIGKILL), so it is off the node by the deadline, and the node goes then.
func TestJobIgnoringSIGTERMIsGoneByTheDeadline(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 3, window: 12 * time.Second, killWait: 3 * time.Second})
	tr := newTrail(t)
	pre, id := reclaimOne(t, f, job{Name: "stubborn", Script: tr.script(0, true)}, tr)
	start := time.Now()
	waitTrail(t, tr, "term", 1, 5*time.Second)
	eventually(t, 20*time.Second, func() error {
		if n := f.node(pre.ID); n.State != domain.NodeRemoved {
			return fmt.Errorf("node %s is %s", n.Name, n.State)
		}
		return nil
	})
	n := f.node(pre.ID)
	if n.Outcome != domain.OutcomeDeadline || n.RemovedAt.After(n.Deadline.Add(2*time.Second)) {
		t.Errorf("node %s: outcome %s, removed %s after its deadline", n.Name, n.Outcome, n.RemovedAt.Sub(n.Deadline))
	}
	// SIGTERM at T+0, and again from the requeue at the deadline minus
	// KillWait, whose SIGKILL lands by the deadline.
	terms := tr.terms()
	if len(terms) != 2 || terms[1].After(n.Deadline.Add(-3*time.Second+1500*time.Millisecond)) {
		t.Errorf("SIGTERMs at %v; want two, the second by the deadline %s minus KillWait 3 s", terms, n.Deadline.Format(time.StampMilli))
	}
	j := jobByID(t, f.env, id)
	if j.Restarts != 1 || (j.State != "PENDING" && j.State != "REQUEUED") {
		t.Errorf("job %s %s, %d restarts; want requeued once", id, j.State, j.Restarts)
	}
	if d := time.Since(start); d > 16*time.Second {
		t.Errorf("the reclaim took %s with a 12 s window", d)
	}
}

// TestNoRequeueJobIsNotRequeued: a job submitted --no-requeue that exits
// at its notice stays COMPLETED.
func TestNoRequeueJobIsNotRequeued(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 3, window: time.Minute})
	tr := newTrail(t)
	pre, id := reclaimOne(t, f, job{Name: "once", Script: tr.script(0.5, false), NoRequeue: true}, tr)
	eventually(t, 20*time.Second, func() error {
		if n := f.node(pre.ID); n.State != domain.NodeRemoved || n.Outcome != domain.OutcomeEarly {
			return fmt.Errorf("node %s %s %s", n.Name, n.State, n.Outcome)
		}
		return nil
	})
	time.Sleep(time.Second) // a poll or two
	if j := jobByID(t, f.env, id); j.State != "COMPLETED" || j.Restarts != 0 {
		t.Errorf("job %s %s, %d restarts; want COMPLETED, never requeued", id, j.State, j.Restarts)
	}
}

// TestTenantDrainReasonIsLeftAlone: a node the tenant drained keeps the
// tenant's reason through a reclaim (the deadline goes in Extra), and a
// standard node the tenant drained stays drained.
func TestTenantDrainReasonIsLeftAlone(t *testing.T) {
	var notes []driver.NodeNote
	var mu sync.Mutex
	c := newCluster(t, env, slurm.Options{Hooks: driver.Hooks{Note: func(n driver.NodeNote) {
		mu.Lock()
		notes = append(notes, n)
		mu.Unlock()
	}}})
	ctx := context.Background()
	spec := addNode(t, env, c, c.ID(), "tenant-drain-1", domain.Preemptible)
	if _, err := env.Run(ctx, "scontrol", "update", "nodename="+spec.NodeName, "state=DRAIN", "reason=maintenance: fan 3"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	eventually(t, 5*time.Second, func() error {
		if err := c.MarkDraining(ctx, c.ID(), spec.NodeName, driver.Marks{Cause: "Reclaimed", Deadline: deadline}); err != nil {
			return err
		}
		n, _ := nodeOf(t, env, spec.NodeName)
		if !strings.Contains(n.Extra, deadline.Format(time.RFC3339)) {
			return fmt.Errorf("extra %q", n.Extra)
		}
		return nil
	})
	if n, _ := nodeOf(t, env, spec.NodeName); n.Reason != "maintenance: fan 3" {
		t.Errorf("reason %q, want the tenant's", n.Reason)
	}
	// Said once in the node's events, however often the drain marks it.
	c.MarkDraining(ctx, c.ID(), spec.NodeName, driver.Marks{Cause: "Reclaimed", Deadline: deadline})
	mu.Lock()
	if len(notes) != 1 || notes[0].Reason != domain.ReasonDrainReasonKept || !strings.Contains(notes[0].Message, `"maintenance: fan 3"`) {
		t.Errorf("notes %+v, want one DrainReasonKept naming the tenant's reason", notes)
	}
	mu.Unlock()
	std := addNode(t, env, c, c.ID(), "tenant-drain-2", domain.Standard)
	if _, err := env.Run(ctx, "scontrol", "update", "nodename="+std.NodeName, "state=DRAIN", "reason=bad dimm"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := c.AddNode(ctx, std); err == nil {
		t.Error("a drained node counts as Ready")
	}
	if n, _ := nodeOf(t, env, std.NodeName); n.Reason != "bad dimm" {
		t.Errorf("standard node's reason %q, want the tenant's", n.Reason)
	}
}

// TestSlurmdThatDiesIsSetDownAtOnce: a node whose slurmd stops answering
// is set DOWN by sparecap within a few polls (its job is requeued now,
// not after SlurmdTimeout), lost, billed no more, and replaced.
func TestSlurmdThatDiesIsSetDownAtOnce(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 3, window: time.Minute})
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	tr := newTrail(t)
	id := submit(t, f.env, job{Name: "train", Script: tr.script(0, false), Extra: []string{"-C", "preemptible"}})
	waitTrail(t, tr, "start_restart=0", 1, 20*time.Second)
	f.env.StopNode(pre.Name)
	start := time.Now()
	eventually(t, 15*time.Second, func() error {
		if j := jobByID(t, f.env, id); j.Restarts != 1 {
			return fmt.Errorf("job %s %s, %d restarts", id, j.State, j.Restarts)
		}
		return nil
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the job was requeued %s after its slurmd died (SlurmdTimeout is 300 s)", d)
	}
	eventually(t, 15*time.Second, func() error {
		if n := f.node(pre.ID); n.Outcome != domain.OutcomeLost {
			return fmt.Errorf("node %s %s %s, want lost", n.Name, n.State, n.Outcome)
		}
		return nil
	})
	lost := false
	for _, e := range f.events("c1") {
		lost = lost || (e.Reason == domain.ReasonNodeLost && strings.Contains(e.Message, "its slurmd did not answer 3 probes in a row"))
	}
	if !lost {
		t.Errorf("no NodeLost event naming the slurmd: %+v", f.events("c1"))
	}
	f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)
}

// TestMultiNodeJobIsNoticedOnceAsAWhole: a job across a standard and a
// preemptible node gets one SIGTERM when the preemptible one is
// reclaimed, and is requeued once.
func TestMultiNodeJobIsNoticedOnceAsAWhole(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 3, window: time.Minute})
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	tr := newTrail(t)
	id := submit(t, f.env, job{Name: "wide", Script: tr.script(0.5, false), Extra: []string{"-N", "2"}})
	waitTrail(t, tr, "start_restart=0", 1, 20*time.Second)
	f.setPreemptible("c1", 0)
	eventually(t, 20*time.Second, func() error {
		if n := f.node(pre.ID); n.State != domain.NodeRemoved {
			return fmt.Errorf("node %s %s", n.Name, n.State)
		}
		return nil
	})
	eventually(t, 5*time.Second, func() error {
		if j := jobByID(t, f.env, id); j.Restarts != 1 {
			return fmt.Errorf("job %s %s, %d restarts", id, j.State, j.Restarts)
		}
		return nil
	})
	if n := tr.count("term"); n != 1 {
		t.Errorf("%d SIGTERMs, want 1: %v", n, tr.lines())
	}
}

// TestSlurmctldDownAcrossTheDeadline: with slurmctld gone from T+0 on,
// the machine still comes back by the deadline plus an interval, and
// Slurm's side (the node's removal) is done once slurmctld answers.
func TestSlurmctldDownAcrossTheDeadline(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 3, window: 8 * time.Second, killWait: 2 * time.Second})
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	f.env.StopController()
	f.setPreemptible("c1", 0)
	eventually(t, 15*time.Second, func() error {
		if n := f.node(pre.ID); n.State != domain.NodeRemoved {
			return fmt.Errorf("node %s %s", n.Name, n.State)
		}
		return nil
	})
	// A call to the stopped slurmctld waits 10 s for its answer: a deadline
	// that waited on one would be that late. 3 s tells the two apart on a
	// loaded 2-core machine running the suite under -race, where a timer
	// of the 500 ms interval has fired a second late.
	if n := f.node(pre.ID); n.RemovedAt.After(n.Deadline.Add(3*time.Second)) || !n.CleanupPending {
		t.Errorf("node %s removed %s after its deadline, cleanup pending %v", n.Name, n.RemovedAt.Sub(n.Deadline), n.CleanupPending)
	}
	if err := f.env.StartController(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		if _, ok := nodeOf(t, f.env, pre.Name); ok {
			return fmt.Errorf("node %s still in slurmctld", pre.Name)
		}
		if n := f.node(pre.ID); n.CleanupPending {
			return fmt.Errorf("cleanup of %s still pending", n.Name)
		}
		return nil
	})
}

// TestTwoClustersWithTheirOwnMungeKeys: one host drives two Slurm
// clusters, each through its own slurm.conf and munge socket; a
// slurm.conf that names the other cluster's munge socket is refused.
func TestTwoClustersWithTheirOwnMungeKeys(t *testing.T) {
	other, err := slurmenv.Start(slurmenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close) // after the cleanups of its nodes
	a, b := newCluster(t, env, slurm.Options{}), newCluster(t, other, slurm.Options{})
	na := addNode(t, env, a, a.ID(), "keys-a-1", domain.Preemptible)
	nb := addNode(t, other, b, b.ID(), "keys-b-1", domain.Preemptible)
	ctx := context.Background()
	if h, err := a.Health(ctx, a.ID(), nb.NodeName); err != nil || !h.Gone {
		t.Errorf("cluster A sees B's node: %+v %v", h, err)
	}
	if h, err := b.Health(ctx, b.ID(), nb.NodeName); err != nil || h.Gone {
		t.Errorf("cluster B does not see its node: %+v %v", h, err)
	}
	if h, err := a.Health(ctx, a.ID(), na.NodeName); err != nil || h.Gone {
		t.Errorf("cluster A does not see its node: %+v %v", h, err)
	}
	conf, err := os.ReadFile(other.Conf)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.ReplaceAll(string(conf), other.MungeSocket(), env.MungeSocket())
	// Both munge sockets under the socket root, as an operator's are: the
	// other key refuses it.
	root := filepath.Dir(env.Dir)
	if err := slurm.Check(ctx, []byte(wrong), slurm.Options{Retries: 1, Timeout: 5 * time.Second, AuthSocketDir: root}); err == nil {
		t.Error("a slurm.conf with the other cluster's munge key was accepted")
	}
}

// TestRestartKeepsTheRequeuePromise: the promise to requeue a noticed job
// is written on the job, so a driver started after the one that gave the
// notice (a sparecap restart, a new leader) requeues it when it exits.
func TestRestartKeepsTheRequeuePromise(t *testing.T) {
	ctx := context.Background()
	opts := slurm.Options{PollEvery: 200 * time.Millisecond, Log: testLog(), AuthSocketDir: filepath.Dir(env.MungeSocket())}
	first, err := slurm.NewCluster(ctx, "c-restart", mustRead(t, env.Conf), opts)
	if err != nil {
		t.Fatal(err)
	}
	spec := addNode(t, env, first, "c-restart", "restart-1", domain.Preemptible)
	tr := newTrail(t)
	id := submit(t, env, job{Node: spec.NodeName, Name: "train", Script: tr.script(2, false)})
	waitTrail(t, tr, "start_restart=0", 1, 20*time.Second)
	if err := first.MarkDraining(ctx, "c-restart", spec.NodeName, driver.Marks{Cause: "Reclaimed", Deadline: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var work []driver.Work
	eventually(t, 5*time.Second, func() error {
		work, err = first.ListWork(ctx, "c-restart", spec.NodeName)
		if err == nil && len(work) != 1 {
			err = fmt.Errorf("work %+v", work)
		}
		return err
	})
	if err := first.Notify(ctx, "c-restart", spec.NodeName, work[0], time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	first.Close() // before the job has exited
	waitTrail(t, tr, "exit", 1, 10*time.Second)
	// The restarted sparecap's driver of the same cluster.
	again, err := slurm.NewCluster(ctx, "c-restart", mustRead(t, env.Conf), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Close)
	eventually(t, 10*time.Second, func() error {
		if j := jobByID(t, env, id); j.Restarts != 1 {
			return fmt.Errorf("job %s %s, %d restarts", id, j.State, j.Restarts)
		}
		return nil
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSlurmdThatSlurmctldMarksNotRespondingIsSetDown: without sparecap's
// own probe, a node whose slurmd died is set DOWN as soon as slurmctld
// marks it not responding, before SlurmdTimeout would.
func TestSlurmdThatSlurmctldMarksNotRespondingIsSetDown(t *testing.T) {
	e, err := slurmenv.Start(slurmenv.Options{SlurmdTimeout: 21 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close) // after the cleanups of its jobs and nodes
	c := newCluster(t, e, slurm.Options{})
	spec := addNode(t, e, c, c.ID(), "quiet-1", domain.Preemptible)
	tr := newTrail(t)
	id := submit(t, e, job{Node: spec.NodeName, Name: "train", Script: tr.script(0, false)})
	waitTrail(t, tr, "start_restart=0", 1, 20*time.Second)
	e.StopNode(spec.NodeName)
	start := time.Now()
	eventually(t, 30*time.Second, func() error {
		h, err := c.Health(context.Background(), c.ID(), spec.NodeName)
		if err != nil || h.Lost == "" {
			return fmt.Errorf("health %+v, %v", h, err)
		}
		return nil
	})
	if j := jobByID(t, e, id); j.Restarts != 1 {
		t.Errorf("job %s %s, %d restarts; want requeued when sparecap set the node DOWN", id, j.State, j.Restarts)
	}
	if n, _ := nodeOf(t, e, spec.NodeName); n.State != "down" || !strings.HasPrefix(n.Reason, "sparecap: lost: slurmctld marks it not responding") {
		t.Errorf("node %s %s %q", spec.NodeName, n.State, n.Reason)
	}
	t.Logf("lost and DOWN %s after its slurmd died (SlurmdTimeout 21 s)", time.Since(start).Round(time.Second))
}

// TestSlurmctldDownLosesNoNode: while slurmctld does not answer, sinfo
// lists no node; that is no answer, not nodes gone: the sweep of ready
// nodes loses none of them, and they serve on once it is back.
func TestSlurmctldDownLosesNoNode(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 2, window: time.Minute})
	f.createCluster("c1", 8, 8)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	f.env.StopController()
	// Long enough for sinfo to give up on slurmctld (it exits 0 then,
	// with an error and no node) and for sweeps after it.
	for range 30 {
		time.Sleep(500 * time.Millisecond)
		f.ctrl.SweepSoon()
	}
	if n := f.node(pre.ID); n.State != domain.NodeReady {
		t.Fatalf("with slurmctld down, node %s became %s (%s)", n.Name, n.State, n.Outcome)
	}
	if err := f.env.StartController(); err != nil {
		t.Fatal(err)
	}
}
