package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store/postgres"
)

const (
	// crashSpeed runs the clock 40x: the 5-minute drain window lasts 7.5s
	// of wall time, provisioning (20s) half a second.
	crashSpeed = 40
	// crashSeed is the server's --sim-seed; with it the test predicts each
	// node's simulated pods (sim.DefaultPods).
	crashSeed   = 7
	drainWindow = 5 * time.Minute
	// stubbornProfile is the default pod profile whose trainer ignores
	// SIGTERM, so its drain lasts until the deadline.
	stubbornProfile = "stubborn-trainer"
)

const crashFleet = `
pools:
  - {region: ` + region + `, gpu_type: ` + gpuType + `, machines: 3}
prices:
  ` + gpuType + `: "2.99"
`

// controllerInterval is the server's reconcile interval at a speed, in
// simulated time: it polls about 10 times a wall second.
func controllerInterval(speed float64) time.Duration {
	return time.Duration(float64(100*time.Millisecond) * speed)
}

// drainTolerance is how far past the moment it is due (its deadline, or
// the exit of its last pod) a drain may be recorded as ended, in simulated
// time: one controller interval (the server polls about 10 times a wall
// second: 100ms x speed) plus the wall time the server needs to act, scaled
// by the speed. Acting takes a handful of durable writes per node
// (force-delete each pod, the state change, delete the node object, the
// NodeRemoved commit, the wipe), and both reclaimed nodes may be due at
// once: it is allowed 16 write+fsync rounds at the median cost measured on
// this machine while the drains ran, and at least 250ms, which also covers
// scheduling delays on a busy 2-core machine. On top of that comes the
// longest stall the test process itself saw while the drains ran (how late
// it woke from a 50ms sleep): a machine that stops running processes for a
// second stops the server too, and at 40x a second is 40s of simulated
// time. At 40x on an idle machine with a fast disk the tolerance is 4s +
// 10s of simulated time, under 5% of the 5-minute window.
func drainTolerance(speed float64, load *loadMeter) time.Duration {
	act := max(250*time.Millisecond, 16*load.medianFsync()) + load.late
	return controllerInterval(speed) + time.Duration(float64(act)*speed)
}

// loadMeter samples how busy the machine is while the drains run.
type loadMeter struct {
	dir   string
	fsync []time.Duration // write+fsync+rename samples
	late  time.Duration   // latest wake-up from a 50ms sleep
}

func newLoadMeter(dir string) *loadMeter {
	return &loadMeter{dir: dir, fsync: []time.Duration{fsyncLatency}}
}

// sleep sleeps 50ms, measuring how late it wakes and what one durable
// write costs now.
func (m *loadMeter) sleep() {
	start := time.Now()
	time.Sleep(50 * time.Millisecond)
	m.late = max(m.late, time.Since(start)-50*time.Millisecond)
	m.fsync = append(m.fsync, measureFsyncOnce(m.dir))
}

func (m *loadMeter) medianFsync() time.Duration {
	s := slices.Clone(m.fsync)
	slices.Sort(s)
	return s[len(s)/2]
}

func (m *loadMeter) String() string {
	return fmt.Sprintf("write+fsync median %s, slowest %s over %d samples; latest wake-up from a 50ms sleep %s",
		m.medianFsync().Round(10*time.Microsecond), slices.Max(m.fsync).Round(10*time.Microsecond), len(m.fsync), m.late.Round(10*time.Microsecond))
}

func TestCrashRecoverySQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// An explicit SQLite file outside the data directory, so the restart
	// demonstrably reopens the database named by --db.
	db := filepath.Join(dir, "e2e-sqlite.db")
	testCrashRecovery(t, dir, db)
	if _, err := os.Stat(db); err != nil {
		t.Errorf("--db %s was not used: %v", db, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "sparecap.db")); err == nil {
		t.Errorf("the server created the default SQLite file in the data dir although --db %s was given", db)
	}
}

func TestCrashRecoveryPostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Fails (never skips) when PostgreSQL is unreachable.
	dsn := postgres.TestDSN(t)
	testCrashRecovery(t, dir, dsn)
}

