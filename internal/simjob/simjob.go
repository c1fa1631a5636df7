// Package simjob runs a tenant's job on a simulated cluster as real local
// processes: it plays the Job controller, the scheduler and the kubelet
// for one preemption-safe job. The job's pod goes on a schedulable node
// of the cluster (an External pod of package sim, which reads its
// annotations); its container is `sparecap run … -- CMD`, a real process.
// When a drain deletes the pod, the deadline annotation is written to the
// pod's annotations file (a Downward API volume's, in real time) and the
// process gets SIGTERM; if it is still running when its grace ends, or
// its Node is gone, its process group gets SIGKILL. When the process
// ends, the simulated pod ends with it, so the node is released as early
// as a real pod's would be, and a job that did not complete gets a new
// pod (as a Job whose podFailurePolicy ignores DisruptionTarget does)
// that resumes from the job's checkpoint directory.
//
// The simulation runs Speed times faster than real time; the job does
// not, so deadlines are converted: a drain of 5 simulated minutes leaves
// the job 5 real seconds at 60x.
package simjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// Config of a job.
type Config struct {
	Sim   *sim.Fleet
	Clock clock.Clock // the simulation's clock
	Speed float64     // simulated seconds per real second (>= 1)
	// Wall is the clock the job's processes run on: real time, which
	// the deadlines they are given are in (default clock.Real{}).
	Wall clock.Clock
	// ClusterID and Class: where the job's pods may go.
	ClusterID string
	Class     domain.ComputeClass
	// Name of the job; its pods are Name-1, Name-2, ...
	Name string
	// AvoidPods: a node running a pod of one of these names is taken
	// only when no other fits (a preferred pod anti-affinity).
	AvoidPods []string
	// Grace is the pods' terminationGracePeriod (simulated time).
	Grace time.Duration
	// Binary is the sparecap executable; Job is the job's command, run as
	// Binary run --annotations-file … --checkpoint-dir Dir/checkpoints
	// --interval Interval --margin Margin -- Job... (Job[0] is a path)
	Binary string
	Job    []string
	// Interval and Margin are given to the wrapper (real time).
	Interval, Margin time.Duration
	// Bare runs Job without the wrapper, as a platform without one
	// would: SIGTERM at the notice, SIGKILL when the grace ends. Job
	// still gets the checkpoint directory and interval in its
	// environment. The comparison of docs/perf.md.
	Bare bool
	// Dir holds the checkpoints, the pods' annotation files and the
	// progress file the job writes (Job gets --progress Dir/progress when
	// Progress is set).
	Dir      string
	Progress bool
	// Output gets the wrapper's and the job's output; nil discards it.
	Output io.Writer
	// OnEvent, if set, is told what happens, as it happens.
	OnEvent func(Event)
	// Poll is how often the pod is looked at (real time; default 10ms).
	Poll time.Duration
}

// EventKind says what happened to the job.
type EventKind string

const (
	PodStarted   EventKind = "Started"   // a pod's process started on Node
	PodNoticed   EventKind = "Noticed"   // the pod was deleted; its deadline is Deadline
	PodEnded     EventKind = "Ended"     // a pod's process ended without completing the job
	JobCompleted EventKind = "Completed" // the job's process exited 0
)

// Event is one step in the job's life.
type Event struct {
	Kind EventKind
	Pod  string
	Node string
	At   time.Time // real time
	// Deadline (Noticed): the drain's deadline, simulated time.
	Deadline time.Time
	// Attempt (Started, Ended, Completed) as it stands.
	Attempt Attempt
}

