// Package runwrap is `sparecap run`: a supervisor for a job's main
// process on a preemptible node. It hands the job its deadline, asks it
// for a checkpoint when the notice comes, waits for that checkpoint to be
// committed (or until the deadline, less a margin), then sends SIGTERM,
// and SIGKILL at the deadline. On start it points the job at its latest
// complete checkpoint, so a rescheduled pod resumes.
package runwrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// Exit codes of a preempted run: the job's own exit code otherwise.
const (
	// ExitCheckpointed: preempted; a checkpoint was committed after the
	// notice, and the job ended before its deadline. Reschedule it.
	ExitCheckpointed = 75
	// ExitTerminated: preempted; no checkpoint was committed in time, and
	// the job ended after SIGTERM.
	ExitTerminated = 76
	// ExitKilled: preempted; the job was still running at its deadline
	// and was killed.
	ExitKilled = 77
	// ExitNotStarted: the command could not be started.
	ExitNotStarted = 127
)

// Config of a run.
type Config struct {
	// Command and its arguments.
	Command []string
	// CheckpointDir is the job's checkpoint store (SPARECAP_CHECKPOINT_DIR).
	CheckpointDir string
	// Interval is the checkpoint interval the job is given
	// (SPARECAP_CHECKPOINT_INTERVAL); 0 gives none.
	Interval time.Duration
	// CheckpointSignal asks the job for a checkpoint now (default SIGUSR1).
	CheckpointSignal syscall.Signal
	// Margin: SIGTERM goes at the deadline less Margin if no checkpoint
	// came by then (default 10s).
	Margin time.Duration
	// Deadline, if set, is known from the start (outside Kubernetes: a
	// flag). DeadlineFile, if set, is watched for one (RFC 3339), as is
	// AnnotationsFile (the pod's annotations; "-" for none).
	Deadline                      time.Time
	DeadlineFile, AnnotationsFile string
	// Grace after a SIGTERM to the wrapper with no deadline known
	// (default 30s, Kubernetes' default).
	Grace time.Duration
	// Poll is how often files are read (default 250ms).
	Poll time.Duration
	// Startup is how long the job has to set up its signal handlers: the
	// checkpoint signal never comes sooner after the start (default 1s; a
	// signal it does not handle yet would kill it).
	Startup time.Duration
	// Stdout, Stderr of the job (default the wrapper's); Log gets the
	// wrapper's own lines (default stderr).
	Stdout, Stderr, Log io.Writer
	// Env is the job's environment before the wrapper's variables
	// (default the wrapper's).
	Env []string
}