// testCrashRecovery is the crash scenario:
//
//  1. tenant team-a's cluster (8 standard GPUs, a target of 16 preemptible)
//     fills the 3-machine fleet;
//  2. tenant team-b asks for 16 standard GPUs, which reclaims both
//     preemptible nodes (PreemptionNotified, deadline T+5:00);
//  3. right after the notice the server is SIGKILLed and a new process is
//     started on the same data directory and database;
//  4. the drains keep their deadlines and end by them, nothing is lost, no
//     machine serves two nodes, and team-b's cluster becomes Ready.
func testCrashRecovery(t *testing.T, dir, db string) {
	testStart := time.Now()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, crashFleet)
	cfg := serverConfig{
		DataDir:    filepath.Join(dir, "data"),
		DB:         db,
		FleetFile:  fleetFile,
		Speed:      crashSpeed,
		SimSeed:    crashSeed,
		ConfigPath: filepath.Join(dir, "cli.yaml"),
	}
	load := newLoadMeter(t.TempDir())

	srv := startServer(t, cfg)
	// The restart listens where the first process did, like a supervisor
	// restarting a crashed service.
	cfg.Addr = strings.TrimPrefix(srv.URL, "http://")
	admin := apiClient(t, srv.URL, adminToken)

	// ---- 1. two tenants, the first cluster fills up ----
	var projA, projB apiv1.Project
	cliJSON(t, srv, adminToken, &projA, "projects", "create", "team-a", "-o", "json")
	cliJSON(t, srv, adminToken, &projB, "projects", "create", "team-b", "-o", "json")
	if projA.ProjectID != "team-a" || projA.Token == "" || projB.ProjectID != "team-b" || projB.Token == "" || projA.Token == projB.Token {
		t.Fatalf("projects create -o json: got %+v and %+v, want team-a and team-b with distinct tokens", projA, projB)
	}
	tenantA := apiClient(t, srv.URL, projA.Token)
	tenantB := apiClient(t, srv.URL, projB.Token)

	// The CLI also insists on --region and --gpu-type (so does the API).
	var created apiv1.Cluster
	cliJSON(t, srv, adminToken, &created, "clusters", "create", "--name", "training",
		"--region", region, "--gpu-type", gpuType,
		"--num-gpus", "8", "--num-preemptible-gpus", "16", "--project-id", "team-a", "-o", "json")
	if created.ClusterID == "" || created.ProjectID != "team-a" || created.NumGPUs != 8 || created.DesiredPreemptibleGPUs != 16 ||
		created.Region != region || created.GPUType != gpuType || created.ClusterType != "KUBERNETES" || created.BillingType != "ON_DEMAND" {
		t.Fatalf("clusters create -o json returned %+v; want cluster training of team-a in %s/%s, KUBERNETES, ON_DEMAND, 8 standard GPUs, target 16 preemptible",
			created, region, gpuType)
	}
	aID := created.ClusterID
	filled := func(c *apiv1.Cluster) bool { return c.Status == "Ready" && c.AllocatedPreemptibleGPUs == 16 }
	clA := waitCluster(t, tenantA, aID, 30*time.Second, "status Ready and allocated_preemptible_gpus == 16", filled)
	clA = ensureStubbornNode(t, srv, projA.Token, clA)
	var viaCLI apiv1.Cluster
	cliJSON(t, srv, projA.Token, &viaCLI, "clusters", "get", aID, "-o", "json")
	if viaCLI.AllocatedPreemptibleGPUs != 16 || viaCLI.DesiredPreemptibleGPUs != 16 || viaCLI.Status != "Ready" {
		t.Fatalf("clusters get -o json: %s; want Ready with 16/16 preemptible GPUs", describeCluster(&viaCLI))
	}

	// The CLI lists what the API does, and TargetFulfilled comes once the
	// allocated nodes are ready. The cluster may still be writing events
	// (nodes becoming ready; a later event of a node and reason replaces
	// the earlier one, with a new cursor), so the two reads are repeated
	// until they see the same moment and it has TargetFulfilled.
	var histA []apiv1.Event
	var cursorA string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		histA, cursorA = allEvents(t, admin, aID, "")
		var listed apiv1.EventList
		cliJSON(t, srv, projA.Token, &listed, "events", "--cluster", aID, "-o", "json")
		got, want := eventIDs(listed.Events), eventIDs(histA)
		same := slices.Equal(got, want) && listed.NextCursor == cursorA
		fulfilled := slices.ContainsFunc(histA, func(e apiv1.Event) bool { return e.Reason == "TargetFulfilled" })
		if same && fulfilled {
			break
		}
		if time.Now().After(deadline) && !same {
			t.Fatalf("events -o json lists %v (next_cursor %q); the API lists %v (next_cursor %q)", got, listed.NextCursor, want, cursorA)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TargetFulfilled event 15 s after the target was met; events: %s", reasons(histA))
		}
	}

	// ---- 2. the reclaim ----
	// A follower whose backlog ends at cursorA: what it prints after that
	// can only come from the stream.
	follow := startFollow(t, srv, projA.Token, aID)
	follow.waitFor(t, 15*time.Second, "the last listed event (cursor "+cursorA+")", func(e apiv1.Event) bool { return e.Cursor == cursorA })
	watch := startWatch(t, tenantA, aID, cursorA)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clB, err := tenantB.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "burst", Region: region, GPUType: gpuType, NumGPUs: 16})
	if err != nil {
		t.Fatalf("team-b creates a cluster of 16 standard GPUs (the free-plus-reclaimable capacity): %v", err)
	}
	if clB.ProjectID != "team-b" || clB.NumGPUs != 16 || clB.DesiredPreemptibleGPUs != 0 || clB.Status == "Ready" {
		t.Fatalf("create burst: got %s (project %s); want team-b's cluster with 16 standard GPUs, not Ready before the drains end", describeCluster(clB), clB.ProjectID)
	}
	bID := clB.ClusterID
	notice := watch.waitFor(t, 10*time.Second, "PreemptionNotified", func(e apiv1.Event) bool { return e.Reason == "PreemptionNotified" })
	streamed := follow.waitFor(t, 10*time.Second, "a streamed PreemptionNotified event", func(e apiv1.Event) bool {
		return e.Reason == "PreemptionNotified" && cursorAfter(e.Cursor, cursorA)
	})
	if streamed.Deadline == nil || notice.Deadline == nil {
		t.Fatalf("PreemptionNotified without a deadline: streamed by the CLI %+v, by the API %+v", streamed, notice.Event)
	}
	follow.interrupt(t)

	// The state right before the crash, as the API reports it.
	preHist, preCursor := allEvents(t, admin, aID, "")
	preA, err := admin.GetCluster(ctx, aID)
	if err != nil {
		t.Fatal(err)
	}
	preB, err := admin.GetCluster(ctx, bID)
	if err != nil {
		t.Fatal(err)
	}
	anchor := srv.anchor(t)

	// ---- 3. the crash ----
	srv.kill()
	killedAt := anchor.Now() // the first process is certainly gone by this simulated time
	t.Logf("server #1 SIGKILLed %s (wall) after the API stream delivered the PreemptionNotified event, by simulated %s",
		time.Since(notice.at).Round(time.Millisecond), killedAt.Format(time.RFC3339Nano))

	drains := map[string]drainInfo{} // node ID -> drain
	for _, e := range preHist {
		if e.Reason != "PreemptionNotified" {
			continue
		}
		if e.Deadline == nil {
			t.Fatalf("PreemptionNotified for %s has no deadline: %+v", e.NodeName, e)
		}
		if d := e.Deadline.Sub(e.Timestamp); d != drainWindow {
			t.Errorf("PreemptionNotified for %s at %s has deadline %s: %s after the notice, want the 5m drain window",
				e.NodeName, e.Timestamp.Format(time.RFC3339Nano), e.Deadline.Format(time.RFC3339Nano), d)
		}
		profile, _ := sim.DefaultPods(crashSeed, aID, e.NodeName)
		drains[e.NodeID] = drainInfo{notice: e, deadline: *e.Deadline, profile: profile}
	}
	var preemptible []string
	for _, n := range preA.GPUWorkerNodes {
		if n.ComputeClass == "preemptible" {
			preemptible = append(preemptible, n.NodeID)
		}
	}
	if len(drains) != 2 || len(preemptible) != 2 {
		t.Fatalf("before the crash: %d PreemptionNotified events (%s) for %d preemptible nodes (%s); want both preemptible nodes reclaimed",
			len(drains), reasons(preHist), len(preemptible), describeCluster(preA))
	}
	for _, n := range preA.GPUWorkerNodes {
		d, ok := drains[n.NodeID]
		switch {
		case !ok && n.ComputeClass == "preemptible":
			t.Fatalf("preemptible node %s was not notified; cluster before the crash: %s", n.NodeName, describeCluster(preA))
		case !ok:
			continue
		case n.Status != "draining" || n.Deadline == nil || !n.Deadline.Equal(d.deadline):
			t.Fatalf("before the crash, node %s: status %s deadline %v; want draining with the notice's deadline %s",
				n.NodeName, n.Status, n.Deadline, d.deadline.Format(time.RFC3339Nano))
		}
	}
	for id, d := range drains {
		t.Logf("draining at the crash: %s (%s), notified %s, deadline %s, pods: %s",
			d.notice.NodeName, id, d.notice.Timestamp.Format(time.RFC3339Nano), d.deadline.Format(time.RFC3339Nano), d.profile)
	}

	// ---- 4. the restart ----
	restartBegan := time.Now()
	srv2 := startServer(t, cfg)
	t.Logf("server #2 up %s after the SIGKILL", time.Since(restartBegan).Round(time.Millisecond))
	admin = apiClient(t, srv2.URL, adminToken)
	tenantA = apiClient(t, srv2.URL, projA.Token)
	tenantB = apiClient(t, srv2.URL, projB.Token)
	watch2 := startWatch(t, tenantA, aID, preCursor) // the pre-crash cursor still streams

	// Deadlines unchanged, in the cluster view (API and CLI).
	postA, err := tenantA.GetCluster(ctx, aID)
	if err != nil {
		t.Fatalf("after the restart team-a cannot read its cluster: %v", err)
	}
	var nodesCLI struct {
		Nodes []apiv1.Node `json:"gpu_worker_nodes"`
	}
	cliJSON(t, srv2, projA.Token, &nodesCLI, "nodes", "list", "--cluster", aID, "-o", "json")
	checkedDeadline := 0
	for _, view := range [][]apiv1.Node{postA.GPUWorkerNodes, nodesCLI.Nodes} {
		for _, n := range view {
			d, ok := drains[n.NodeID]
			if !ok {
				continue
			}
			switch n.Status {
			case "draining":
				checkedDeadline++
				if n.Deadline == nil || !n.Deadline.Equal(d.deadline) {
					t.Errorf("after the restart node %s is draining with deadline %v; before the crash it was %s",
						n.NodeName, n.Deadline, d.deadline.Format(time.RFC3339Nano))
				}
			case "removing":
			default:
				t.Errorf("after the restart node %s is %s; a node notified before the crash must be draining or removing (or gone)", n.NodeName, n.Status)
			}
		}
	}
	if checkedDeadline == 0 {
		t.Errorf("no node was still draining right after the restart, so no deadline could be compared (cluster: %s)", describeCluster(postA))
	}

	// The simulated Kubernetes side of each still-draining node got the
	// T+0 treatment with the same deadline, and no pod outlives it.
	due := checkKubernetesSide(t, srv2, anchor, aID, drains)

	// The event history from before the crash is intact, and its cursors
	// still work.
	checkHistory(t, srv2, admin, projA.Token, aID, preHist, preCursor)

	// No machine serves two nodes, now and while the drains finish.
	checkMachines(t, srv2, admin, "right after the restart")

	// A second follower, on the restarted server, sees team-b's nodes join.
	followB := startFollow(t, srv2, projB.Token, bID)

	// ---- 5. the drains end by their deadlines ----
	var latest time.Time
	for _, d := range drains {
		latest = maxTime(latest, d.deadline)
	}
	waitUntil := wallOf(anchor, latest).Add(15 * time.Second)
	lastMachineCheck := time.Now()
	for {
		removed := map[string]watchedEvent{}
		for _, e := range watch2.snapshot() {
			if _, ok := drains[e.NodeID]; ok && e.Reason == "NodeRemoved" {
				removed[e.NodeID] = e
			}
		}
		if len(removed) == len(drains) {
			break
		}
		if time.Now().After(waitUntil) {
			post, _ := allEvents(t, admin, aID, preCursor)
			t.Fatalf("15s (wall) past the last deadline %s only %d of %d reclaimed nodes have a NodeRemoved event; events after the crash: %s; watch error: %v",
				latest.Format(time.RFC3339Nano), len(removed), len(drains), reasons(post), watch2.error())
		}
		if time.Since(lastMachineCheck) > 300*time.Millisecond {
			checkMachines(t, srv2, admin, "while the drains finish")
			lastMachineCheck = time.Now()
		}
		load.sleep()
	}
	tol := drainTolerance(crashSpeed, load)
	t.Logf("drain tolerance: %s of simulated time (%s of wall time) = controller interval %s + (max(250ms, 16 x median fsync) + longest stall) x %d; measured %s",
		tol, time.Duration(float64(tol)/crashSpeed).Round(time.Millisecond), controllerInterval(crashSpeed), crashSpeed, load)
	post, _ := allEvents(t, admin, aID, preCursor)
	for id, d := range drains {
		var removed, drained *apiv1.Event
		var seenAt time.Time
		for _, e := range watch2.snapshot() {
			if e.NodeID == id && e.Reason == "NodeRemoved" {
				removed, seenAt = &e.Event, e.at
			}
		}
		for i, e := range post {
			if e.NodeID == id && e.Reason == "NodeDrained" {
				drained = &post[i]
			}
		}
		late := removed.Timestamp.Sub(d.deadline)
		t.Logf("%s (%s): NodeRemoved at %s, %s after the notice, %s relative to the deadline; seen %s (wall) relative to the deadline's wall time; %q",
			d.notice.NodeName, d.profile, removed.Timestamp.Format(time.RFC3339Nano), removed.Timestamp.Sub(d.notice.Timestamp).Round(time.Millisecond),
			late.Round(time.Millisecond), seenAt.Sub(wallOf(anchor, d.deadline)).Round(time.Millisecond), removed.Message)
		if !removed.Timestamp.After(killedAt) {
			t.Errorf("%s: NodeRemoved at %s, before the SIGKILL at %s: the node was not draining across the crash", d.notice.NodeName, removed.Timestamp, killedAt)
		}
		if late > tol {
			t.Errorf("%s: the drain ended at %s, %s after its deadline %s; the tolerance is %s (controller interval %s + processing slack)",
				d.notice.NodeName, removed.Timestamp.Format(time.RFC3339Nano), late, d.deadline.Format(time.RFC3339Nano), tol, controllerInterval(crashSpeed))
		}
		// Removed as soon as its pods were gone (at the deadline at the
		// latest), never while one still ran.
		if end, ok := due[d.notice.NodeName]; ok {
			if removed.Timestamp.Before(end) {
				t.Errorf("%s: removed at %s while a pod was still running (the last one is gone at %s)", d.notice.NodeName, removed.Timestamp.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
			}
			if lag := removed.Timestamp.Sub(end); lag > tol {
				t.Errorf("%s: its last pod was gone at %s but the node was removed only %s later (tolerance %s)", d.notice.NodeName, end.Format(time.RFC3339Nano), lag, tol)
			}
		}
		// The same bound in wall time, through the clock anchor read before
		// the crash: a restarted clock that lost or gained time shows here.
		if wallLate := seenAt.Sub(wallOf(anchor, d.deadline)); wallLate > time.Duration(float64(tol)/crashSpeed)+250*time.Millisecond {
			t.Errorf("%s: NodeRemoved was streamed %s (wall) after the deadline's wall time per the pre-crash clock anchor; tolerance %s + 250ms",
				d.notice.NodeName, wallLate.Round(time.Millisecond), time.Duration(float64(tol)/crashSpeed))
		}
		if d.profile == stubbornProfile {
			// Its trainer ignores SIGTERM: the drain lasts until the deadline
			// (the kubelet may kill the pod up to a second early, as grace
			// periods are whole seconds).
			if removed.Timestamp.Before(d.deadline.Add(-2 * time.Second)) {
				t.Errorf("%s runs a trainer that ignores SIGTERM, yet was removed at %s, %s before its deadline", d.notice.NodeName, removed.Timestamp, -late)
			}
		} else if end, ok := due[d.notice.NodeName]; ok && end.Add(tol).Before(d.deadline) && (drained == nil || !drained.Timestamp.Before(d.deadline)) {
			// Its pods were all gone more than the tolerance before the
			// deadline: the drain must have ended early, as drained.
			t.Errorf("%s (%s): its last pod was gone at %s, %s before the deadline; want a NodeDrained event before the deadline %s, got %+v",
				d.notice.NodeName, d.profile, end.Format(time.RFC3339Nano), d.deadline.Sub(end), d.deadline, drained)
		}
	}
	checkMachines(t, srv2, admin, "after the drains")

	// ---- 6. the second cluster comes up; nothing was lost ----
	clB2 := waitCluster(t, tenantB, bID, 20*time.Second, "team-b's cluster Ready with 2 ready standard nodes", func(c *apiv1.Cluster) bool {
		return c.Status == "Ready" && countNodes(c, "standard", "ready") == 2
	})
	for _, n := range clB2.GPUWorkerNodes {
		followB.waitFor(t, 10*time.Second, "NodeAdded for team-b's node "+n.NodeName, func(e apiv1.Event) bool {
			return e.Reason == "NodeAdded" && e.NodeID == n.NodeID
		})
	}
	followB.interrupt(t)

	clA2, err := tenantA.GetCluster(ctx, aID)
	if err != nil {
		t.Fatal(err)
	}
	if clA2.Status != "Ready" || clA2.NumGPUs != 8 || clA2.DesiredPreemptibleGPUs != 16 || clA2.AllocatedPreemptibleGPUs != 0 ||
		countNodes(clA2, "standard", "ready") != 1 || clA2.TargetUnfulfilled == nil || clA2.TargetUnfulfilled.Reason != "NoSpareCapacity" {
		t.Errorf("team-a's cluster at the end: %s; want Ready, its standard node kept, target 16 kept but unmet (NoSpareCapacity)", describeCluster(clA2))
	}
	var list apiv1.ClusterList
	cliJSON(t, srv2, adminToken, &list, "clusters", "list", "-o", "json")
	if len(list.Clusters) != 2 {
		t.Fatalf("clusters list after the restart: %d clusters, want 2", len(list.Clusters))
	}
	for _, before := range []*apiv1.Cluster{preA, preB} {
		i := slices.IndexFunc(list.Clusters, func(c apiv1.Cluster) bool { return c.ClusterID == before.ClusterID })
		if i < 0 {
			t.Errorf("cluster %s (%s) is gone after the restart", before.ClusterID, before.ClusterName)
			continue
		}
		if got, want := settings(list.Clusters[i]), settings(*before); got != want {
			t.Errorf("cluster %s settings changed across the crash:\n got %s\nwant %s", before.ClusterID, got, want)
		}
	}
	// Tenants still see only their own.
	if _, err := tenantB.GetCluster(ctx, aID); !client.IsNotFound(err) {
		t.Errorf("after the restart team-b reads team-a's cluster: err %v, want 404 not_found", err)
	}
	var capList apiv1.CapacityList
	cliJSON(t, srv2, adminToken, &capList, "capacity", "-o", "json")
	if len(capList.Capacity) != 1 || capList.Capacity[0].Total != 24 || capList.Capacity[0].InUseStandard != 24 || capList.Capacity[0].InUsePreemptible != 0 {
		t.Errorf("capacity at the end: %+v; want 24 GPUs, all serving standard nodes (8 of team-a, 16 of team-b)", capList.Capacity)
	}
	checkMachines(t, srv2, admin, "at the end")

	// ---- 7. billing across the crashes ----
	br := &billingRun{
		t: t, cfg: cfg, srv: srv2, anchor: srv2.anchor(t),
		runFrom: anchor.Anchor().Virtual.Add(-time.Minute).Truncate(time.Second),
		tenants: []billingTenant{
			{project: projA.ProjectID, token: projA.Token, clusters: []string{aID}},
			{project: projB.ProjectID, token: projB.Token, clusters: []string{bID}},
		},
		firstID: aID, burstID: bID, startedAt: killedAt,
	}
	last := br.run(t)

	last.stop(t)
	t.Logf("crash scenario took %s", time.Since(testStart).Round(time.Millisecond))
}

