package sim

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/driver"
)

// TestExternalPod: a pod run outside the simulation gets its deadline
// annotation when a drain deletes it by a deadline, stays Terminating
// until its process is reported ended, and survives a restart of the
// simulated world with all of that.
func TestExternalPod(t *testing.T) {
	state := filepath.Join(t.TempDir(), "world.json")
	f, fc := newFleet(t, Config{StatePath: state, Pods: []PodTemplate{
		{Name: "trainer", TerminationGracePeriod: 10 * time.Minute, ExitAfter: time.Second, External: true, ReadsDeadline: true},
		{Name: "plain", TerminationGracePeriod: time.Minute, ExitAfter: 10 * time.Second},
	}})
	mustAdd(t, f, "n1")
	pods, err := f.ListWork(ctx, cluster, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || !pods[0].ReadsDeadline || pods[1].ReadsDeadline {
		t.Fatalf("ListPods: %+v; want the trainer reading its deadline, the plain pod not", pods)
	}
	by := t0.Add(5 * time.Minute)
	for _, p := range pods {
		if err := f.Notify(ctx, cluster, "n1", p, by); err != nil {
			t.Fatal(err)
		}
	}
	tr := podView(t, f, "n1", "trainer")
	if !tr.Deadline.Equal(by) || tr.State != PodTerminating || tr.Grace != 5*time.Minute || !tr.External {
		t.Fatalf("trainer after the delete: %+v; want deadline %s, terminating with grace 5m", tr, by)
	}
	if pl := podView(t, f, "n1", "plain"); !pl.Deadline.IsZero() {
		t.Errorf("a pod that does not read its annotations got a deadline: %+v", pl)
	}
	// ExitAfter (1s) does not apply: only its process says when it ends.
	fc.Step(time.Minute)
	if got := podNames(t, f, "n1"); len(got) != 1 || got[0] != "trainer" {
		t.Fatalf("pods after a minute: %v, want the trainer only", got)
	}
	// A second, later delete keeps the first deadline.
	if err := f.Notify(ctx, cluster, "n1", pods[0], by.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.PodExited(cluster, "n1", "default", "plain"); err == nil {
		t.Error("PodExited on a simulated pod: no error")
	}

	// The world restarts; the pod is as it was.
	f2, err := New(Config{Clock: fc, StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	tr2 := podView(t, f2, "n1", "trainer")
	if !tr2.Deadline.Equal(by) || tr2.State != PodTerminating || !tr2.External || !tr2.ReadsDeadline {
		t.Fatalf("trainer after a restart: %+v", tr2)
	}
	fc.Step(time.Second)
	if err := f2.PodExited(cluster, "n1", "", "trainer"); err != nil {
		t.Fatal(err)
	}
	tr2 = podView(t, f2, "n1", "trainer")
	if tr2.State != PodGone || tr2.End != PodExited || !tr2.GoneAt.Equal(fc.Now()) {
		t.Fatalf("trainer after its exit: %+v", tr2)
	}
	if got := podNames(t, f2, "n1"); len(got) != 0 {
		t.Errorf("pods listed after the exit: %v", got)
	}
	// Reported twice, or for a pod or node that is not there: nothing.
	for _, c := range [][3]string{{"n1", "default", "trainer"}, {"n1", "default", "nope"}, {"nope", "default", "trainer"}} {
		if err := f2.PodExited(cluster, c[0], c[1], c[2]); err != nil {
			t.Errorf("PodExited(%v): %v", c, err)
		}
	}
}

// TestExternalPodCompletes: a process that ends before any deletion
// leaves a Completed pod that a drain has nothing to do with.
func TestExternalPodCompletes(t *testing.T) {
	f, fc := newFleet(t, Config{Pods: []PodTemplate{}})
	mustAdd(t, f, "n1")
	if err := f.AddPod(cluster, "n1", PodTemplate{Name: "job", TerminationGracePeriod: time.Minute, External: true}); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Second)
	if err := f.PodExited(cluster, "n1", "default", "job"); err != nil {
		t.Fatal(err)
	}
	if v := podView(t, f, "n1", "job"); v.State != PodGone || v.End != PodCompleted {
		t.Fatalf("job: %+v", v)
	}
	if err := f.Notify(ctx, cluster, "n1", driver.Work{Name: "job"}, fc.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if v := podView(t, f, "n1", "job"); v.End != PodCompleted || !v.SIGTERMAt.IsZero() || !v.Deadline.IsZero() {
		t.Errorf("a completed pod changed on deletion: %+v", v)
	}
}

// TestExternalExitWakesToStopSupportPods: when an External pod's exit
// leaves only support pods (a DaemonSet's) running on a node, the node is
// woken at once: its drain stops them now, and nothing else will say so.
func TestExternalExitWakesToStopSupportPods(t *testing.T) {
	f, fc := newFleet(t, Config{Pods: []PodTemplate{
		{Name: "trainer", TerminationGracePeriod: 10 * time.Minute, External: true},
		{Name: "logs", TerminationGracePeriod: 30 * time.Second, ExitAfter: time.Second, DaemonSet: true},
	}})
	type wake struct {
		node string
		at   time.Time
	}
	var wakes []wake
	f.SetHooks(driver.Hooks{Wake: func(_, node string, at time.Time) { wakes = append(wakes, wake{node, at}) }})
	mustAdd(t, f, "n1")
	pods, err := f.ListWork(ctx, cluster, "n1")
	if err != nil || len(pods) != 2 || pods[0].Name != "trainer" {
		t.Fatalf("work %+v, %v; want the trainer and its node's support pod", pods, err)
	}
	if err := f.Notify(ctx, cluster, "n1", pods[0], t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Minute)
	wakes = nil
	if err := f.PodExited(cluster, "n1", "default", "trainer"); err != nil {
		t.Fatal(err)
	}
	if len(wakes) != 1 || wakes[0].node != "n1" || !wakes[0].at.Equal(fc.Now()) {
		t.Fatalf("wakes %+v, want n1 woken now to stop its support pods", wakes)
	}
}
