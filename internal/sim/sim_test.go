package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

var (
	t0  = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx = context.Background()
)

const cluster = "c-1"

func newFleet(t *testing.T, cfg Config) (*Fleet, *clock.Fake) {
	t.Helper()
	fc, ok := cfg.Clock.(*clock.Fake)
	if !ok {
		fc = clock.NewFake(t0)
		cfg.Clock = fc
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, fc
}

func spec(name string) driver.NodeSpec {
	return driver.NodeSpec{
		ClusterID: cluster,
		NodeName:  name,
		MachineID: "m-" + name,
		Class:     domain.Preemptible,
		GPUs:      8,
		Labels:    map[string]string{domain.LabelComputeClass: string(domain.Preemptible)},
	}
}

func mustAdd(t *testing.T, f *Fleet, name string) {
	t.Helper()
	if err := f.AddNode(ctx, spec(name)); err != nil {
		t.Fatal(err)
	}
}

func podNames(t *testing.T, f *Fleet, node string) []string {
	t.Helper()
	pods, err := f.ListWork(ctx, cluster, node)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

func podView(t *testing.T, f *Fleet, node, name string) PodView {
	t.Helper()
	v, ok := f.Node(cluster, node)
	if !ok {
		t.Fatalf("node %s missing", node)
	}
	for _, p := range v.Pods {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("pod %s missing on %s", name, node)
	return PodView{}
}

func TestNewRequiresClock(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without clock: want error")
	}
}

func TestPrepareTakesProvisionTime(t *testing.T) {
	f, fc := newFleet(t, Config{})
	m := domain.Machine{ID: "m1"}
	poll := func(want bool) {
		t.Helper()
		done, err := f.Prepare(ctx, m, spec("n1"))
		if err != nil || done != want {
			t.Fatalf("Prepare at +%v = %v, %v; want %v", fc.Now().Sub(t0), done, err, want)
		}
	}
	poll(false)
	fc.Step(DefaultProvisionTime - time.Nanosecond)
	poll(false)
	fc.Step(time.Nanosecond)
	poll(true)
	poll(true)
	if v, _ := f.Machine("m1"); v.Phase != MachinePrepared || !v.DoneAt.Equal(t0.Add(DefaultProvisionTime)) {
		t.Fatalf("machine view %+v", v)
	}

	// Wiping takes WipeTime from its first call.
	wipeStart := fc.Now()
	wipe := func(want bool) {
		t.Helper()
		done, err := f.Wipe(ctx, m, cluster, "n1")
		if err != nil || done != want {
			t.Fatalf("Wipe at +%v = %v, %v; want %v", fc.Now().Sub(wipeStart), done, err, want)
		}
	}
	wipe(false)
	fc.Step(DefaultWipeTime - time.Nanosecond)
	wipe(false)
	if v, _ := f.Machine("m1"); v.Phase != MachineWiping || v.ClusterID != cluster {
		t.Fatalf("machine view %+v", v)
	}
	fc.Step(time.Nanosecond)
	wipe(true)
	wipe(true)

	// Preparing it for the next node starts over.
	done, err := f.Prepare(ctx, m, spec("n2"))
	if err != nil || done {
		t.Fatalf("Prepare for the next node = %v, %v; want a fresh start", done, err)
	}
}

func TestCustomDurations(t *testing.T) {
	f, fc := newFleet(t, Config{ProvisionTime: time.Minute, WipeTime: -1})
	m := domain.Machine{ID: "m1"}
	if done, _ := f.Prepare(ctx, m, spec("n1")); done {
		t.Fatal("done at once")
	}
	fc.Step(time.Minute - time.Nanosecond)
	if done, _ := f.Prepare(ctx, m, spec("n1")); done {
		t.Fatal("done early")
	}
	fc.Step(time.Nanosecond)
	if done, _ := f.Prepare(ctx, m, spec("n1")); !done {
		t.Fatal("not done after ProvisionTime")
	}
	if done, _ := f.Wipe(ctx, m, cluster, "n1"); !done {
		t.Fatal("negative WipeTime: want done at once")
	}
}

func TestAddNode(t *testing.T) {
	f, fc := newFleet(t, Config{Pods: []PodTemplate{{Name: "a", TerminationGracePeriod: time.Minute}}})
	mustAdd(t, f, "n1")
	v, ok := f.Node(cluster, "n1")
	if !ok {
		t.Fatal("node missing")
	}
	if v.Labels[domain.LabelComputeClass] != "preemptible" || v.MachineID != "m-n1" || v.GPUs != 8 ||
		v.Class != domain.Preemptible || v.Profile != "custom" || !v.AddedAt.Equal(t0) || v.Unschedulable {
		t.Fatalf("node view %+v", v)
	}
	pods, err := f.ListWork(ctx, cluster, "n1")
	want := []driver.Work{{Namespace: "default", Name: "a", Grace: time.Minute}}
	if err != nil || !reflect.DeepEqual(pods, want) {
		t.Fatalf("ListPods = %+v, %v; want %+v", pods, err, want)
	}

	// Views are copies.
	v.Labels["x"] = "y"
	v.Pods[0].Name = "changed"
	if v2, _ := f.Node(cluster, "n1"); v2.Labels["x"] != "" || v2.Pods[0].Name != "a" {
		t.Fatal("view shares state with the fleet")
	}

	// A repeated AddNode changes nothing: not the labels, not the pods.
	if err := f.DeletePod(ctx, cluster, "n1", pods[0], 0); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Second)
	again := spec("n1")
	again.Labels = map[string]string{"other": "label"}
	if err := f.AddNode(ctx, again); err != nil {
		t.Fatal(err)
	}
	v2, _ := f.Node(cluster, "n1")
	if !reflect.DeepEqual(v2.Labels, map[string]string{domain.LabelComputeClass: "preemptible"}) || !v2.AddedAt.Equal(t0) {
		t.Fatalf("repeated AddNode changed the node: %+v", v2)
	}
	if names := podNames(t, f, "n1"); len(names) != 0 {
		t.Fatalf("repeated AddNode recreated pods %v", names)
	}
}

func TestPodDeletion(t *testing.T) {
	pods := []PodTemplate{
		{Namespace: "ml", Name: "quick", TerminationGracePeriod: 30 * time.Second, ExitAfter: 10 * time.Second},
		{Namespace: "ml", Name: "slow", TerminationGracePeriod: 30 * time.Second, ExitAfter: time.Minute},
		{Namespace: "ml", Name: "deaf", TerminationGracePeriod: 10 * time.Minute, ExitAfter: NeverExits},
	}
	type del struct {
		at    time.Duration // after t0
		grace time.Duration
	}
	tests := []struct {
		name    string
		pod     string
		deletes []del
		goneAt  time.Duration // after t0
		end     PodEnd
		grace   time.Duration // in force at the end
	}{
		{"exits within grace", "quick", []del{{0, 30 * time.Second}}, 10 * time.Second, PodExited, 30 * time.Second},
		{"exits at exactly grace", "quick", []del{{0, 10 * time.Second}}, 10 * time.Second, PodExited, 10 * time.Second},
		{"slow exit killed at grace", "slow", []del{{0, 30 * time.Second}}, 30 * time.Second, PodKilled, 30 * time.Second},
		{"never exits: killed at grace", "deaf", []del{{0, 5 * time.Minute}}, 5 * time.Minute, PodKilled, 5 * time.Minute},
		{"force delete", "deaf", []del{{0, 0}}, 0, PodForceDeleted, 0},
		{"negative grace forces", "deaf", []del{{time.Second, -time.Second}}, time.Second, PodForceDeleted, 0},
		{"force delete while terminating", "deaf", []del{{0, 5 * time.Minute}, {time.Minute, 0}}, time.Minute, PodForceDeleted, 0},
		{"shorter grace counts from first SIGTERM", "deaf", []del{{0, 5 * time.Minute}, {time.Minute, 2 * time.Minute}}, 2 * time.Minute, PodKilled, 2 * time.Minute},
		{"shortened grace already over: killed now", "deaf", []del{{0, 5 * time.Minute}, {3 * time.Minute, time.Minute}}, 3 * time.Minute, PodKilled, time.Minute},
		{"longer grace does not lengthen", "deaf", []del{{0, time.Minute}, {30 * time.Second, 5 * time.Minute}}, time.Minute, PodKilled, time.Minute},
		{"shortened but still exits on its own", "slow", []del{{0, 2 * time.Minute}, {10 * time.Second, 90 * time.Second}}, time.Minute, PodExited, 90 * time.Second},
		{"repeat with same grace", "quick", []del{{0, 30 * time.Second}, {5 * time.Second, 30 * time.Second}}, 10 * time.Second, PodExited, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, fc := newFleet(t, Config{Pods: pods})
			mustAdd(t, f, "n1")
			target := driver.Work{Namespace: "ml", Name: tc.pod}
			for _, d := range tc.deletes {
				fc.Set(t0.Add(d.at))
				if err := f.DeletePod(ctx, cluster, "n1", target, d.grace); err != nil {
					t.Fatal(err)
				}
				if d.grace > 0 {
					listed, _ := f.ListWork(ctx, cluster, "n1")
					for _, p := range listed {
						if p.Name == tc.pod && !p.Stopping {
							t.Fatal("deleted pod not reported Terminating")
						}
					}
				}
			}
			pv := podView(t, f, "n1", tc.pod)
			if !pv.SIGTERMAt.Equal(t0.Add(tc.deletes[0].at)) || !pv.GoneAt.Equal(t0.Add(tc.goneAt)) || pv.End != tc.end || pv.Grace != tc.grace {
				t.Fatalf("pod %+v; want SIGTERM at +%v, gone at +%v (%s), grace %v", pv, tc.deletes[0].at, tc.goneAt, tc.end, tc.grace)
			}
			has := func() bool { return contains(podNames(t, f, "n1"), tc.pod) }
			if tc.goneAt > 0 && fc.Now().Before(t0.Add(tc.goneAt)) {
				fc.Set(t0.Add(tc.goneAt - time.Nanosecond))
				if !has() {
					t.Fatalf("pod gone before +%v", tc.goneAt)
				}
				if podView(t, f, "n1", tc.pod).State != PodTerminating {
					t.Fatal("want Terminating")
				}
			}
			fc.Set(t0.Add(max(tc.goneAt, tc.deletes[len(tc.deletes)-1].at)))
			if has() {
				t.Fatalf("pod still listed at +%v", fc.Now().Sub(t0))
			}
			if podView(t, f, "n1", tc.pod).State != PodGone {
				t.Fatal("want Gone")
			}
			// Deleting a gone pod is not an error and changes nothing.
			before := podView(t, f, "n1", tc.pod)
			if err := f.DeletePod(ctx, cluster, "n1", target, 0); err != nil {
				t.Fatal(err)
			}
			if after := podView(t, f, "n1", tc.pod); after != before {
				t.Fatalf("delete of a gone pod changed it: %+v → %+v", before, after)
			}
			// The other pods were untouched.
			if n, _ := f.Node(cluster, "n1"); n.RunningPods() != len(pods)-1 {
				t.Fatalf("running pods = %d", n.RunningPods())
			}
		})
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func TestIdempotentNodeCalls(t *testing.T) {
	f, fc := newFleet(t, Config{Pods: []PodTemplate{}})
	mustAdd(t, f, "n1")
	taint := Taint{Key: domain.TaintPreempted, Value: "true", Effect: "NoSchedule"}
	ev := driver.Notice{Warning: true, Reason: "PreemptionNotified", Message: "node will be removed at 12:05"}
	for i := range 2 {
		if i == 1 {
			fc.Step(time.Second)
		}
		for _, err := range []error{
			f.Cordon(ctx, cluster, "n1"),
			f.Taint(ctx, cluster, "n1", taint),
			f.Annotate(ctx, cluster, "n1", domain.AnnotationDeadline, "2025-03-01T12:05:00Z"),
			f.PostEvent(ctx, cluster, "n1", ev),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	v, _ := f.Node(cluster, "n1")
	if !v.Unschedulable || !reflect.DeepEqual(v.Taints, []Taint{taint}) ||
		v.Annotations[domain.AnnotationDeadline] != "2025-03-01T12:05:00Z" || len(v.Annotations) != 1 {
		t.Fatalf("node after repeats: %+v", v)
	}
	wantEv := EventView{Seq: 1, ClusterID: cluster, NodeName: "n1", Type: "Warning", Reason: "PreemptionNotified",
		Message: ev.Message, FirstAt: t0, LastAt: t0.Add(time.Second), Count: 2}
	if !reflect.DeepEqual(v.Events, []EventView{wantEv}) || !reflect.DeepEqual(f.Events(), []EventView{wantEv}) {
		t.Fatalf("events after a repeat: node %+v, log %+v; want one aggregated %+v", v.Events, f.Events(), wantEv)
	}

	// Same key and effect with another value updates in place; another
	// effect is another taint.
	t2 := taint
	t2.Value = "soon"
	t3 := taint
	t3.Effect = "NoExecute"
	for _, tt := range []Taint{t2, t3, t3} {
		if err := f.Taint(ctx, cluster, "n1", tt); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := f.Node(cluster, "n1"); !reflect.DeepEqual(v.Taints, []Taint{t2, t3}) {
		t.Fatalf("taints %+v", v.Taints)
	}

	// A different event is a second one.
	if err := f.PostEvent(ctx, cluster, "n1", driver.Notice{Reason: "NodeDrained", Message: "drained"}); err != nil {
		t.Fatal(err)
	}
	if evs := f.Events(); len(evs) != 2 || evs[1].Seq != 2 || evs[1].Count != 1 {
		t.Fatalf("events %+v", evs)
	}

	// DeleteNode twice; the log keeps the events.
	for range 2 {
		if err := f.Release(ctx, cluster, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.Node(cluster, "n1"); ok {
		t.Fatal("node still there")
	}
	if len(f.Events()) != 2 {
		t.Fatal("deleting the node dropped events from the log")
	}
}

func TestMissingNode(t *testing.T) {
	f, _ := newFleet(t, Config{})
	for name, err := range map[string]error{
		"cordon":   f.Cordon(ctx, cluster, "nope"),
		"taint":    f.Taint(ctx, cluster, "nope", Taint{Key: "k", Effect: "NoSchedule"}),
		"annotate": f.Annotate(ctx, cluster, "nope", "k", "v"),
		"event":    f.PostEvent(ctx, cluster, "nope", driver.Notice{Reason: "R"}),
	} {
		if !errors.Is(err, ErrNoNode) || !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s on a missing node: %v; want ErrNoNode", name, err)
		}
	}
	pods, err := f.ListWork(ctx, cluster, "nope")
	if err != nil || len(pods) != 0 {
		t.Errorf("ListPods on a missing node = %v, %v", pods, err)
	}
	if err := f.DeletePod(ctx, cluster, "nope", driver.Work{Name: "p"}, time.Second); err != nil {
		t.Errorf("DeletePod on a missing node: %v", err)
	}
	if err := f.Release(ctx, cluster, "nope"); err != nil {
		t.Errorf("DeleteNode on a missing node: %v", err)
	}
	// The same node name in another cluster is another node.
	mustAdd(t, f, "n1")
	if err := f.Cordon(ctx, "other", "n1"); !errors.Is(err, ErrNoNode) {
		t.Errorf("cordon in another cluster: %v", err)
	}
	if err := f.DeletePod(ctx, cluster, "n1", driver.Work{Namespace: "ml", Name: "no-such-pod"}, 0); err != nil {
		t.Errorf("DeletePod of an unknown pod: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	f, _ := newFleet(t, Config{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.AddNode(cctx, spec("n1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("AddNode with a canceled context: %v", err)
	}
	if _, err := f.Prepare(cctx, domain.Machine{ID: "m"}, spec("n1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prepare with a canceled context: %v", err)
	}
}

// drainLikeController does what the controller does at T+0 of a drain with
// the default window: SIGTERM every pod with grace = min(its grace, time
// left).
func drainLikeController(t *testing.T, f *Fleet, node string) {
	t.Helper()
	pods, err := f.ListWork(ctx, cluster, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := f.DeletePod(ctx, cluster, node, p, min(p.Grace, domain.DefaultDrainWindow)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDefaultProfilesGiveBothKindsOfDrain(t *testing.T) {
	f, fc := newFleet(t, Config{Seed: 7})
	var names []string
	for i := range 20 {
		n := domain.NodeName(domain.Preemptible, int64(i+1))
		names = append(names, n)
		mustAdd(t, f, n)
		drainLikeController(t, f, n)
	}
	fc.Step(domain.DefaultDrainWindow - time.Nanosecond)
	var early, deadline int
	for _, n := range names {
		if len(podNames(t, f, n)) == 0 {
			early++
		} else {
			deadline++
		}
	}
	if early == 0 || deadline == 0 {
		t.Fatalf("over 20 nodes, %d drained early and %d needed the deadline; want both kinds", early, deadline)
	}
	t.Logf("%d nodes drain early, %d reach the deadline", early, deadline)
	fc.Step(time.Nanosecond)
	for _, n := range names {
		if left := podNames(t, f, n); len(left) != 0 {
			t.Fatalf("%s still has pods %v at the deadline", n, left)
		}
	}

	// The choice is a function of (seed, cluster, node): reproducible.
	g, _ := newFleet(t, Config{Seed: 7})
	for _, n := range names {
		mustAdd(t, g, n)
		a, _ := f.Node(cluster, n)
		b, _ := g.Node(cluster, n)
		prof, pods := DefaultPods(7, cluster, n)
		if a.Profile != b.Profile || a.Profile != prof || len(pods) != len(b.Pods) {
			t.Fatalf("%s: profiles %q, %q, DefaultPods %q", n, a.Profile, b.Profile, prof)
		}
	}
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "world.json")
	fc := clock.NewFake(t0)
	// Pods that exit early, late, and never (killed at the deadline).
	pods := []PodTemplate{
		{Namespace: "ml", Name: "inference", TerminationGracePeriod: 30 * time.Second, ExitAfter: 10 * time.Second},
		{Namespace: "ml", Name: "checkpointer", TerminationGracePeriod: 4 * time.Minute, ExitAfter: 150 * time.Second},
		{Namespace: "ml", Name: "deaf", TerminationGracePeriod: 10 * time.Minute, ExitAfter: NeverExits},
	}
	f, _ := newFleet(t, Config{Clock: fc, StatePath: path, Pods: pods})

	for i := range 6 {
		mustAdd(t, f, domain.NodeName(domain.Preemptible, int64(i+1)))
	}
	if _, err := f.Prepare(ctx, domain.Machine{ID: "m-a"}, spec("gpu-preemptible-dp-7")); err != nil {
		t.Fatal(err)
	}
	fc.Step(10 * time.Second)
	if _, err := f.Wipe(ctx, domain.Machine{ID: "m-b"}, "", "gpu-preemptible-dp-0"); err != nil {
		t.Fatal(err)
	}
	draining := []string{"gpu-preemptible-dp-1", "gpu-preemptible-dp-2", "gpu-preemptible-dp-3"}
	for _, n := range draining {
		for _, err := range []error{
			f.Cordon(ctx, cluster, n),
			f.Taint(ctx, cluster, n, Taint{Key: domain.TaintPreempted, Value: "true", Effect: "NoSchedule"}),
			f.Annotate(ctx, cluster, n, domain.AnnotationDeadline, t0.Add(10*time.Second+domain.DefaultDrainWindow).Format(time.RFC3339)),
			f.PostEvent(ctx, cluster, n, driver.Notice{Warning: true, Reason: "PreemptionNotified", Message: "bye"}),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		drainLikeController(t, f, n)
	}
	if err := f.Release(ctx, cluster, "gpu-preemptible-dp-6"); err != nil {
		t.Fatal(err)
	}
	fc.Step(5 * time.Second)

	// The control plane "crashes": a new Fleet reads the same file.
	g, err := New(Config{Clock: fc, StatePath: path, Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	same := func() {
		t.Helper()
		if a, b := f.Nodes(""), g.Nodes(""); !reflect.DeepEqual(a, b) {
			t.Fatalf("nodes differ after reload:\n%+v\n%+v", a, b)
		}
		if a, b := f.Events(), g.Events(); !reflect.DeepEqual(a, b) {
			t.Fatalf("events differ after reload:\n%+v\n%+v", a, b)
		}
		if a, b := f.Machines(), g.Machines(); !reflect.DeepEqual(a, b) {
			t.Fatalf("machines differ after reload:\n%+v\n%+v", a, b)
		}
	}
	same()
	if len(g.Nodes("")) != 5 || len(g.Events()) != 3 || len(g.Machines()) != 2 {
		t.Fatalf("reloaded %d nodes, %d events, %d machines", len(g.Nodes("")), len(g.Events()), len(g.Machines()))
	}

	// Pods exit at their original times in the reloaded world, second by
	// second through the drain window: SIGTERM was at +10s, so 3 pods are
	// left until +20s, 2 until +160s, 1 until the deadline at +310s.
	want := func(at time.Duration) int {
		switch {
		case at < 20*time.Second:
			return 3
		case at < 160*time.Second:
			return 2
		case at < 310*time.Second:
			return 1
		}
		return 0
	}
	for fc.Now().Before(t0.Add(10*time.Second + domain.DefaultDrainWindow + time.Second)) {
		for _, n := range draining {
			a, _ := f.ListWork(ctx, cluster, n)
			b, _ := g.ListWork(ctx, cluster, n)
			if !reflect.DeepEqual(a, b) || len(b) != want(fc.Now().Sub(t0)) {
				t.Fatalf("at +%v %s: pods %v before the crash, %v after; want %d", fc.Now().Sub(t0), n, a, b, want(fc.Now().Sub(t0)))
			}
		}
		fc.Step(time.Second)
	}
	for _, n := range draining {
		if left := podNames(t, g, n); len(left) != 0 {
			t.Fatalf("%s still has pods %v after the deadline", n, left)
		}
	}
	same()

	// Provisioning started before the crash finishes on its original time.
	done, err := g.Prepare(ctx, domain.Machine{ID: "m-a"}, spec("gpu-preemptible-dp-7"))
	if err != nil || !done {
		t.Fatalf("Prepare after reload = %v, %v", done, err)
	}
	if v, _ := g.Machine("m-a"); !v.StartedAt.Equal(t0) {
		t.Fatalf("provisioning start %v after reload; want %v", v.StartedAt, t0)
	}

	// Mutations after the reload keep being saved, and nothing is left
	// behind but the state file.
	if err := g.Cordon(ctx, cluster, "gpu-preemptible-dp-4"); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Clock: fc, StatePath: path})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := h.Node(cluster, "gpu-preemptible-dp-4"); !v.Unschedulable {
		t.Fatal("cordon after reload was not saved")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("state dir holds %d files; want only the state file", len(entries))
	}
}

func TestCorruptStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "world.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Clock: clock.NewFake(t0), StatePath: path}); err == nil {
		t.Fatal("New with a corrupt state file: want error")
	}
}

func TestSaveFailureIsReportedAndRetried(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "world.json")
	f, _ := newFleet(t, Config{StatePath: path})
	if err := f.AddNode(ctx, spec("n1")); err == nil {
		t.Fatal("AddNode with an unwritable state path: want error")
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The retry changes nothing in memory but must still save.
	if err := f.AddNode(ctx, spec("n1")); err != nil {
		t.Fatal(err)
	}
	g, _ := newFleet(t, Config{StatePath: path})
	if _, ok := g.Node(cluster, "n1"); !ok {
		t.Fatal("node not saved on retry")
	}
}

func TestConcurrentUse(t *testing.T) {
	f, fc := newFleet(t, Config{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			n := domain.NodeName(domain.Preemptible, int64(i))
			for range 50 {
				mustAdd(t, f, n)
				_ = f.Cordon(ctx, cluster, n)
				drainLikeController(t, f, n)
				_ = f.PostEvent(ctx, cluster, n, driver.Notice{Reason: "R"})
				_, _ = f.Prepare(ctx, domain.Machine{ID: n}, spec(n))
				_ = f.Nodes("")
				_ = f.Events()
				fc.Step(time.Second)
			}
		})
	}
	wg.Wait()
	if len(f.Nodes(cluster)) != 8 {
		t.Fatal("want 8 nodes")
	}
}

// TestDeletePodBy: the grace is the pod's own, cut to the time left to
// the deadline on the fleet's clock, in whole seconds; no deadline forces.
func TestDeletePodBy(t *testing.T) {
	pods := []PodTemplate{
		{Namespace: "ml", Name: "long", TerminationGracePeriod: 10 * time.Minute, ExitAfter: NeverExits},
		{Namespace: "ml", Name: "short", TerminationGracePeriod: 30 * time.Second, ExitAfter: NeverExits},
		{Namespace: "ml", Name: "forced", TerminationGracePeriod: 30 * time.Second, ExitAfter: NeverExits},
	}
	f, _ := newFleet(t, Config{Pods: pods})
	mustAdd(t, f, "n1")
	by := t0.Add(90*time.Second + 500*time.Millisecond)
	for _, name := range []string{"long", "short"} {
		// The pod's own grace period counts, not the caller's copy.
		if err := f.Notify(ctx, cluster, "n1", driver.Work{Namespace: "ml", Name: name}, by); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Notify(ctx, cluster, "n1", driver.Work{Namespace: "ml", Name: "forced"}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{"long": 90 * time.Second, "short": 30 * time.Second} {
		if v := podView(t, f, "n1", name); v.State != PodTerminating || v.Grace != want {
			t.Errorf("%s: %+v, want terminating with grace %s", name, v, want)
		}
	}
	if v := podView(t, f, "n1", "forced"); v.State != PodGone || v.End != PodForceDeleted {
		t.Errorf("forced: %+v", v)
	}
}

// TestMarkDraining: one call cordons, taints and annotates, like the
// Kubernetes driver's one patch; repeating it changes nothing, and what it
// did survives a restart.
func TestMarkDraining(t *testing.T) {
	dir := t.TempDir()
	f, fc := newFleet(t, Config{Pods: []PodTemplate{}, StatePath: dir + "/sim.json"})
	mustAdd(t, f, "n1")
	taint := Taint{Key: domain.TaintPreempted, Value: "preempted", Effect: "NoSchedule"}
	ann := map[string]string{domain.AnnotationDeadline: "2025-03-01T12:05:00Z"}
	marks := driver.Marks{Cause: "preempted", Deadline: time.Date(2025, 3, 1, 12, 5, 0, 0, time.UTC)}
	for range 2 {
		if err := f.MarkDraining(ctx, cluster, "n1", marks); err != nil {
			t.Fatal(err)
		}
	}
	check := func(f *Fleet, when string) {
		t.Helper()
		v, _ := f.Node(cluster, "n1")
		if !v.Unschedulable || !reflect.DeepEqual(v.Taints, []Taint{taint}) || !reflect.DeepEqual(v.Annotations, ann) {
			t.Fatalf("%s: node %+v; want cordoned, tainted once, annotated", when, v)
		}
	}
	check(f, "after two marks")
	f2, err := New(Config{Clock: fc, Pods: []PodTemplate{}, StatePath: dir + "/sim.json"})
	if err != nil {
		t.Fatal(err)
	}
	check(f2, "after a restart")
	if err := f.MarkDraining(ctx, cluster, "n2", marks); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("marking a missing node: %v, want not found", err)
	}
}