type drainInfo struct {
	notice   apiv1.Event
	deadline time.Time
	profile  string
}

// ensureStubbornNode tries to give the cluster a preemptible node running
// the pod profile that ignores SIGTERM, so that the crash test has a drain
// that lasts until its deadline. Profiles are a function of the sim seed,
// the cluster ID and the node name, and the cluster ID is random: when
// neither node got it, the target is dropped to 0 and raised again, which
// replaces both nodes with new names (and exercises scale-down drains on
// the way). Each cycle has a 5/9 chance; after maxCycles it goes on
// without (logged), rather than fail.
func ensureStubbornNode(t *testing.T, srv *server, token string, cl *apiv1.Cluster) *apiv1.Cluster {
	t.Helper()
	const maxCycles = 6
	c := apiClient(t, srv.URL, token)
	for cycle := 0; ; cycle++ {
		var profiles []string
		for _, n := range cl.GPUWorkerNodes {
			if n.ComputeClass == "preemptible" {
				p, _ := sim.DefaultPods(crashSeed, cl.ClusterID, n.NodeName)
				profiles = append(profiles, n.NodeName+"="+p)
				if p == stubbornProfile {
					t.Logf("preemptible pod profiles: %s (after %d rescale cycles)", strings.Join(profiles, ", "), cycle)
					return cl
				}
			}
		}
		if cycle == maxCycles {
			t.Logf("NOTE: after %d rescale cycles no preemptible node runs the %s profile (%s); this run does not cover a drain that lasts until its deadline",
				cycle, stubbornProfile, strings.Join(profiles, ", "))
			return cl
		}
		t.Logf("preemptible pod profiles %s: no drain would reach its deadline; replacing the nodes", strings.Join(profiles, ", "))
		var out apiv1.Cluster
		cliJSON(t, srv, token, &out, "clusters", "update", cl.ClusterID, "--num-preemptible-gpus", "0", "-o", "json")
		waitCluster(t, c, cl.ClusterID, 30*time.Second, "no preemptible nodes left", func(c *apiv1.Cluster) bool {
			return countNodes(c, "preemptible", "") == 0
		})
		cliJSON(t, srv, token, &out, "clusters", "update", cl.ClusterID, "--num-preemptible-gpus", "16", "-o", "json")
		if out.DesiredPreemptibleGPUs != 16 {
			t.Fatalf("clusters update --num-preemptible-gpus 16 returned %s", describeCluster(&out))
		}
		cl = waitCluster(t, c, cl.ClusterID, 30*time.Second, "status Ready and allocated_preemptible_gpus == 16 again", func(c *apiv1.Cluster) bool {
			return c.Status == "Ready" && c.AllocatedPreemptibleGPUs == 16
		})
	}
}