// Attempt is one pod of the job.
type Attempt struct {
	Pod, Node string
	// ResumedAt is the step it started from (its checkpoint's).
	ResumedAt int64
	// Started, Noticed (zero without a notice) and Ended: real times.
	Started, Noticed, Ended time.Time
	// Code is the wrapper's exit code (runwrap.ExitCheckpointed …), or -1
	// if it was killed by a signal.
	Code int
	// Reached is the last step it did (from the progress file, -1
	// without one); Saved the step of the latest complete checkpoint when
	// it ended (-1: none).
	Reached, Saved int64
	// SavedAtNotice is the step of the latest complete checkpoint when
	// the notice came (-1: none): what the attempt would have kept with
	// no checkpoint on the notice.
	SavedAtNotice int64
	// Killed: SIGKILLed by the kubelet (grace over, or Node gone).
	Killed bool
}

// Lost is the steps an attempt did that its checkpoint did not keep: the
// work the next attempt does again. -1 without a progress file.
func (a Attempt) Lost() int64 {
	if a.Reached < 0 {
		return -1
	}
	return a.Reached - max(a.Saved, 0)
}

// Job is a running job.
type Job struct {
	cfg  Config
	done chan struct{}

	mu       sync.Mutex
	attempts []Attempt
	err      error
}

// Start runs the job in the background until it completes or ctx ends.
func Start(ctx context.Context, cfg Config) (*Job, error) {
	if cfg.Sim == nil || cfg.Clock == nil || cfg.ClusterID == "" || cfg.Name == "" || cfg.Binary == "" || len(cfg.Job) == 0 || cfg.Dir == "" {
		return nil, errors.New("simjob: Sim, Clock, ClusterID, Name, Binary, Job and Dir are required")
	}
	cfg.Speed = max(cfg.Speed, 1)
	if cfg.Wall == nil {
		cfg.Wall = clock.Real{}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "checkpoints"), 0o755); err != nil {
		return nil, err
	}
	j := &Job{cfg: cfg, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		err := j.run(ctx)
		j.mu.Lock()
		j.err = err
		j.mu.Unlock()
	}()
	return j, nil
}

// Done is closed when the job completed or stopped.
func (j *Job) Done() <-chan struct{} { return j.done }

// Err is why the job stopped: nil once it completed.
func (j *Job) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Attempts returns the job's pods so far.
func (j *Job) Attempts() []Attempt {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Attempt(nil), j.attempts...)
}

func (j *Job) event(e Event) {
	if j.cfg.OnEvent != nil {
		j.cfg.OnEvent(e)
	}
}

func (j *Job) run(ctx context.Context) error {
	tick := every(ctx, j.cfg.Wall, j.cfg.Poll)
	for n := 1; ; n++ {
		pod := fmt.Sprintf("%s-%d", j.cfg.Name, n)
		node, err := j.place(ctx, pod, tick)
		if err != nil {
			return err
		}
		a, err := j.attempt(ctx, pod, node, tick)
		j.mu.Lock()
		j.attempts = append(j.attempts, a)
		j.mu.Unlock()
		if err != nil {
			return err
		}
		if a.Code == 0 {
			j.event(Event{Kind: JobCompleted, Pod: a.Pod, Node: a.Node, At: a.Ended, Attempt: a})
			return nil
		}
		j.event(Event{Kind: PodEnded, Pod: a.Pod, Node: a.Node, At: a.Ended, Attempt: a})
	}
}

