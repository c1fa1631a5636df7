// Package runwrap is `sparecap run`: a supervisor for a job's main
// process on a preemptible node. It hands the job its deadline, asks it
// for a checkpoint when the notice comes, waits for that checkpoint to be
// committed (or until the deadline, less a margin), then sends SIGTERM,
// and SIGKILL at the deadline. On start it points the job at its latest
// complete checkpoint, so a rescheduled pod resumes.
package runwrap

import (
	"context"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
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
	// RatePercentPerHour is the pool's measured preemption rate
	// (SPARECAP_PREEMPTION_RATE); 0 gives none.
	RatePercentPerHour float64
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
	// Ahead: a notice scheduled ahead (preempt.Scheduled, the node's
	// machine booked) asks the job for a checkpoint this long before it
	// (default 10m; negative: never). Scheduled, if set, reads it in
	// place of the annotations file and the Slurm node (tests).
	Ahead     time.Duration
	Scheduled func(ctx context.Context) (time.Time, bool)
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
	// Clock times the run: a job's deadline is wall time (default
	// clock.Real{}).
	Clock clock.Clock
	// OnCheckpoint, if set, is told of each checkpoint the job commits
	// while it runs (read every Poll), off the run's path: in a pod it
	// writes the pod's sparecap.dev/last-checkpoint, which the control
	// plane weighs when it chooses which node to reclaim. An error is
	// logged once and changes nothing else.
	OnCheckpoint func(ctx context.Context, ck preempt.Checkpoint) error
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
	if c.Ahead == 0 {
		c.Ahead = 10 * time.Minute
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
	if c.Clock == nil {
		c.Clock = clock.Real{}
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
		if t, ok := preempt.ReadAnnotation(cfg.AnnotationsFile); ok {
			return t, true
		}
	}
	// In a Slurm job, the node's Extra field says it.
	return preempt.ReadSlurmDeadline(context.Background())
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