func countNodes(c *apiv1.Cluster, class, status string) int {
	n := 0
	for _, x := range c.GPUWorkerNodes {
		if x.ComputeClass == class && (status == "" || x.Status == status) {
			n++
		}
	}
	return n
}

func settings(c apiv1.Cluster) string {
	return fmt.Sprintf("id=%s name=%s project=%s region=%s gpu_type=%s type=%s billing=%s num_gpus=%d preemptible_target=%d created_at=%s",
		c.ClusterID, c.ClusterName, c.ProjectID, c.Region, c.GPUType, c.ClusterType, c.BillingType, c.NumGPUs, c.DesiredPreemptibleGPUs,
		c.CreatedAt.UTC().Format(time.RFC3339Nano))
}

func eventIDs(evs []apiv1.Event) []string {
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.EventID)
	}
	return ids
}

func cursorAfter(c, after string) bool {
	a, err1 := strconv.ParseInt(c, 10, 64)
	b, err2 := strconv.ParseInt(after, 10, 64)
	return err1 == nil && err2 == nil && a > b
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkHistory: every event from before the crash is still listed, with
// the same ID, cursor and content, unless the store replaced it by a later
// event of the same (node, reason), as it does by design; and the cursor
// a client held before the crash still pages and streams from where it was.
func checkHistory(t *testing.T, srv *server, admin *client.Client, tenantToken, clusterID string, pre []apiv1.Event, preCursor string) {
	t.Helper()
	var listed apiv1.EventList
	cliJSON(t, srv, tenantToken, &listed, "events", "--cluster", clusterID, "-o", "json")
	now := listed.Events
	byID := map[string]apiv1.Event{}
	for _, e := range now {
		byID[e.EventID] = e
	}
	for _, e := range pre {
		got, ok := byID[e.EventID]
		if ok {
			if got.Cursor != e.Cursor || got.Reason != e.Reason || got.NodeID != e.NodeID || got.Message != e.Message ||
				!got.Timestamp.Equal(e.Timestamp) || (got.Deadline == nil) != (e.Deadline == nil) || (got.Deadline != nil && !got.Deadline.Equal(*e.Deadline)) {
				t.Errorf("event %s changed across the crash:\n got %+v\nwant %+v", e.EventID, got, e)
			}
			continue
		}
		replaced := slices.ContainsFunc(now, func(x apiv1.Event) bool {
			return x.NodeID == e.NodeID && x.Reason == e.Reason && cursorAfter(x.Cursor, e.Cursor)
		})
		if !replaced {
			t.Errorf("event %s (%s %s, cursor %s) from before the crash is lost; events now: %s", e.EventID, e.Reason, e.NodeName, e.Cursor, reasons(now))
		}
	}
	// The pre-crash cursor pages on from where it was: nothing seen before
	// is served again (unless replaced, which gives it a new cursor).
	after, _ := allEvents(t, admin, clusterID, preCursor)
	for _, e := range after {
		if !cursorAfter(e.Cursor, preCursor) {
			t.Errorf("listing after cursor %s returned event %s with cursor %s", preCursor, e.EventID, e.Cursor)
		}
		if slices.ContainsFunc(pre, func(x apiv1.Event) bool { return x.EventID == e.EventID }) {
			t.Errorf("listing after the pre-crash cursor %s returned event %s (%s), which was listed before the crash", preCursor, e.EventID, e.Reason)
		}
	}
}

// checkMachines: no machine is assigned to two live nodes. The machines
// list names the node each machine serves; every node of every cluster
// that holds a machine (provisioning, ready, draining, removing) must be
// served by exactly one machine (two nodes on one machine leave one of
// them on none). Reads are repeated when the state moved between them.
func checkMachines(t *testing.T, srv *server, admin *client.Client, when string) {
	t.Helper()
	var problems []string
	for attempt := 0; attempt < 5; attempt++ {
		problems = machineProblems(t, srv, admin, attempt == 0)
		if problems == nil {
			return
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Errorf("%s: machine assignment is inconsistent in 5 consecutive reads:\n  %s", when, strings.Join(problems, "\n  "))
}

// machineProblems returns nil when one consistent read shows every active
// node on exactly one machine; viaCLI reads the machines through the CLI.
func machineProblems(t *testing.T, srv *server, admin *client.Client, viaCLI bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before, err := admin.ListClusters(ctx, client.ListClustersOptions{})
	if err != nil {
		return []string{"list clusters: " + err.Error()}
	}
	var ms apiv1.MachineList
	if viaCLI {
		cliJSON(t, srv, adminToken, &ms, "machines", "list", "-o", "json")
	} else if l, err := admin.ListMachines(ctx, client.ListMachinesOptions{}); err != nil {
		return []string{"list machines: " + err.Error()}
	} else {
		ms = *l
	}
	after, err := admin.ListClusters(ctx, client.ListClustersOptions{})
	if err != nil {
		return []string{"list clusters: " + err.Error()}
	}
	if activeSet(before) != activeSet(after) {
		return []string{"(the nodes moved during the read)"}
	}
	var problems []string
	onMachine := map[string][]string{} // cluster/node -> machines
	for _, m := range ms.Machines {
		if m.ClusterID != "" {
			k := m.ClusterID + "/" + m.NodeName
			onMachine[k] = append(onMachine[k], m.MachineID)
		}
	}
	for _, c := range after.Clusters {
		for _, n := range c.GPUWorkerNodes {
			if !holdsMachine(n.Status) {
				continue
			}
			k := c.ClusterID + "/" + n.NodeName
			if got := onMachine[k]; len(got) != 1 {
				problems = append(problems, fmt.Sprintf("%s node %s (%s) is served by machines %v in the machines list, want exactly one", n.Status, k, n.NodeID, got))
			}
		}
	}
	busy := 0
	for _, m := range ms.Machines {
		if m.ClusterID != "" {
			busy++
		}
	}
	if n := activeCount(after); busy != n {
		problems = append(problems, fmt.Sprintf("%d machines serve a node but %d nodes hold a machine", busy, n))
	}
	return problems
}

func holdsMachine(status string) bool {
	switch status {
	case "provisioning", "ready", "draining", "removing":
		return true
	}
	return false
}

func activeSet(l *apiv1.ClusterList) string {
	var s []string
	for _, c := range l.Clusters {
		for _, n := range c.GPUWorkerNodes {
			s = append(s, c.ClusterID+"/"+n.NodeID+"="+n.Status)
		}
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func activeCount(l *apiv1.ClusterList) int {
	n := 0
	for _, c := range l.Clusters {
		for _, x := range c.GPUWorkerNodes {
			if holdsMachine(x.Status) {
				n++
			}
		}
	}
	return n
}

// checkKubernetesSide inspects the simulated world the server persists
// (its stand-in for the tenants' Kubernetes API and the machines) for each
// reclaimed node still present: cordoned, tainted, annotated with the
// deadline, a Warning event posted, and every pod sent SIGTERM with a
// grace period that ends by the deadline.
//
// It returns, for each node it saw with every pod terminating, when the
// drain is due to end: when its last pod is gone, or the deadline if that
// comes first.
func checkKubernetesSide(t *testing.T, srv *server, anchor *clock.Scaled, clusterID string, drains map[string]drainInfo) map[string]time.Time {
	t.Helper()
	// Poll briefly: the restarted controller (re)applies the notice in its
	// first passes if the crash interrupted it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var problems []string
		fleet := readSim(t, srv, anchor)
		checked := 0
		due := map[string]time.Time{}
		for _, d := range drains {
			n, ok := fleet.Node(clusterID, d.notice.NodeName)
			if !ok {
				continue // already removed
			}
			checked++
			want := d.deadline.UTC().Format(time.RFC3339)
			if n.Profile != d.profile {
				problems = append(problems, fmt.Sprintf("%s runs pod profile %s, the test predicted %s", n.Name, n.Profile, d.profile))
			}
			if !n.Unschedulable {
				problems = append(problems, n.Name+" is not cordoned")
			}
			if !hasTaint(n) {
				problems = append(problems, fmt.Sprintf("%s lacks the NoSchedule taint sparecap.dev/preempted (taints %v)", n.Name, n.Taints))
			}
			if got := n.Annotations["sparecap.dev/preempt-deadline"]; got != want {
				problems = append(problems, fmt.Sprintf("%s is annotated with deadline %q, want %q", n.Name, got, want))
			}
			if !slices.ContainsFunc(n.Events, func(e sim.EventView) bool {
				return e.Type == "Warning" && e.Reason == "PreemptionNotified" && strings.Contains(e.Message, want)
			}) {
				problems = append(problems, fmt.Sprintf("%s has no Warning PreemptionNotified event naming deadline %s (events %+v)", n.Name, want, n.Events))
			}
			end := time.Time{}
			for _, p := range n.Pods {
				end = maxTime(end, p.GoneAt)
				switch {
				case p.SIGTERMAt.IsZero():
					problems = append(problems, fmt.Sprintf("pod %s on %s got no SIGTERM", p.Name, n.Name))
				case p.GoneAt.After(d.deadline):
					problems = append(problems, fmt.Sprintf("pod %s on %s got SIGTERM at %s with grace %s: it would outlive the deadline %s",
						p.Name, n.Name, p.SIGTERMAt.Format(time.RFC3339Nano), p.Grace, d.deadline.Format(time.RFC3339Nano)))
				}
			}
			due[n.Name] = minTime(end, d.deadline)
		}
		if problems == nil {
			t.Logf("Kubernetes side checked on %d still-present reclaimed nodes: cordoned, tainted, annotated, Warning event, pods SIGTERMed within the deadline", checked)
			return due
		}
		if time.Now().After(deadline) {
			t.Errorf("after the restart the reclaimed nodes' Kubernetes side is incomplete:\n  %s", strings.Join(problems, "\n  "))
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasTaint(n sim.NodeView) bool {
	for _, x := range n.Taints {
		if x.Key == "sparecap.dev/preempted" && x.Effect == "NoSchedule" {
			return true
		}
	}
	return false
}

// readSim loads a copy of the server's simulator state, read-only: its
// change log first, then the snapshot, the order that stays consistent
// if the server compacts in between.
func readSim(t *testing.T, srv *server, anchor *clock.Scaled) *sim.Fleet {
	t.Helper()
	state := filepath.Join(srv.cfg.DataDir, "sim-state.json")
	cp := filepath.Join(t.TempDir(), "sim-state.json")
	if log, err := os.ReadFile(state + ".log"); err == nil {
		writeFile(t, cp+".log", string(log))
	}
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatalf("read the simulator state: %v", err)
	}
	writeFile(t, cp, string(data))
	f, err := sim.New(sim.Config{Clock: anchor, StatePath: cp})
	if err != nil {
		t.Fatalf("load the simulator state: %v", err)
	}
	return f
}

// ---- API event watcher ----

type watchedEvent struct {
	apiv1.Event
	at time.Time // wall time it arrived
}

// watcher streams a cluster's events through the API client (SSE).
type watcher struct {
	mu     sync.Mutex
	evs    []watchedEvent
	err    error
	notify chan struct{}
	cancel context.CancelFunc
}

func startWatch(t *testing.T, c *client.Client, clusterID, cursor string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{notify: make(chan struct{}, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		err := c.WatchEvents(ctx, clusterID, cursor, func(e apiv1.Event) error {
			w.mu.Lock()
			w.evs = append(w.evs, watchedEvent{Event: e, at: time.Now()})
			w.mu.Unlock()
			select {
			case w.notify <- struct{}{}:
			default:
			}
			return nil
		})
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	return w
}

func (w *watcher) snapshot() []watchedEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.evs)
}

func (w *watcher) error() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *watcher) waitFor(t *testing.T, timeout time.Duration, what string, ok func(apiv1.Event) bool) watchedEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		evs := w.snapshot()
		for _, e := range evs {
			if ok(e.Event) {
				return e
			}
		}
		select {
		case <-w.notify:
		case <-deadline:
			var plain []apiv1.Event
			for _, e := range evs {
				plain = append(plain, e.Event)
			}
			t.Fatalf("the API event stream did not deliver %s within %s; it delivered: %s (stream error: %v)", what, timeout, reasons(plain), w.error())
		}
	}
}
