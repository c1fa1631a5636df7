package simjob

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/runwrap"
	"github.com/sparecap/sparecap/internal/server"
	"github.com/sparecap/sparecap/internal/sim"
)

// binary is the sparecap executable the jobs run, built once.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "simjob-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	_, file, _, _ := runtime.Caller(0)
	binary = filepath.Join(dir, "sparecap")
	build := exec.Command("go", "build", "-o", binary, "./cmd/sparecap")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "simjob: FAILED to build the sparecap binary: %v\n%s\n", err, out)
		return 2
	}
	return m.Run()
}

const fleetYAML = `
pools:
  - {region: r1, gpu_type: RTX_6000_PCI, machines: 4}
prices:
  RTX_6000_PCI: "0.89"
`

// world is an embedded server on a simulated fleet of 4 machines with a
// cluster of one standard and one preemptible node.
type world struct {
	srv     *server.Server
	admin   *client.Client
	cluster string
}

func newWorld(t testing.TB, speed float64) *world { return newWorldOf(t, speed, 8) }

// newWorldOf is newWorld with a preemptible target of preemptible GPUs
// (8 a node).
func newWorldOf(t testing.TB, speed float64, preemptible int) *world {
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, []byte(fleetYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Options{Addr: "127.0.0.1:0", DataDir: dir, FleetFile: fleet, Speed: speed,
		Cooldown: time.Second, SimPods: []sim.PodTemplate{{Name: "log-shipper", TerminationGracePeriod: 30 * time.Second, ExitAfter: time.Second, DaemonSet: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	w := &world{srv: srv, admin: client.New(srv.URL, srv.AdminToken)}
	ctx := context.Background()
	p, err := w.admin.CreateProject(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}
	tenant := client.New(srv.URL, p.Token)
	c, err := tenant.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "training", Region: "r1", GPUType: "RTX_6000_PCI",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: preemptible})
	if err != nil {
		t.Fatal(err)
	}
	w.cluster = c.ClusterID
	return w
}

// reclaim takes the machine under node out of service (the controller
// drains its node) and puts it back once the node is gone.
func (w *world) reclaim(t testing.TB, node string) {
	v, ok := w.srv.Sim.Node(w.cluster, node)
	if !ok {
		t.Fatalf("node %s is gone already", node)
	}
	ctx := context.Background()
	yes, no := true, false
	if _, err := w.admin.UpdateMachine(ctx, v.MachineID, apiv1.UpdateMachineRequest{OutOfService: &yes}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, ok := w.srv.Sim.Node(w.cluster, node); !ok {
				_, _ = w.admin.UpdateMachine(ctx, v.MachineID, apiv1.UpdateMachineRequest{OutOfService: &no})
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (w *world) job(t testing.TB, dir string, steps int, bare bool, rec *recorder, out *bytes.Buffer) *Job {
	return w.jobWith(t, dir, steps, bare, rec, out, 500*time.Millisecond)
}

func (w *world) jobWith(t testing.TB, dir string, steps int, bare bool, rec *recorder, out *bytes.Buffer, interval time.Duration) *Job {
	jobArgs := []string{binary, "trainer", "--steps", fmt.Sprint(steps), "--step-time", "10ms", "--state-bytes", "65536"}
	if bare {
		jobArgs = append(jobArgs, "--ignore-notice")
	}
	return w.start(t, Config{Sim: w.srv.Sim, Clock: w.srv.Clock, Speed: w.srv.Speed, ClusterID: w.cluster,
		Class: domain.Preemptible, Name: "trainer", Grace: 10 * time.Minute, Binary: binary, Job: jobArgs,
		Interval: interval, Margin: 500 * time.Millisecond, Dir: dir, Progress: true, Output: out, OnEvent: rec.add, Bare: bare})
}

// start starts a job that stops with the test (before its world),
// processes and all.
func (w *world) start(t testing.TB, cfg Config) *Job {
	ctx, cancel := context.WithCancel(context.Background())
	var j *Job
	t.Cleanup(func() {
		cancel()
		if j != nil {
			<-j.Done()
		}
	})
	j, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitStep waits until the job's progress file shows step.
func waitStep(t testing.TB, dir string, step int64) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int64
		if b, err := os.ReadFile(filepath.Join(dir, "progress")); err == nil {
			fmt.Sscan(string(b), &n)
		}
		if n >= step {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the job never reached step %d", step)
}

func running(t testing.TB, j *Job, rec *recorder) Event {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		evs := append([]Event(nil), rec.events...)
		rec.mu.Unlock()
		if len(evs) > 0 && evs[len(evs)-1].Kind == PodStarted {
			return evs[len(evs)-1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the job's pod never started")
	return Event{}
}

// reclaimedOnce runs a job of steps on a new world, reclaims its node
// once it reached step at, and returns its pods once it completed.
func reclaimedOnce(t *testing.T, steps int, at int64, bare bool) (*world, *recorder, *bytes.Buffer, []Attempt) {
	w := newWorld(t, 60)
	dir := t.TempDir()
	rec := &recorder{}
	out := &bytes.Buffer{}
	j := w.job(t, dir, steps, bare, rec, out)
	first := running(t, j, rec)
	waitStep(t, dir, at)
	w.reclaim(t, first.Node)
	return w, rec, out, completed(t, j, out, time.Minute)
}

// completed waits for the job to complete and returns its pods.
func completed(t testing.TB, j *Job, out *bytes.Buffer, timeout time.Duration) []Attempt {
	select {
	case <-j.Done():
	case <-time.After(timeout):
		t.Fatalf("the job did not complete; attempts %+v\n%s", j.Attempts(), out.String())
	}
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	return j.Attempts()
}

// TestJobSurvivesReclaim: a real job on a preemptible node gets the
// notice with the drain's deadline, checkpoints and exits within a
// fraction of the window (so the node goes early), loses no step, and
// resumes on the refilled node from that checkpoint to completion.
func TestJobSurvivesReclaim(t *testing.T) {
	w, rec, out, as := reclaimedOnce(t, 400, 100, false)
	if len(as) != 2 {
		t.Fatalf("attempts %+v; want 2\n%s", as, out.String())
	}
	a, b := as[0], as[1]
	if a.Code != runwrap.ExitCheckpointed || a.Lost() != 0 || a.Killed || a.Noticed.IsZero() || a.Reached < 100 {
		t.Errorf("the reclaimed attempt: %+v (lost %d); want a notice checkpoint and nothing lost\n%s", a, a.Lost(), out.String())
	}
	if took := a.Ended.Sub(a.Noticed); took > 2*time.Second {
		t.Errorf("notice to exit took %s of the 5s window: the node was not released early", took)
	}
	if b.Node == a.Node || b.ResumedAt != a.Saved || b.Code != 0 || b.Reached != 400 {
		t.Errorf("the resumed attempt: %+v; want another node, resumed at %d, completed", b, a.Saved)
	}
	// The drain's deadline reached the pod: the annotation in the
	// simulated pod, and the Noticed event.
	var noticed *Event
	for i := range rec.events {
		if rec.events[i].Kind == PodNoticed {
			noticed = &rec.events[i]
		}
	}
	if noticed == nil || noticed.Deadline.IsZero() {
		t.Fatalf("no notice with a deadline in %+v", rec.events)
	}
	v, ok := w.srv.Sim.Node(w.cluster, a.Node)
	if ok {
		t.Errorf("the reclaimed node %s is still there: %+v", a.Node, v)
	}
	if !bytes.Contains(out.Bytes(), []byte("trainer: notice (")) || !bytes.Contains(out.Bytes(), []byte("resumed at step")) {
		t.Errorf("the job's output:\n%s", out.String())
	}
	// The wrapper took the drain's deadline (5s at 60x), not a grace.
	m := regexp.MustCompile(`sparecap run: notice \((SIGTERM|annotation)\): deadline (\S+);`).FindSubmatch(out.Bytes())
	if m == nil {
		t.Fatalf("no notice with the deadline in the wrapper's output:\n%s", out.String())
	}
	got, _ := time.Parse(time.RFC3339, string(m[2]))
	if want := a.Noticed.Add(5 * time.Second); got.Before(want.Add(-2*time.Second)) || got.After(want.Add(time.Second)) {
		t.Errorf("the wrapper's deadline %s; want about %s (the drain's, in real time)", got, want)
	}
}

// TestJobWithoutNoticeCheckpointLosesWork: the same job without the
// wrapper, deaf to the notice, ends on the kubelet's SIGTERM and loses the
// steps since its last periodic checkpoint (at most an interval's: 500ms
// of 10ms steps).
func TestJobWithoutNoticeCheckpointLosesWork(t *testing.T) {
	_, _, out, as := reclaimedOnce(t, 300, 80, true)
	if len(as) != 2 {
		t.Fatalf("attempts %+v\n%s", as, out.String())
	}
	a := as[0]
	if a.Code != 1 || a.Lost() <= 0 || a.Lost() > 60 || as[1].ResumedAt != a.Saved || as[1].Code != 0 {
		t.Errorf("attempt %+v (lost %d): want SIGTERM, some steps lost, at most an interval's\n%s", a, a.Lost(), out.String())
	}
}

func TestConfigRequired(t *testing.T) {
	if _, err := Start(context.Background(), Config{Name: "x"}); err == nil {
		t.Error("no error")
	}
}

// TestKilledAtDeadlineLeavesNothing: a job that ignores SIGTERM is killed
// when its grace ends, with the processes it started, and the node goes
// at its deadline; stopping the job stops its current pod.
func TestKilledAtDeadlineLeavesNothing(t *testing.T) {
	w := newWorld(t, 60)
	dir := t.TempDir()
	rec := &recorder{}
	var out bytes.Buffer
	pidFile := filepath.Join(dir, "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := Start(ctx, Config{Sim: w.srv.Sim, Clock: w.srv.Clock, Speed: w.srv.Speed, ClusterID: w.cluster,
		Class: domain.Preemptible, Name: "stubborn", Grace: 10 * time.Minute, Binary: binary, Bare: true,
		Job: []string{"bash", "-c", `trap '' TERM; sleep 1000 & echo $! > ` + pidFile + `; wait; wait`},
		Dir: dir, Output: &out, OnEvent: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	first := running(t, j, rec)
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the job never started its child")
		}
	}
	var child int
	b, _ := os.ReadFile(pidFile)
	fmt.Sscan(string(b), &child)
	w.reclaim(t, first.Node)
	for start := time.Now(); len(j.Attempts()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the stubborn pod never ended:\n%s", out.String())
		}
	}
	a := j.Attempts()[0]
	if !a.Killed || a.Code != -1 {
		t.Errorf("attempt %+v: want killed by the kubelet", a)
	}
	if took := a.Ended.Sub(a.Noticed); took < 4*time.Second || took > 7*time.Second {
		t.Errorf("killed %s after the notice; want at the 5s deadline", took)
	}
	gone := func(pid int) bool {
		for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || bytes.Contains(b, []byte(") Z ")) {
				return true
			}
		}
		return false
	}
	if !gone(child) {
		t.Errorf("the job's child %d outlived its pod", child)
	}
	// The job gets a new pod; stopping the job stops it.
	running(t, j, rec)
	cancel()
	<-j.Done()
	if err := j.Err(); err == nil {
		t.Error("a stopped job reports no error")
	}
	os.Remove(pidFile)
	as := j.Attempts()
	if len(as) != 2 {
		t.Fatalf("attempts %+v", as)
	}
}

// TestNodeDeletedBehindOurBack: a Node that disappears with no drain (a
// machine that died) takes its pod's processes at once; the job keeps
// only its periodic checkpoints, and the next pod resumes from the latest.
func TestNodeDeletedBehindOurBack(t *testing.T) {
	w := newWorld(t, 60)
	dir := t.TempDir()
	rec := &recorder{}
	var out bytes.Buffer
	j := w.job(t, dir, 100000, false, rec, &out)
	first := running(t, j, rec)
	waitStep(t, dir, 120)
	gone := time.Now()
	if err := w.srv.Sim.Release(context.Background(), w.cluster, first.Node); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); len(j.Attempts()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the pod outlived its node:\n%s", out.String())
		}
	}
	a := j.Attempts()[0]
	if !a.Killed || a.Code != -1 || a.Ended.Sub(gone) > time.Second || !a.Noticed.IsZero() {
		t.Errorf("attempt %+v: want killed within a second of its node, with no notice", a)
	}
	if a.Saved <= 0 || a.Lost() < 0 || a.Lost() > 60 {
		t.Errorf("attempt %+v (lost %d): want its periodic checkpoints kept and at most an interval lost", a, a.Lost())
	}
	next := running(t, j, rec)
	if next.Attempt.ResumedAt != a.Saved {
		t.Errorf("the next pod resumed at %d, want %d", next.Attempt.ResumedAt, a.Saved)
	}
}