// place puts the pod on a schedulable node once there is one. A node
// that goes between the choice and the placement is passed over.
// every ticks every d of wall time until ctx ends.
func every(ctx context.Context, wall clock.Clock, d time.Duration) <-chan time.Time {
	ch := make(chan time.Time)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case t := <-wall.After(d):
				select {
				case ch <- t:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}

func (j *Job) place(ctx context.Context, pod string, tick <-chan time.Time) (string, error) {
	for {
		if node := j.schedulable(); node != "" {
			err := j.cfg.Sim.AddPod(j.cfg.ClusterID, node, sim.PodTemplate{Name: pod, TerminationGracePeriod: j.cfg.Grace,
				External: true, ReadsDeadline: true})
			if err == nil {
				return node, nil
			}
			if !errors.Is(err, sim.ErrNoNode) {
				return "", fmt.Errorf("simjob: place pod %s on %s: %w", pod, node, err)
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick:
		}
	}
}

// schedulable returns a node the job's pod may go on: of its class, not
// cordoned, not tainted NoSchedule or NoExecute (a drain does both).
func (j *Job) schedulable() string {
	fallback := ""
	for _, n := range j.cfg.Sim.Nodes(j.cfg.ClusterID) {
		if n.Class != j.cfg.Class || n.Unschedulable {
			continue
		}
		ok := true
		for _, t := range n.Taints {
			if t.Effect == "NoSchedule" || t.Effect == "NoExecute" {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if !slices.ContainsFunc(n.Pods, func(p sim.PodView) bool {
			return p.State != sim.PodGone && slices.Contains(j.cfg.AvoidPods, p.Name)
		}) {
			return n.Name
		}
		if fallback == "" {
			fallback = n.Name
		}
	}
	return fallback
}

// attempt runs the pod placed on node until its process ends.
func (j *Job) attempt(ctx context.Context, pod, node string, tick <-chan time.Time) (Attempt, error) {
	cfg := j.cfg
	a := Attempt{Pod: pod, Node: node, Reached: -1, Saved: -1, SavedAtNotice: -1}
	store, err := preempt.Open(filepath.Join(cfg.Dir, "checkpoints"))
	if err != nil {
		return a, err
	}
	if ck, err := store.Latest(); err == nil {
		a.ResumedAt = ck.Step
	}
	annotations := filepath.Join(cfg.Dir, pod+".annotations")
	if err := writeAnnotations(annotations, cfg.Name, time.Time{}); err != nil {
		return a, err
	}
	progress := filepath.Join(cfg.Dir, "progress")
	cmd := j.command(annotations, store.Dir, progress)
	if err := cmd.Start(); err != nil {
		_ = cfg.Sim.PodExited(cfg.ClusterID, node, "", pod)
		return a, fmt.Errorf("simjob: start %s: %w", pod, err)
	}
	a.Started = cfg.Wall.Now()
	j.event(Event{Kind: PodStarted, Pod: pod, Node: node, At: a.Started, Attempt: a})
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	kill := func() {
		if !a.Killed {
			a.Killed = true
			killTree(cmd.Process.Pid)
		}
	}
	// A stopped job leaves no process behind, as a container's end
	// leaves none: the wrapper, the job and whatever they started.
	ended := false
	defer func() {
		if !ended {
			killTree(cmd.Process.Pid)
			<-exited
		}
	}()
	signalled := false
wait:
	for {
		select {
		case <-exited:
			ended = true
			break wait
		case <-ctx.Done():
			return a, ctx.Err()
		case <-tick:
		}
		v, ok := j.pod(node, pod)
		switch {
		case !ok || v.State == sim.PodGone:
			// The Node was deleted, or the grace ran out: the kubelet
			// (or the machine's wipe) kills the container.
			kill()
		case v.State == sim.PodTerminating && !signalled:
			signalled = true
			if err := j.notice(&a, v, store, annotations, cmd); err != nil {
				return a, err
			}
		}
	}
	err = j.finished(&a, cmd, store, progress)
	return a, err
}

// command is the pod's process, in a process group of its own: the job
// under `sparecap run`, or bare (Config.Bare), reading the variables the
// wrapper would set.
func (j *Job) command(annotations, checkpoints, progress string) *exec.Cmd {
	cfg := j.cfg
	args := []string{cfg.Binary, "run", "--annotations-file", annotations, "--checkpoint-dir", checkpoints,
		"--interval", cfg.Interval.String(), "--margin", cfg.Margin.String(), "--"}
	if cfg.Bare {
		args = nil
	}
	args = append(args, cfg.Job...)
	if cfg.Progress {
		args = append(args, "--progress", progress)
	}
	cmd := exec.Command(args[0], args[1:]...)
	// The pod's own /tmp: nothing is left in the host's.
	cmd.Env = append(os.Environ(), "TMPDIR="+cfg.Dir)
	if cfg.Bare {
		cmd.Env = append(cmd.Env, preempt.EnvCheckpointDir+"="+checkpoints, preempt.EnvCheckpointInterval+"="+cfg.Interval.String(),
			preempt.EnvAnnotationsFile+"="+annotations)
	}
	cmd.Stdout, cmd.Stderr = cfg.Output, cfg.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// notice hands the pod's drain notice (v terminating) to its process as
// the kubelet would: the deadline into the annotations file, then
// SIGTERM. It records the notice and the checkpoint the job had then.
func (j *Job) notice(a *Attempt, v sim.PodView, store *preempt.Store, annotations string, cmd *exec.Cmd) error {
	cfg := j.cfg
	a.Noticed = cfg.Wall.Now()
	if ck, err := store.Latest(); err == nil {
		a.SavedAtNotice = ck.Step
	}
	if !v.Deadline.IsZero() {
		// The Downward API file shows the annotation; the
		// deadline in real time.
		left := time.Duration(float64(v.Deadline.Sub(cfg.Clock.Now())) / cfg.Speed)
		if err := writeAnnotations(annotations, cfg.Name, a.Noticed.Add(left)); err != nil {
			return err
		}
	}
	j.event(Event{Kind: PodNoticed, Pod: a.Pod, Node: a.Node, At: a.Noticed, Deadline: v.Deadline, Attempt: *a})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	return nil
}

// finished records how the attempt's process ended (its exit code, the last
// checkpoint, the step the job reached) and tells the simulation the pod
// exited.
func (j *Job) finished(a *Attempt, cmd *exec.Cmd, store *preempt.Store, progress string) error {
	cfg := j.cfg
	a.Ended = cfg.Wall.Now()
	a.Code = cmd.ProcessState.ExitCode()
	if err := cfg.Sim.PodExited(cfg.ClusterID, a.Node, "", a.Pod); err != nil {
		return err
	}
	if ck, err := store.Latest(); err == nil {
		a.Saved = ck.Step
	}
	if cfg.Progress {
		if b, err := os.ReadFile(progress); err == nil {
			a.Reached, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return nil
}

func (j *Job) pod(node, name string) (sim.PodView, bool) {
	v, ok := j.cfg.Sim.Node(j.cfg.ClusterID, node)
	if !ok {
		return sim.PodView{}, false
	}
	for _, p := range v.Pods {
		if p.Name == name {
			return p, true
		}
	}
	return sim.PodView{}, false
}

// writeAnnotations writes the pod's annotations file in the Downward API
// format (key="value" lines), with the deadline annotation once there is
// one, replacing it as the kubelet does: the reader never sees half of it.
func writeAnnotations(path, job string, deadline time.Time) error {
	b := []byte(`sparecap.dev/job="` + job + `"` + "\n")
	if !deadline.IsZero() {
		b = append(b, domain.AnnotationDeadline+`="`+deadline.UTC().Format(time.RFC3339Nano)+`"`+"\n"...)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// killTree SIGKILLs the process pid, its process group and every
// descendant (the wrapper puts the job in a group of its own), as a
// container's end kills all it holds. Descendants are found through
// /proc; without it, the group only.
func killTree(pid int) {
	pids := []int{pid}
	if entries, err := os.ReadDir("/proc"); err == nil {
		parent := map[int][]int{}
		for _, e := range entries {
			child, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...: comm may hold spaces and parens.
			rest := string(b)
			if i := strings.LastIndexByte(rest, ')'); i >= 0 {
				rest = rest[i+1:]
			}
			var state string
			var ppid int
			if _, err := fmt.Sscan(rest, &state, &ppid); err == nil {
				parent[ppid] = append(parent[ppid], child)
			}
		}
		for i := 0; i < len(pids); i++ {
			pids = append(pids, parent[pids[i]]...)
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