func (c *Config) defaults() {
	if c.CheckpointSignal == 0 {
		c.CheckpointSignal = syscall.SIGUSR1
	}
	if c.Margin <= 0 {
		c.Margin = 10 * time.Second
	}
	if c.Grace <= 0 {
		c.Grace = 30 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = 250 * time.Millisecond
	}
	if c.Startup <= 0 {
		c.Startup = time.Second
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
}

// Result is how a run ended.
type Result struct {
	// Code is the wrapper's exit code: the job's, or one of the Exit*
	// codes once it was preempted.
	Code int
	// Notice is the notice, if one came.
	Notice *preempt.Notice
	// Checkpoint is the checkpoint committed after the notice, if any.
	Checkpoint *preempt.Checkpoint
	// ResumedFrom is the checkpoint the job was pointed at, if any.
	ResumedFrom *preempt.Checkpoint
}

// Run runs the job until it ends; ctx ending is a notice with the grace.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	if len(cfg.Command) == 0 {
		return Result{Code: ExitNotStarted}, errors.New("no command: sparecap run [flags] -- CMD ARGS...")
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "sparecap run: "+format+"\n", args...)
	}
	// Orphaned grandchildren come to us and are reaped: no zombies, also
	// as a container's PID 1.
	_ = setSubreaper()

	var res Result
	env := append([]string(nil), cfg.Env...)
	var store *preempt.Store
	if cfg.CheckpointDir != "" {
		s, err := preempt.Open(cfg.CheckpointDir)
		if err != nil {
			return Result{Code: ExitNotStarted}, fmt.Errorf("checkpoint directory: %w", err)
		}
		store = s
		env = append(env, preempt.EnvCheckpointDir+"="+cfg.CheckpointDir)
		if ck, err := store.Latest(); err == nil {
			res.ResumedFrom = &ck
			env = append(env, preempt.EnvResumeFrom+"="+ck.Dir)
			logf("resuming from checkpoint %d (%s)", ck.Step, ck.Dir)
		}
	}
	// The job reads its deadline from this file, empty until known.
	dfile, err := os.CreateTemp("", "sparecap-deadline-")
	if err != nil {
		return Result{Code: ExitNotStarted}, err
	}
	dfile.Close()
	defer os.Remove(dfile.Name())
	env = append(env, preempt.EnvDeadlineFile+"="+dfile.Name(), preempt.EnvGrace+"="+cfg.Grace.String(),
		preempt.EnvCheckpointSignal+"="+signalName(cfg.CheckpointSignal),
		// The job must not read the pod's annotations and the wrapper's
		// file as two sources: the wrapper passes the annotation on.
		preempt.EnvAnnotationsFile+"=-")
	if cfg.Interval > 0 {
		env = append(env, preempt.EnvCheckpointInterval+"="+cfg.Interval.String())
	}
	if !cfg.Deadline.IsZero() {
		env = append(env, preempt.EnvDeadline+"="+cfg.Deadline.UTC().Format(time.RFC3339Nano))
		_ = os.WriteFile(dfile.Name(), []byte(cfg.Deadline.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
	}

	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, cfg.Stdout, cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the job and its children: one group
	// Signals to the wrapper: SIGTERM is a notice; the others go to the job.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return Result{Code: ExitNotStarted}, fmt.Errorf("start %s: %w", cfg.Command[0], err)
	}
	pgid := cmd.Process.Pid
	started := time.Now()
	exited := make(chan int, 1)
	go func() {
		cmd.Wait()
		exited <- exitCode(cmd.ProcessState)
	}()
	defer func() {
		// Whatever is left of the job's group goes, and is reaped.
		syscall.Kill(-pgid, syscall.SIGKILL)
		reapGroup(pgid, time.Second)
	}()

	notices := preempt.Watch(ctx, preempt.Options{AnnotationsFile: cfg.AnnotationsFile, DeadlineFile: "-",
		Grace: cfg.Grace, Signals: []os.Signal{}, Poll: cfg.Poll})
	if !cfg.Deadline.IsZero() {
		// Known from the start: the notice is now.
		ch := make(chan preempt.Notice, 1)
		ch <- preempt.Notice{Deadline: cfg.Deadline, Source: "flag"}
		notices = ch
	} else if cfg.DeadlineFile != "" {
		notices = first(ctx, notices, preempt.Watch(ctx, preempt.Options{AnnotationsFile: "-", DeadlineFile: cfg.DeadlineFile,
			Signals: []os.Signal{}, Poll: cfg.Poll}))
	}

	// Before the notice: forward signals, wait.
	var notice preempt.Notice
wait:
	for {
		select {
		case code := <-exited:
			res.Code = code
			return res, nil
		case s := <-sigs:
			if s == syscall.SIGTERM {
				notice = preempt.Notice{Deadline: time.Now().Add(cfg.Grace), Source: "SIGTERM"}
				// A deadline the files know by now beats the grace.
				if t, ok := readDeadline(cfg); ok {
					notice.Deadline = t
				}
				break wait
			}
			syscall.Kill(-pgid, s.(syscall.Signal))
		case n, ok := <-notices:
			if !ok {
				notices = nil
				continue
			}
			notice = n
			break wait
		case <-ctx.Done():
			notice = preempt.Notice{Deadline: time.Now().Add(cfg.Grace), Source: "cancelled"}
			if t, ok := readDeadline(cfg); ok {
				notice.Deadline = t
			}
			break wait
		}
	}
	res.Notice = &notice
	logf("notice (%s): deadline %s; asking for a checkpoint (%s)", notice.Source, notice.Deadline.UTC().Format(time.RFC3339), signalName(cfg.CheckpointSignal))
	_ = os.WriteFile(dfile.Name(), []byte(notice.Deadline.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
	noticed := time.Now()
	before := int64(-1)
	if store != nil {
		if ck, err := store.Latest(); err == nil {
			before = ck.Step
		}
	}
	checkpointed := func() bool {
		if store == nil || res.Checkpoint != nil {
			return res.Checkpoint != nil
		}
		ck, err := store.Latest()
		if err == nil && (ck.Step > before || ck.Time.After(noticed)) {
			res.Checkpoint = &ck
			logf("checkpoint %d committed %s after the notice", ck.Step, time.Since(noticed).Round(time.Millisecond))
		}
		return res.Checkpoint != nil
	}
	ended := func(code int) (Result, error) {
		checkpointed()
		switch {
		case res.Checkpoint != nil:
			res.Code = ExitCheckpointed
		default:
			res.Code = ExitTerminated
		}
		logf("the job ended (its exit code %d); exit %d", code, res.Code)
		return res, nil
	}
	// Not before the job could set up its handlers (a notice known at
	// start), nor after the time for SIGTERM.
	if wait := min(time.Until(started.Add(cfg.Startup)), time.Until(notice.Deadline.Add(-cfg.Margin))); wait > 0 {
		select {
		case code := <-exited:
			logf("the job ended before it was asked for a checkpoint")
			return ended(code)
		case <-time.After(wait):
		}
	}
	syscall.Kill(cmd.Process.Pid, cfg.CheckpointSignal)

	// Until a new checkpoint is committed, the job ends, or the deadline
	// less the margin.
	termAt := time.Until(notice.Deadline.Add(-cfg.Margin))
	termTimer := time.NewTimer(max(termAt, 0))
	defer termTimer.Stop()
	poll := time.NewTicker(cfg.Poll)
	defer poll.Stop()
asked:
	for {
		select {
		case code := <-exited:
			return ended(code)
		case s := <-sigs:
			if s != syscall.SIGTERM {
				syscall.Kill(-pgid, s.(syscall.Signal))
			}
		case <-poll.C:
			if checkpointed() {
				break asked
			}
		case <-termTimer.C:
			logf("no checkpoint by the deadline less %s", cfg.Margin)
			break asked
		}
	}
	logf("sending SIGTERM; SIGKILL at the deadline")
	syscall.Kill(-pgid, syscall.SIGTERM)
	kill := time.NewTimer(max(time.Until(notice.Deadline), 0))
	defer kill.Stop()
	for {
		select {
		case code := <-exited:
			return ended(code)
		case <-poll.C:
			checkpointed()
		case <-sigs:
		case <-kill.C:
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
			checkpointed()
			res.Code = ExitKilled
			logf("the job was still running at its deadline: killed; exit %d", res.Code)
			return res, nil
		}
	}
}

// first merges two notice channels: the first notice of either.
func first(ctx context.Context, a, b <-chan preempt.Notice) <-chan preempt.Notice {
	out := make(chan preempt.Notice, 1)
	go func() {
		defer close(out)
		for a != nil || b != nil {
			select {
			case n, ok := <-a:
				if !ok {
					a = nil
					continue
				}
				out <- n
				return
			case n, ok := <-b:
				if !ok {
					b = nil
					continue
				}
				out <- n
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func readDeadline(cfg Config) (time.Time, bool) {
	if cfg.DeadlineFile != "" {
		if b, err := os.ReadFile(cfg.DeadlineFile); err == nil {
			if t, err := time.Parse(time.RFC3339Nano, string(trim(b))); err == nil {
				return t, true
			}
		}
	}
	if cfg.AnnotationsFile != "" && cfg.AnnotationsFile != "-" {
		return preempt.ReadAnnotation(cfg.AnnotationsFile)
	}
	return time.Time{}, false
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return ExitNotStarted
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return strconv.Itoa(int(s))
}
