package runwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// The jobs of these tests are this test binary in a helper mode
// (RUNWRAP_JOB), reporting what it saw to RUNWRAP_REPORT.
func TestMain(m *testing.M) {
	if mode := os.Getenv("RUNWRAP_JOB"); mode != "" {
		// syscall.Exit, not os.Exit: built with -race, os.Exit's race
		// finalizer can hang while the slow mode's save sleeps, and the
		// wrapper would see a job that ignores SIGTERM.
		syscall.Exit(job(mode))
	}
	os.Exit(m.Run())
}

type report struct {
	Env      map[string]string `json:"env"`
	Resumed  int64             `json:"resumed"`
	Signals  []string          `json:"signals"`
	Deadline string            `json:"deadline"` // the deadline file when asked for a checkpoint
	Grandkid int               `json:"grandkid"`
}

func job(mode string) int {
	var rep report
	rep.Env = map[string]string{}
	for _, k := range []string{preempt.EnvDeadline, preempt.EnvDeadlineFile, preempt.EnvCheckpointDir, preempt.EnvCheckpointInterval,
		preempt.EnvCheckpointSignal, preempt.EnvResumeFrom, preempt.EnvAnnotationsFile} {
		rep.Env[k] = os.Getenv(k)
	}
	save := func() {
		b, _ := json.Marshal(rep)
		os.WriteFile(os.Getenv("RUNWRAP_REPORT"), b, 0o644)
	}
	step := int64(0)
	if dir := os.Getenv(preempt.EnvResumeFrom); dir != "" {
		b, _ := os.ReadFile(filepath.Join(dir, "step"))
		step, _ = strconv.ParseInt(string(b), 10, 64)
		rep.Resumed = step
	}
	save()
	store, _ := preempt.Open(os.Getenv(preempt.EnvCheckpointDir))
	// checkpoint takes the step as an argument: the slow mode saves on
	// another goroutine while the loop goes on counting.
	checkpoint := func(step int64, slow time.Duration) {
		store.Save(step, func(dir string) error {
			time.Sleep(slow)
			return os.WriteFile(filepath.Join(dir, "step"), []byte(strconv.FormatInt(step, 10)), 0o644)
		})
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGHUP)
	switch mode {
	case "exit3":
		return 3
	case "orphan":
		gk := exec.Command("sleep", "60")
		gk.Start()
		rep.Grandkid = gk.Process.Pid
		save()
		return 0 // the grandchild is orphaned
	case "stubborn":
		signal.Ignore(syscall.SIGUSR1, syscall.SIGTERM)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	for {
		select {
		case <-tick.C:
			step++
			if mode == "periodic" && step%5 == 0 {
				checkpoint(step, 0)
				if step >= rep.Resumed+40 {
					return 0
				}
			}
		case s := <-sigs:
			rep.Signals = append(rep.Signals, s.String())
			b, _ := os.ReadFile(os.Getenv(preempt.EnvDeadlineFile))
			rep.Deadline = strings.TrimSpace(string(b))
			save()
			switch {
			case s == syscall.SIGUSR1 && mode == "cooperative":
				checkpoint(step, 0)
				return 0
			case s == syscall.SIGUSR1 && mode == "keeps-on":
				checkpoint(step, 0) // and goes on until SIGTERM
			case s == syscall.SIGUSR1 && mode == "slow":
				go checkpoint(step, time.Hour) // never in time
			case s == syscall.SIGTERM:
				return 0
			}
		}
	}
}

type env struct {
	t      *testing.T
	dir    string
	report string
	log    bytes.Buffer
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	return &env{t: t, dir: dir, report: filepath.Join(dir, "report.json")}
}

func (e *env) config(mode string) Config {
	return Config{
		Command:       []string{os.Args[0], "-test.run=^$"},
		CheckpointDir: filepath.Join(e.dir, "ckpt"),
		Interval:      90 * time.Second,
		Margin:        time.Second,
		Poll:          20 * time.Millisecond,
		DeadlineFile:  filepath.Join(e.dir, "deadline"),
		Log:           &e.log,
		Env:           append(os.Environ(), "RUNWRAP_JOB="+mode, "RUNWRAP_REPORT="+e.report),
	}
}

func (e *env) read() report {
	e.t.Helper()
	var r report
	b, err := os.ReadFile(e.report)
	if err != nil {
		e.t.Fatal(err)
	}
	json.Unmarshal(b, &r)
	return r
}

// deadlineIn writes the deadline file after a while, as the annotation
// would change under a pod.
func (e *env) deadlineIn(after, left time.Duration) time.Time {
	deadline := time.Now().Add(after + left).Truncate(time.Millisecond)
	time.AfterFunc(after, func() {
		os.WriteFile(filepath.Join(e.dir, "deadline"), []byte(deadline.UTC().Format(time.RFC3339Nano)), 0o644)
	})
	return deadline
}

// TestCheckpointOnNotice: the job gets its environment, the deadline
// reaches it (file) with the checkpoint signal, it checkpoints and ends:
// exit 75, long before the deadline; the next run resumes from that
// checkpoint.
func TestCheckpointOnNotice(t *testing.T) {
	e := newEnv(t)
	deadline := e.deadlineIn(300*time.Millisecond, 5*time.Second)
	start := time.Now()
	res, err := Run(t.Context(), e.config("cooperative"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.read()
	if res.Code != ExitCheckpointed || res.Checkpoint == nil || res.Notice == nil || !res.Notice.Deadline.Equal(deadline) {
		t.Fatalf("result %+v (log:\n%s)", res, e.log.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s: the wrapper waited past the checkpoint", d)
	}
	if r.Env[preempt.EnvCheckpointDir] == "" || r.Env[preempt.EnvCheckpointInterval] != "1m30s" || r.Env[preempt.EnvCheckpointSignal] != "SIGUSR1" ||
		r.Env[preempt.EnvDeadlineFile] == "" || r.Env[preempt.EnvResumeFrom] != "" || r.Env[preempt.EnvAnnotationsFile] != "-" {
		t.Errorf("the job's environment: %v", r.Env)
	}
	if len(r.Signals) != 1 || r.Signals[0] != "user defined signal 1" {
		t.Errorf("the job got %v, want SIGUSR1 only", r.Signals)
	}
	if got, _ := time.Parse(time.RFC3339Nano, r.Deadline); !got.Equal(deadline) {
		t.Errorf("the job read deadline %q, want %s", r.Deadline, deadline)
	}

	// The next run resumes.
	os.Remove(filepath.Join(e.dir, "deadline"))
	e.deadlineIn(300*time.Millisecond, 5*time.Second)
	res2, err := Run(t.Context(), e.config("cooperative"))
	if err != nil {
		t.Fatal(err)
	}
	r = e.read()
	if res2.ResumedFrom == nil || r.Env[preempt.EnvResumeFrom] != res.Checkpoint.Dir || r.Resumed != res.Checkpoint.Step || r.Resumed == 0 {
		t.Fatalf("resume: result %+v, job saw %v resumed at %d; want %s at %d", res2.ResumedFrom, r.Env[preempt.EnvResumeFrom], r.Resumed, res.Checkpoint.Dir, res.Checkpoint.Step)
	}
}

// TestTermThenKill: a job that ignores everything gets SIGTERM at the
// deadline less the margin and SIGKILL at the deadline: exit 77.
func TestTermThenKill(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("stubborn")
	cfg.Deadline = time.Now().Add(2 * time.Second) // known from the start (a flag)
	start := time.Now()
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if res.Code != ExitKilled || took < 1900*time.Millisecond || took > 4*time.Second {
		t.Fatalf("code %d after %s, want %d at the deadline (2s); log:\n%s", res.Code, took, ExitKilled, e.log.String())
	}
	if !strings.Contains(e.log.String(), "sending SIGTERM") {
		t.Errorf("no SIGTERM before the SIGKILL:\n%s", e.log.String())
	}
	if r := e.read(); r.Env[preempt.EnvDeadline] == "" {
		t.Errorf("a deadline known at start is not in the environment: %v", r.Env)
	}
}

// TestSlowCheckpointGetsTerm: a checkpoint that does not come by the
// deadline less the margin: SIGTERM then, and the job ends on it: exit 76.
func TestSlowCheckpointGetsTerm(t *testing.T) {
	e := newEnv(t)
	e.deadlineIn(100*time.Millisecond, 2*time.Second)
	start := time.Now()
	res, err := Run(t.Context(), e.config("slow"))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if res.Code != ExitTerminated || res.Checkpoint != nil || took < time.Second || took > 2*time.Second {
		t.Fatalf("code %d after %s, want %d at the deadline less the margin (1.1s); job saw %+v; log:\n%s", res.Code, took, ExitTerminated, e.read(), e.log.String())
	}
	if r := e.read(); len(r.Signals) != 2 || !strings.Contains(r.Signals[1], "terminated") {
		t.Errorf("the job got %v, want SIGUSR1 then SIGTERM", r.Signals)
	}
}

// TestSignals: SIGHUP to the wrapper reaches the job; SIGTERM to the
// wrapper is a notice (the grace from now when no deadline is known).
func TestSignals(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("cooperative")
	cfg.Grace = 20 * time.Second
	done := make(chan Result, 1)
	go func() {
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	before := time.Now()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	res := <-done
	if res.Code != ExitCheckpointed || res.Notice == nil || res.Notice.Source != "SIGTERM" ||
		res.Notice.Deadline.Before(before.Add(19*time.Second)) || res.Notice.Deadline.After(time.Now().Add(20*time.Second)) {
		t.Fatalf("result %+v notice %+v; log:\n%s", res, res.Notice, e.log.String())
	}
	if r := e.read(); len(r.Signals) != 2 || r.Signals[0] != "hangup" {
		t.Errorf("the job got %v, want SIGHUP then SIGUSR1", r.Signals)
	}
}

// TestAnnotationNotice: in a pod, the annotation file brings the notice.
func TestAnnotationNotice(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("cooperative")
	cfg.DeadlineFile = ""
	cfg.AnnotationsFile = filepath.Join(e.dir, "annotations")
	deadline := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	time.AfterFunc(200*time.Millisecond, func() {
		os.WriteFile(cfg.AnnotationsFile, []byte(fmt.Sprintf("app=\"x\"\n%s=%q\n", preempt.AnnotationDeadline, deadline.Format(time.RFC3339))), 0o644)
	})
	res, err := Run(t.Context(), cfg)
	if err != nil || res.Code != ExitCheckpointed || res.Notice.Source != "annotation" || !res.Notice.Deadline.Equal(deadline) {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestExitCodes: a job that ends on its own gives its exit code; one that
// cannot start, 127 and an error.
func TestExitCodes(t *testing.T) {
	e := newEnv(t)
	if res, err := Run(t.Context(), e.config("exit3")); err != nil || res.Code != 3 {
		t.Fatalf("exit 3: %+v %v", res, err)
	}
	cfg := e.config("exit3")
	cfg.Command = []string{filepath.Join(e.dir, "nope")}
	if res, err := Run(t.Context(), cfg); err == nil || res.Code != ExitNotStarted {
		t.Fatalf("a missing command: %+v %v", res, err)
	}
	if _, err := Run(t.Context(), Config{}); err == nil {
		t.Fatal("no command ran")
	}
}

// TestNoZombies: a grandchild the job leaves behind is killed and reaped
// when the run ends, never left running or a zombie.
func TestNoZombies(t *testing.T) {
	e := newEnv(t)
	res, err := Run(t.Context(), e.config("orphan"))
	if err != nil || res.Code != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	pid := e.read().Grandkid
	if pid == 0 {
		t.Fatal("no grandchild")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Fatalf("the grandchild %d is still there (%v): %s", pid, err, stat)
	}
}

// TestCheckpointsAreReported: each checkpoint the job commits while it
// runs reaches OnCheckpoint once, in order; one there at the start (the
// pod started since) does not. A reporter that fails is logged once and
// changes nothing of the run.
func TestCheckpointsAreReported(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("periodic")
	got := make(chan preempt.Checkpoint, 100)
	cfg.OnCheckpoint = func(_ context.Context, ck preempt.Checkpoint) error {
		got <- ck
		return nil
	}
	res, err := Run(t.Context(), cfg)
	if err != nil || res.Code != 0 {
		t.Fatalf("run: %+v %v (log:\n%s)", res, err, e.log.String())
	}
	close(got) // Run waits for its reports
	var steps []int64
	for ck := range got {
		if ck.Time.IsZero() {
			t.Errorf("checkpoint %d reported without its time", ck.Step)
		}
		steps = append(steps, ck.Step)
	}
	if len(steps) < 2 || !slices.IsSorted(steps) || slices.Compact(slices.Clone(steps))[0] != steps[0] || len(slices.Compact(slices.Clone(steps))) != len(steps) {
		t.Fatalf("reported steps %v, want several, each once, in order", steps)
	}

	// Run again: the checkpoint left there is not reported; a failing
	// reporter is logged once.
	calls := 0
	cfg.OnCheckpoint = func(_ context.Context, ck preempt.Checkpoint) error {
		if ck.Step <= steps[len(steps)-1] {
			t.Errorf("checkpoint %d from before the start reported", ck.Step)
		}
		calls++
		return errors.New("pods \"w-0\" is forbidden")
	}
	e.log.Reset()
	res, err = Run(t.Context(), cfg)
	if err != nil || res.Code != 0 {
		t.Fatalf("run with a failing reporter: %+v %v", res, err)
	}
	if n := strings.Count(e.log.String(), "cannot report checkpoint"); calls < 2 || n != 1 {
		t.Fatalf("%d failing reports logged %d times, want once:\n%s", calls, n, e.log.String())
	}
}

// TestCheckpointAheadOfAScheduledNotice: a notice scheduled ahead (the
// node's machine booked) asks the job for a checkpoint Ahead of it, once,
// and the notice when it comes asks again.
func TestCheckpointAheadOfAScheduledNotice(t *testing.T) {
	e := newEnv(t)
	at := time.Now().Add(2200 * time.Millisecond)
	cfg := e.config("keeps-on")
	cfg.Ahead = time.Second
	cfg.Scheduled = func(context.Context) (time.Time, bool) { return at, true }
	e.deadlineIn(3500*time.Millisecond, 5*time.Second)
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := e.read()
	if res.Code != ExitCheckpointed || len(r.Signals) != 3 || r.Signals[0] != r.Signals[1] || r.Signals[2] != "terminated" {
		t.Fatalf("result %+v, the job got %v; want two checkpoint signals, then SIGTERM (log:\n%s)", res, r.Signals, e.log.String())
	}
	if !strings.Contains(e.log.String(), "checkpoint ahead of its notice at "+at.UTC().Format(time.RFC3339)) ||
		strings.Count(e.log.String(), "is scheduled for") != 1 {
		t.Errorf("log:\n%s", e.log.String())
	}
}
