// Package trainer is a small, real training job for the demo and the
// benchmarks, and a whole example of the Go SDK (pkg/preempt): a loop of
// steps of known cost whose state (the step and a model of a given size)
// is saved atomically every checkpoint interval and at once on the
// notice, and resumed from the latest complete checkpoint on start.
//
// It runs under `sparecap run`, which gives it SPARECAP_CHECKPOINT_DIR,
// SPARECAP_CHECKPOINT_INTERVAL, SPARECAP_RESUME_FROM and the notice.
package trainer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/sparecap/sparecap/internal/clock"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// Config of a training run.
type Config struct {
	// Steps is the length of the job; StepTime the work of one step.
	Steps    int64
	StepTime time.Duration
	// StateBytes is the size of the model saved with each checkpoint.
	StateBytes int
	// CheckpointDir, Interval: default SPARECAP_CHECKPOINT_DIR and
	// SPARECAP_CHECKPOINT_INTERVAL (0: only on the notice).
	CheckpointDir string
	Interval      time.Duration
	// IgnoreNotice makes the job take no checkpoint on the notice: it
	// runs until SIGTERM ends it, losing the work since its last periodic
	// checkpoint (the comparison of docs/perf.md).
	IgnoreNotice bool
	// Progress, if set, is a file that holds the last step done, written
	// after every step, so an observer can count the steps a preemption
	// lost.
	Progress string
	// Log gets a line per resume, checkpoint and notice.
	Log io.Writer
	// Clock times the steps and the interval: a job runs in wall time
	// (default clock.Real{}).
	Clock clock.Clock
}

// Result of a run.
type Result struct {
	ResumedAt int64 // the step it started from
	Reached   int64 // the last step done
	Saved     int64 // the step of its last checkpoint, -1 if none
	Noticed   bool  // it ended on the notice, after checkpointing
}

const stateFile = "model.bin"

// Run trains until Steps are done (then saves a last checkpoint) or the
// notice comes (then saves one and returns), or ctx ends.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Saved: -1}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.CheckpointDir == "" {
		cfg.CheckpointDir = os.Getenv(preempt.EnvCheckpointDir)
	}
	if cfg.Interval == 0 {
		if d, err := time.ParseDuration(os.Getenv(preempt.EnvCheckpointInterval)); err == nil {
			cfg.Interval = d
		}
	}
	if cfg.Steps <= 0 || cfg.StepTime < 0 || cfg.StateBytes < 8 || cfg.Interval < 0 {
		return res, errors.New("trainer: steps must be positive, step time and interval not negative, the state at least 8 bytes")
	}
	store, err := preempt.Open(cfg.CheckpointDir)
	if err != nil {
		return res, err
	}
	step, err := resume(store)
	if err != nil {
		return res, err
	}
	res.ResumedAt, res.Reached = step, step
	if step > 0 {
		fmt.Fprintf(cfg.Log, "trainer: resumed at step %d of %d\n", step, cfg.Steps)
	} else {
		fmt.Fprintf(cfg.Log, "trainer: starting, %d steps of %s, a checkpoint every %s\n", cfg.Steps, cfg.StepTime, cfg.Interval)
	}
	var notice <-chan preempt.Notice
	if cfg.IgnoreNotice {
		// Deaf to the checkpoint signal; SIGTERM ends it (Go's default).
		signal.Ignore(preempt.CheckpointSignal())
	} else {
		notice = preempt.Watch(ctx, preempt.Options{})
	}
	save := func() error {
		ck, err := store.Save(step, func(dir string) error { return writeState(dir, step, cfg.StateBytes) })
		if err != nil {
			return err
		}
		res.Saved = step
		fmt.Fprintf(cfg.Log, "trainer: checkpoint of step %d (%s)\n", step, ck.Cost.Round(time.Millisecond))
		return nil
	}
	progress, err := openProgress(cfg.Progress)
	if err != nil {
		return res, err
	}
	defer progress.Close()
	wall := cfg.Clock
	lastSave := wall.Now()
	for step < cfg.Steps {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case n := <-notice:
			fmt.Fprintf(cfg.Log, "trainer: notice (%s), %s left: checkpointing step %d\n", n.Source, n.Deadline.Sub(wall.Now()).Round(time.Millisecond), step)
			res.Noticed = true
			return res, save()
		case <-wall.After(cfg.StepTime):
		}
		step++
		res.Reached = step
		progress.write(step)
		if cfg.Interval > 0 && wall.Now().Sub(lastSave) >= cfg.Interval {
			if err := save(); err != nil {
				return res, err
			}
			lastSave = wall.Now()
		}
	}
	fmt.Fprintf(cfg.Log, "trainer: done, %d steps\n", step)
	return res, save()
}

// resume returns the step of the latest complete checkpoint (whose model
// must say the same step), or 0.
func resume(store *preempt.Store) (int64, error) {
	dir := os.Getenv(preempt.EnvResumeFrom)
	if dir == "" {
		ck, err := store.Latest()
		if errors.Is(err, preempt.ErrNoCheckpoint) {
			return 0, nil
		} else if err != nil {
			return 0, err
		}
		dir = ck.Dir
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return 0, fmt.Errorf("trainer: resume: %w", err)
	}
	if len(b) < 8 {
		return 0, fmt.Errorf("trainer: resume: %s is torn", dir)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// writeState writes the model: the step, then bytes that depend on it.
func writeState(dir string, step int64, size int) error {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(step))
	for i := 8; i < len(b); i++ {
		b[i] = byte(int64(i) * (step + 1))
	}
	return os.WriteFile(filepath.Join(dir, stateFile), b, 0o644)
}

// progressFile is Config.Progress, kept open. Each step is written in
// place, as one fixed-width write at offset 0 (the file is never
// truncated), so a reader finds the last step whole even when the job is
// killed mid-write: a truncate-then-write left it empty for a moment.
type progressFile struct{ f *os.File }

func openProgress(path string) (progressFile, error) {
	if path == "" {
		return progressFile{}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return progressFile{}, fmt.Errorf("trainer: progress file: %w", err)
	}
	return progressFile{f}, nil
}

func (p progressFile) write(step int64) {
	if p.f != nil {
		_, _ = p.f.WriteAt([]byte(fmt.Sprintf("%20d", step)), 0)
	}
}

func (p progressFile) Close() {
	if p.f != nil {
		p.f.Close()
	}
}
