package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	region = "us-central-2"
	gpu    = "RTX_6000_PCI"
)

// harness is a controller on a SQLite store and a simulated fleet, all on
// a fake clock. Restart replaces the controller, the store handle and the
// simulator with fresh ones over the same files, as a crashed process
// coming back would.
type harness struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	dir   string
	pods  []sim.PodTemplate
	st    store.Store
	sim   *sim.Fleet
	c     *Controller
	ids   int
	cfg   Config
	notes []Observation
	// lenient: step failures (an injected cluster fault) do not fail the
	// test; they are retried as the Run loop would.
	lenient bool
	// planned counts the passes that planned a partition.
	planned int
}

func newHarness(t *testing.T, pods []sim.PodTemplate, machines int) *harness {
	h := &harness{t: t, ctx: context.Background(), clk: clock.NewFake(t0), dir: t.TempDir(), pods: pods,
		cfg: Config{Cooldown: -1}}
	h.open()
	h.update(func(tx store.Tx) error {
		for _, p := range []string{"p", "q", "acme"} {
			if err := tx.CreateProject(h.ctx, domain.Project{ID: p, CreatedAt: t0}); err != nil {
				return err
			}
		}
		for i := 0; i < machines; i++ {
			if err := tx.CreateMachine(h.ctx, domain.Machine{ID: fmt.Sprintf("m%02d", i), Region: region, GPUType: gpu, GPUs: 8, CreatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	return h
}

func (h *harness) open() {
	st, err := sqlite.Open(h.ctx, filepath.Join(h.dir, "db.sqlite"))
	if err != nil {
		h.t.Fatal(err)
	}
	fl, err := sim.New(sim.Config{Clock: h.clk, Pods: h.pods, ProvisionTime: 20 * time.Second, WipeTime: 5 * time.Second, StatePath: filepath.Join(h.dir, "sim.json")})
	if err != nil {
		h.t.Fatal(err)
	}
	// The controller plans on the in-memory snapshot, as a server's does.
	cached := store.NewCached(st)
	cached.Enable()
	h.st, h.sim = cached, fl
	h.c = New(cached, fl, fl, h.clk, h.cfg, nil)
	h.c.NewID = func(prefix string) string { h.ids++; return fmt.Sprintf("%s%03d", prefix, h.ids) }
	h.c.Observer = func(o Observation) { h.notes = append(h.notes, o) }
	// Every plan of what changed must be the whole plan for what it
	// planned, and the whole plan must change nothing elsewhere.
	h.c.checkParts = func(pl allocator.Plan, tok allocator.Token, now time.Time, cfg allocator.Config) {
		full, err := cached.Snapshot(h.ctx)
		if err != nil {
			h.t.Fatal(err)
		}
		if err := allocator.Covers(allocator.Snapshot(full), tok, pl, now, cfg); err != nil {
			h.t.Errorf("the loop's plan of what changed: %v", err)
		}
		if tok.Any() {
			h.planned++
		}
	}
	h.t.Cleanup(func() {
		if h.st == store.Store(cached) { // not closed by restart
			h.checkCache(cached, st)
		}
		st.Close()
	})
}

// checkCache fails the test if the in-memory snapshot the controller
// planned on differs from the database's.
func (h *harness) checkCache(cached *store.Cached, st store.Store) {
	h.t.Helper()
	got, err := cached.Snapshot(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	want, err := st.Snapshot(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if !reflect.DeepEqual(emptyNil(got), emptyNil(want)) {
		h.t.Errorf("the in-memory snapshot differs from the database's:\n got %+v\nwant %+v", got, want)
	}
}

func emptyNil(s store.Snapshot) store.Snapshot {
	if len(s.Machines) == 0 {
		s.Machines = nil
	}
	if len(s.Reservations) == 0 {
		s.Reservations = nil
	}
	if len(s.Clusters) == 0 {
		s.Clusters = nil
	}
	if len(s.Nodes) == 0 {
		s.Nodes = nil
	}
	return s
}

func (h *harness) restart() {
	if c, ok := h.st.(*store.Cached); ok {
		h.checkCache(c, c.Store)
	}
	h.st.Close()
	h.open()
}

func (h *harness) update(fn func(tx store.Tx) error) {
	h.t.Helper()
	if err := h.st.Update(h.ctx, fn); err != nil {
		h.t.Fatal(err)
	}
}

// reconcile turns the controller at the clock's now until nothing is due
// now (a turn's nodes may hand on others: a freed machine's pending node)
// and returns when something is next due.
func (h *harness) reconcile() time.Time {
	h.t.Helper()
	for i := 0; ; i++ {
		next, err := h.c.Turn(h.ctx)
		if err != nil && !h.lenient {
			h.t.Fatal(err)
		}
		if next.IsZero() || next.After(h.clk.Now()) || i == 100 {
			return next
		}
	}
}

// advance steps the clock by d, one second at a time, reconciling after
// each step, like the Run loop at 1-second resolution.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	for end := h.clk.Now().Add(d); h.clk.Now().Before(end); {
		h.clk.Step(time.Second)
		h.reconcile()
	}
}

func (h *harness) create(id string, std, pre int) domain.Cluster {
	h.t.Helper()
	c, err := h.c.CreateCluster(h.ctx, domain.Cluster{ID: id, Name: id, ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: std, DesiredPreemptibleGPUs: pre})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) nodes(clusterID string, states ...domain.NodeState) []domain.Node {
	h.t.Helper()
	ns, err := h.st.ListNodes(h.ctx, store.NodeFilter{ClusterID: clusterID, States: states, IncludeRemoved: true})
	if err != nil {
		h.t.Fatal(err)
	}
	return ns
}

func (h *harness) events(clusterID string) []domain.Event {
	h.t.Helper()
	evs, err := h.st.ListEvents(h.ctx, store.EventFilter{ClusterID: clusterID})
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func (h *harness) event(clusterID, nodeID string, reason domain.EventReason) (domain.Event, bool) {
	for _, e := range h.events(clusterID) {
		if e.NodeID == nodeID && e.Reason == reason {
			return e, true
		}
	}
	return domain.Event{}, false
}

func (h *harness) onlyNode(clusterID string, class domain.ComputeClass) domain.Node {
	h.t.Helper()
	var out []domain.Node
	for _, n := range h.nodes(clusterID) {
		if n.Class == class && n.State != domain.NodeRemoved {
			out = append(out, n)
		}
	}
	if len(out) != 1 {
		h.t.Fatalf("want one %s node in %s, got %+v", class, clusterID, out)
	}
	return out[0]
}

// Pods of the tests: one that exits 30s after SIGTERM and one that ignores
// it, each with a long grace period (capped by the window).
var (
	quickPods    = []sim.PodTemplate{{Name: "worker", TerminationGracePeriod: 10 * time.Minute, ExitAfter: 30 * time.Second}}
	stubbornPods = []sim.PodTemplate{
		{Name: "worker", TerminationGracePeriod: 10 * time.Minute, ExitAfter: sim.NeverExits},
		{Name: "sidecar", TerminationGracePeriod: 20 * time.Second, ExitAfter: time.Second},
	}
)

// fillPreemptible creates cluster a (8 standard + 8 preemptible) on two
// machines and waits until both nodes are ready.
func fillPreemptible(h *harness) domain.Node {
	h.create("a", 8, 8)
	h.reconcile()
	// Ready after 20 s; the replan for their move comes half an interval
	// later.
	h.advance(21 * time.Second)
	for _, n := range h.nodes("a") {
		if n.State != domain.NodeReady {
			h.t.Fatalf("node %s is %s after provisioning", n.Name, n.State)
		}
	}
	return h.onlyNode("a", domain.Preemptible)
}

func TestProvisioningAndLabels(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	if !strings.HasPrefix(pre.Name, "gpu-preemptible-dp-") {
		t.Fatalf("name %s", pre.Name)
	}
	std := h.onlyNode("a", domain.Standard)
	if !strings.HasPrefix(std.Name, "gpu-dp-") {
		t.Fatalf("name %s", std.Name)
	}
	v, ok := h.sim.Node("a", pre.Name)
	if !ok || v.Labels[domain.LabelComputeClass] != "preemptible" {
		t.Fatalf("label: %+v", v.Labels)
	}
	if !pre.ReadyAt.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("ready at %v, want after the 20s provisioning", pre.ReadyAt)
	}
	if _, ok := h.event("a", pre.ID, domain.ReasonNodeAdded); !ok {
		t.Fatal("NodeAdded event missing")
	}
	c, _ := h.st.GetCluster(h.ctx, "a")
	if c.Status != domain.StatusReady || c.Unfulfilled != "" {
		t.Fatalf("cluster %+v", c)
	}
}

func TestReclaimT0ActionsAndEarlyRelease(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	tNotice := h.clk.Now()
	b, err := h.c.CreateCluster(h.ctx, domain.Cluster{ID: "b", Name: "b", ProjectID: "q", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != domain.StatusWaiting {
		t.Fatalf("b status %s, want WaitingForDataPlaneNodes while the machine drains", b.Status)
	}
	// T+0: the intent and its lifecycle event are stored before anything
	// else happens.
	n, _ := h.st.GetNode(h.ctx, pre.ID)
	deadline := tNotice.Add(5 * time.Minute)
	if n.State != domain.NodeDraining || !n.Deadline.Equal(deadline) || n.Notified {
		t.Fatalf("node after commit: %+v", n)
	}
	ev, ok := h.event("a", pre.ID, domain.ReasonPreemptionNotified)
	if !ok || !ev.Deadline.Equal(deadline) || !ev.Timestamp.Equal(tNotice) {
		t.Fatalf("PreemptionNotified %+v", ev)
	}
	// The T+0 actions on the cluster.
	h.reconcile()
	v, _ := h.sim.Node("a", pre.Name)
	if !v.Unschedulable {
		t.Fatal("not cordoned")
	}
	if len(v.Taints) != 1 || v.Taints[0].Key != domain.TaintPreempted || v.Taints[0].Effect != "NoSchedule" {
		t.Fatalf("taints %+v", v.Taints)
	}
	if v.Annotations[domain.AnnotationDeadline] != deadline.Format(time.RFC3339) {
		t.Fatalf("annotation %q", v.Annotations[domain.AnnotationDeadline])
	}
	if ev := nodeEvents(v); len(ev) != 1 || ev[0].Type != "Warning" || ev[0].Reason != "PreemptionNotified" {
		t.Fatalf("k8s events %+v", v.Events)
	}
	// One Event on each pod too, so the tenant sees it in the pod's
	// namespace.
	for _, p := range v.Pods {
		if ev := podEvents(v, p.Namespace+"/"+p.Name); len(ev) != 1 || ev[0].Reason != "PreemptionNotified" || ev[0].Type != "Warning" {
			t.Fatalf("events on pod %s: %+v", p.Name, ev)
		}
	}
	for _, p := range v.Pods {
		if p.State != sim.PodTerminating || !p.SIGTERMAt.Equal(tNotice) || p.Grace != 5*time.Minute {
			t.Fatalf("pod %+v: want SIGTERM at T+0 with grace min(10m, 5m)", p)
		}
	}
	// Pods exit 30s later: the node is released at once, long before the
	// deadline, and b's standard node starts on the machine.
	h.advance(29 * time.Second)
	if n, _ := h.st.GetNode(h.ctx, pre.ID); n.State != domain.NodeDraining {
		t.Fatalf("released before the pods exited: %s", n.State)
	}
	h.advance(time.Second)
	n, _ = h.st.GetNode(h.ctx, pre.ID)
	if n.State != domain.NodeRemoving || n.Outcome != domain.OutcomeEarly || !n.DrainedAt.Equal(tNotice.Add(30*time.Second)) {
		t.Fatalf("after pods exited: %+v", n)
	}
	if _, ok := h.event("a", pre.ID, domain.ReasonNodeDrained); !ok {
		t.Fatal("NodeDrained missing")
	}
	if _, ok := h.event("a", pre.ID, domain.ReasonNodeRemoved); !ok {
		t.Fatal("NodeRemoved missing")
	}
	if _, ok := h.sim.Node("a", pre.Name); ok {
		t.Fatal("node object still in the cluster")
	}
	h.advance(5 * time.Second) // wipe
	if n, _ := h.st.GetNode(h.ctx, pre.ID); n.State != domain.NodeRemoved {
		t.Fatalf("state %s after wipe", n.State)
	}
	bn := h.onlyNode("b", domain.Standard)
	if bn.State != domain.NodeProvisioning && bn.State != domain.NodeReady {
		t.Fatalf("b's node %s", bn.State)
	}
	h.advance(21 * time.Second) // provisioning starts at the pass after the wipe
	if c, _ := h.st.GetCluster(h.ctx, "b"); c.Status != domain.StatusReady {
		t.Fatalf("b %s", c.Status)
	}
	// a keeps its target and says why it is not met.
	a, _ := h.st.GetCluster(h.ctx, "a")
	if a.DesiredPreemptibleGPUs != 8 || a.Unfulfilled != domain.UnfulfilledNoCapacity {
		t.Fatalf("a %+v", a)
	}
}

func TestReclaimAtDeadline(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	tNotice := h.clk.Now()
	h.create("b", 8, 0)
	h.advance(5*time.Minute - time.Second)
	n, _ := h.st.GetNode(h.ctx, pre.ID)
	if n.State != domain.NodeDraining {
		t.Fatalf("state %s one second before the deadline", n.State)
	}
	h.advance(time.Second)
	n, _ = h.st.GetNode(h.ctx, pre.ID)
	if n.State != domain.NodeRemoving || n.Outcome != domain.OutcomeDeadline || !n.DrainedAt.Equal(tNotice.Add(5*time.Minute)) {
		t.Fatalf("at the deadline: %+v", n)
	}
	if _, ok := h.event("a", pre.ID, domain.ReasonNodeDrained); ok {
		t.Fatal("NodeDrained is only for drains that end before the deadline")
	}
	if e, ok := h.event("a", pre.ID, domain.ReasonNodeRemoved); !ok || !strings.Contains(e.Message, "deadline") {
		t.Fatalf("NodeRemoved %+v", e)
	}
}

func TestDeadlineIsWakeTime(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	fillPreemptible(h)
	tNotice := h.clk.Now()
	h.create("b", 8, 0)
	// After the notice (and the replan for its move, half an interval
	// on), nothing is due before the deadline: the stubborn pod's drain
	// waits for it.
	next := h.reconcile()
	for i := 0; next.Before(tNotice.Add(5*time.Minute)) && i < 3; i++ {
		h.clk.Set(next)
		next = h.reconcile()
	}
	if !next.Equal(tNotice.Add(5 * time.Minute)) {
		t.Fatalf("next wake %v, want the deadline", next)
	}
}

func TestRestartMidDrainKeepsDeadline(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	tNotice := h.clk.Now()
	h.create("b", 8, 0)
	h.reconcile()
	h.advance(100 * time.Second)
	h.restart()
	h.clk.Step(40 * time.Second) // the process was down for 40s
	h.reconcile()
	n, _ := h.st.GetNode(h.ctx, pre.ID)
	if n.State != domain.NodeDraining || !n.Deadline.Equal(tNotice.Add(5*time.Minute)) {
		t.Fatalf("after restart: %+v", n)
	}
	v, _ := h.sim.Node("a", pre.Name)
	for _, p := range v.Pods {
		if p.State == sim.PodTerminating && !p.SIGTERMAt.Equal(tNotice) {
			t.Fatalf("pod %s re-signalled at %v", p.Name, p.SIGTERMAt)
		}
	}
	for _, e := range v.Events {
		if e.Count != 1 {
			t.Fatalf("notice repeated after restart: %+v", v.Events)
		}
	}
	if len(nodeEvents(v)) != 1 {
		t.Fatalf("node events after restart: %+v", v.Events)
	}
	h.advance(5*time.Minute - 141*time.Second)
	if n, _ := h.st.GetNode(h.ctx, pre.ID); n.State != domain.NodeDraining {
		t.Fatalf("ended early: %s", n.State)
	}
	h.advance(time.Second)
	n, _ = h.st.GetNode(h.ctx, pre.ID)
	if n.State != domain.NodeRemoving || !n.DrainedAt.Equal(tNotice.Add(5*time.Minute)) {
		t.Fatalf("drain did not end at its original deadline: %+v", n)
	}
}

func TestCrashBetweenIntentAndNotice(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	tNotice := h.clk.Now()
	h.create("b", 8, 0) // intent stored, nothing done to the cluster yet
	h.restart()
	h.clk.Step(10 * time.Second)
	h.reconcile()
	v, _ := h.sim.Node("a", pre.Name)
	if !v.Unschedulable || v.Annotations[domain.AnnotationDeadline] != tNotice.Add(5*time.Minute).Format(time.RFC3339) {
		t.Fatalf("notice after restart: %+v", v)
	}
	for _, p := range v.Pods {
		if p.Grace != 5*time.Minute-10*time.Second {
			t.Fatalf("grace %v, want the time left to the original deadline", p.Grace)
		}
	}
}

func TestScaleDownAndReplenish(t *testing.T) {
	h := newHarness(t, quickPods, 4)
	h.create("a", 8, 24)
	h.reconcile()
	h.advance(20 * time.Second)
	if got := len(h.nodes("a", domain.NodeReady)); got != 4 {
		t.Fatalf("%d ready nodes", got)
	}
	eight := 8
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &eight}); err != nil {
		t.Fatal(err)
	}
	draining := h.nodes("a", domain.NodeDraining)
	if len(draining) != 2 {
		t.Fatalf("want the 2 surplus nodes draining, got %d", len(draining))
	}
	for _, n := range draining {
		if n.DrainCause != domain.CauseScaledDown || n.Class != domain.Preemptible {
			t.Fatalf("%+v", n)
		}
		if _, ok := h.event("a", n.ID, domain.ReasonScaledDown); !ok {
			t.Fatal("ScaledDown event missing")
		}
	}
	h.reconcile()
	v, _ := h.sim.Node("a", draining[0].Name)
	if ev := nodeEvents(v); len(ev) != 1 || ev[0].Type != "Normal" {
		t.Fatalf("a tenant's own scale-down is a Normal event: %+v", v.Events)
	}
	h.advance(40 * time.Second)
	if got := len(h.nodes("a", domain.NodeReady)); got != 2 {
		t.Fatalf("%d ready after scale-down", got)
	}
	// Raising the target again refills from the freed machines.
	thirtytwo := 24
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &thirtytwo}); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.advance(20 * time.Second)
	if got := len(h.nodes("a", domain.NodeReady)); got != 4 {
		t.Fatalf("%d ready after raising the target", got)
	}
}

func TestBurstThenReplenishAfterCooldown(t *testing.T) {
	h := newHarness(t, quickPods, 3)
	h.cfg.Cooldown = time.Minute
	h.restart()
	h.create("a", 8, 16)
	h.reconcile()
	h.advance(20 * time.Second)
	h.create("burst", 16, 0)
	h.advance(time.Minute)
	if got := len(h.nodes("a", domain.NodeReady)); got != 1 {
		t.Fatalf("a has %d ready nodes during the burst, want its standard one", got)
	}
	if _, err := h.c.DeleteCluster(h.ctx, "burst"); err != nil {
		t.Fatal(err)
	}
	h.advance(40 * time.Second) // drains end, machines wiped
	if _, err := h.st.GetCluster(h.ctx, "burst"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("burst cluster still there: %v", err)
	}
	a, _ := h.st.GetCluster(h.ctx, "a")
	if a.Unfulfilled != domain.UnfulfilledCoolingDown {
		t.Fatalf("a: %s %q", a.Unfulfilled, a.UnfulfilledMessage)
	}
	h.advance(time.Minute + 20*time.Second)
	if got := len(h.nodes("a", domain.NodeReady)); got != 3 {
		t.Fatalf("a has %d ready nodes after the burst, want 3", got)
	}
	a, _ = h.st.GetCluster(h.ctx, "a")
	if a.Unfulfilled != "" {
		t.Fatalf("a still unfulfilled: %s", a.Unfulfilled)
	}
	if _, ok := h.event("a", "", domain.ReasonTargetFulfilled); !ok {
		t.Fatal("TargetFulfilled event missing")
	}
}

func TestCreateRefusedChangesNothing(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	before, _ := h.st.Snapshot(h.ctx)
	_, err := h.c.CreateCluster(h.ctx, domain.Cluster{ID: "x", Name: "x", ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 16})
	var sf *ShortfallError
	if !errors.As(err, &sf) || sf.WantGPUs != 16 || sf.CanGPUs != 8 {
		t.Fatalf("err %v", err)
	}
	after, _ := h.st.Snapshot(h.ctx)
	if len(after.Clusters) != len(before.Clusters) || len(after.Nodes) != len(before.Nodes) {
		t.Fatal("refused create wrote something")
	}
}

func TestDeleteDrainsStandardNodesToo(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	fillPreemptible(h)
	var gone []string
	h.c.OnClusterGone = func(id string) { gone = append(gone, id) }
	if _, err := h.c.DeleteCluster(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, _ := h.st.GetCluster(h.ctx, "a")
	if c.Status != domain.StatusDeleting {
		t.Fatalf("status %s", c.Status)
	}
	if got := len(h.nodes("a", domain.NodeDraining)); got != 2 {
		t.Fatalf("%d draining", got)
	}
	h.advance(40 * time.Second)
	if _, err := h.st.GetCluster(h.ctx, "a"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("cluster not gone: %v", err)
	}
	snap, _ := h.st.Snapshot(h.ctx)
	if len(snap.Nodes) != 0 {
		t.Fatalf("machines not freed: %+v", snap.Nodes)
	}
	// Told once, so the cluster's Kubernetes watch can be stopped.
	if len(gone) != 1 || gone[0] != "a" {
		t.Fatalf("OnClusterGone calls %v, want [a]", gone)
	}
}

// noticeBroken is a cluster whose API refuses every pod's notice, for
// good.
type noticeBroken struct{ driver.ClusterDriver }

func (noticeBroken) Notify(context.Context, string, string, driver.Work, time.Time) error {
	return errInjected
}

func TestDeadlineHoldsWhenTheNoticeKeepsFailing(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	pre := fillPreemptible(h)
	tNotice := h.clk.Now()
	h.c = New(h.st, noticeBroken{h.sim}, h.sim, h.clk, h.cfg, nil)
	h.lenient = true // the notice fails, again and again
	h.create("b", 8, 0)
	for h.clk.Now().Before(tNotice.Add(5 * time.Minute)) {
		h.clk.Step(time.Second)
		h.reconcile()
	}
	n, _ := h.st.GetNode(h.ctx, pre.ID)
	if n.State != domain.NodeRemoving && n.State != domain.NodeRemoved {
		t.Fatalf("at the deadline the node is %s", n.State)
	}
	if n.Outcome != domain.OutcomeDeadline || n.DrainedAt.After(n.Deadline) {
		t.Fatalf("%+v", n)
	}
}

// nodeEvents are the Kubernetes Events about the node itself.
func nodeEvents(v sim.NodeView) []sim.EventView { return podEvents(v, "") }

// podEvents are those about one pod ("namespace/name").
func podEvents(v sim.NodeView, pod string) []sim.EventView {
	var out []sim.EventView
	for _, e := range v.Events {
		if e.Pod == pod {
			out = append(out, e)
		}
	}
	return out
}

// TestASettledLoopPlansNothing: once nothing changes, a pass plans no
// partition (the harness checks that the whole plan would change nothing
// either), and a change plans the partition it is in.
func TestASettledLoopPlansNothing(t *testing.T) {
	h := newHarness(t, quickPods, 3)
	h.create("a", 8, 8)
	h.advance(30 * time.Second)
	if got := len(h.nodes("a", domain.NodeReady)); got != 2 {
		t.Fatalf("a has %d ready nodes, want 2", got)
	}
	before := h.planned
	h.advance(10 * time.Second)
	if n := h.planned - before; n != 0 {
		t.Fatalf("10 settled passes planned %d times; want none to", n)
	}
	// A change is planned: b's create commits, and the next pass plans it.
	h.create("b", 0, 8)
	h.advance(30 * time.Second)
	if got := len(h.nodes("b", domain.NodeReady)); got != 1 {
		t.Fatalf("b has %d ready nodes after the change, want 1", got)
	}
	if h.planned == before {
		t.Fatal("the change planned nothing")
	}
}
