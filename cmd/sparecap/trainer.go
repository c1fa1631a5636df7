package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/trainer"
)

func trainerCmd(wall clock.Clock) *cobra.Command {
	cfg := trainer.Config{Clock: wall}
	cmd := &cobra.Command{
		Use:   "trainer",
		Short: "A small real training job that survives preemption (the demo's job; an example of the Go SDK)",
		Long: `Run a training loop of --steps steps of --step-time each, whose state (the
step and a model of --state-bytes) is checkpointed atomically through the Go SDK
(pkg/preempt) every SPARECAP_CHECKPOINT_INTERVAL and at once on the preemption
notice, then resumed from the latest complete checkpoint on the next start.

Run it under 'sparecap run', which hands it the checkpoint directory, the
interval and the notice. The demo runs it on the simulated cluster's nodes;
the benchmark in docs/perf.md measures what a reclaim costs it.`,
		Example: `  sparecap run --checkpoint-dir /tmp/ck --interval 5s --deadline-file /tmp/deadline -- \
    sparecap trainer --steps 2000 --step-time 10ms`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg.Log = c.ErrOrStderr()
			_, err := trainer.Run(c.Context(), cfg)
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), err)
				os.Exit(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Steps, "steps", 1000, "steps of the whole job")
	f.DurationVar(&cfg.StepTime, "step-time", 10*time.Millisecond, "the work of one step")
	f.IntVar(&cfg.StateBytes, "state-bytes", 1<<20, "size of the model saved with each checkpoint")
	f.StringVar(&cfg.CheckpointDir, "checkpoint-dir", "", "checkpoint directory (default SPARECAP_CHECKPOINT_DIR)")
	f.DurationVar(&cfg.Interval, "interval", 0, "checkpoint interval (default SPARECAP_CHECKPOINT_INTERVAL; 0 and none there: only on the notice)")
	f.BoolVar(&cfg.IgnoreNotice, "ignore-notice", false, "take no checkpoint on the notice: lose the work since the last periodic one (for comparison)")
	f.StringVar(&cfg.Progress, "progress", "", "file to hold the last step done, written after every step")
	return cmd
}
