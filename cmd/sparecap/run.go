package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/runwrap"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// runArgs holds the run's flags that are not fields of runwrap.Config.
type runArgs struct {
	deadline, signal, region, gpuType string
	costSecs                          float64
	report                            bool
}

func runCmd(wall clock.Clock) *cobra.Command {
	cfg := runwrap.Config{Clock: wall}
	var a runArgs
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a job so that it survives preemption (deadline, checkpoint, resume)",
		Long: `Run CMD as a supervised job, as a container's entrypoint or a plain process.

On start, CMD is pointed at the latest complete checkpoint in the checkpoint
directory (SPARECAP_RESUME_FROM), so a rescheduled job resumes. CMD also gets
SPARECAP_CHECKPOINT_DIR, SPARECAP_CHECKPOINT_INTERVAL, SPARECAP_CHECKPOINT_SIGNAL
and SPARECAP_DEADLINE_FILE, a file that holds the deadline once it is known
(and SPARECAP_DEADLINE if it is known at start).

The notice comes from the pod's deadline annotation (a Downward API file,
--annotations-file), --deadline-file, --deadline, or a SIGTERM to this process
(then the deadline is the grace from now). On the notice, CMD gets the
checkpoint signal (SIGUSR1); once a new complete checkpoint appears in the
directory, or at the deadline less --margin, CMD gets SIGTERM, and SIGKILL at
the deadline. Other signals (SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) are
passed on to CMD.

Exit code: CMD's own when it ends before any notice; after a notice 75 if a
checkpoint was committed (reschedule and resume), 76 if CMD ended on SIGTERM
without one, 77 if it was killed at the deadline; 127 if CMD could not start.
See docs/workloads.md.`,
		Example: `  sparecap run --checkpoint-dir /ckpt -- python train.py
  sparecap run --deadline 2026-12-03T12:05:00Z --margin 20s -- ./batch-worker
  # in a pod (docs/workloads.md): the annotation file is the default
  sparecap run --checkpoint-dir /ckpt --interval 30m -- ./train`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cfg.Command = args
			if a.deadline != "" {
				t, err := time.Parse(time.RFC3339Nano, a.deadline)
				if err != nil {
					return fmt.Errorf("--deadline %q: want a time like 2026-12-03T12:05:00Z", a.deadline)
				}
				cfg.Deadline = t
			}
			sig, ok := preempt.ParseSignal(a.signal)
			if !ok {
				return fmt.Errorf("--checkpoint-signal %q: want a signal name such as USR1 or USR2", a.signal)
			}
			cfg.CheckpointSignal = sig
			if cfg.Margin < 0 || cfg.Grace <= 0 || cfg.Interval < 0 {
				return fmt.Errorf("--margin and --interval must not be negative, --grace must be positive")
			}
			cfg.Stdout, cfg.Stderr, cfg.Log = c.OutOrStdout(), c.ErrOrStderr(), c.ErrOrStderr()
			if a.region != "" || a.gpuType != "" {
				cfg.Interval, cfg.RatePercentPerHour = advisedInterval(c, cfg, a.region, a.gpuType, a.costSecs)
			}
			if a.report {
				cfg.OnCheckpoint = podReporter(c.ErrOrStderr(), os.Getenv, preempt.InClusterReporter)
			}
			// SIGTERM is the notice, which Run handles itself: the
			// command's context, which SIGTERM cancels, must not also
			// bring it (with the grace instead of the annotation's
			// deadline, whichever the select picked first).
			res, err := runwrap.Run(context.WithoutCancel(c.Context()), cfg)
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), "sparecap run:", err)
			}
			os.Exit(res.Code)
			return nil
		},
	}
	runFlags(cmd, &cfg, &a)
	return cmd
}

// runFlags defines the run's flags into cfg and a.
func runFlags(cmd *cobra.Command, cfg *runwrap.Config, a *runArgs) {
	f := cmd.Flags()
	f.StringVar(&cfg.CheckpointDir, "checkpoint-dir", os.Getenv(preempt.EnvCheckpointDir), "the job's checkpoint directory (a volume that outlives the pod; env "+preempt.EnvCheckpointDir+")")
	f.DurationVar(&cfg.Interval, "interval", 0, "checkpoint interval given to the job (SPARECAP_CHECKPOINT_INTERVAL; 0: none); with --region and --gpu-type, the one the API advises replaces it when the API answers")
	f.StringVar(&a.region, "region", "", "the job's region, to ask the API for the checkpoint interval (GET /v1/advice/checkpoint, with --url/--token or SPARECAP_URL/SPARECAP_TOKEN)")
	f.StringVar(&a.gpuType, "gpu-type", "", "the job's GPU type, for the advice")
	f.Float64Var(&a.costSecs, "checkpoint-seconds", 0, "how long one checkpoint takes, for the advice (default: what the latest checkpoint took, from its manifest)")
	f.StringVar(&a.signal, "checkpoint-signal", "USR1", "signal that asks the job for a checkpoint now")
	f.DurationVar(&cfg.Margin, "margin", 10*time.Second, "SIGTERM goes at the deadline less this if no checkpoint came by then")
	f.DurationVar(&cfg.Ahead, "checkpoint-ahead", 10*time.Minute, "a notice scheduled ahead (the node's "+preempt.AnnotationPreemptAt+", its machine booked) asks the job for a checkpoint this long before it (negative: never)")
	f.StringVar(&a.deadline, "deadline", "", "the deadline, RFC 3339, when it is known from the start (outside Kubernetes)")
	f.StringVar(&cfg.DeadlineFile, "deadline-file", "", "a file to watch for the deadline (RFC 3339)")
	annotations := os.Getenv(preempt.EnvAnnotationsFile)
	if annotations == "" {
		annotations = preempt.DefaultAnnotationsFile
	}
	f.StringVar(&cfg.AnnotationsFile, "annotations-file", annotations, "the pod's annotations from a Downward API volume (\"-\" for none)")
	f.DurationVar(&cfg.Grace, "grace", 30*time.Second, "time left after a SIGTERM to this process when no deadline is known")
	f.DurationVar(&cfg.Poll, "poll", 250*time.Millisecond, "how often the files are read")
	f.BoolVar(&a.report, "report-checkpoints", true, "in a pod (POD_NAME and POD_NAMESPACE set), write each committed checkpoint's time to the pod's "+domain.AnnotationLastCheckpoint+" annotation, which sparecap weighs when it reclaims (the pod's service account needs patch on pods; docs/workloads.md)")
}

// podReporter is the run's OnCheckpoint in a pod (POD_NAME and
// POD_NAMESPACE, from the Downward API), writing the pod's annotation
// through the API with the pod's own service account (inCluster, the
// SDK's preempt.InClusterReporter); nil outside a pod, or when the API
// cannot be reached, which it says.
func podReporter(log io.Writer, getenv func(string) string, inCluster func() (*preempt.PodReporter, error)) func(context.Context, preempt.Checkpoint) error {
	ns, pod := getenv("POD_NAMESPACE"), getenv("POD_NAME")
	if ns == "" || pod == "" {
		return nil
	}
	rep, err := inCluster()
	if err != nil {
		fmt.Fprintf(log, "sparecap run: checkpoints are not reported to pod %s/%s: %v\n", ns, pod, err)
		return nil
	}
	return func(ctx context.Context, ck preempt.Checkpoint) error { return rep.Report(ctx, ck.Time) }
}

// advisedInterval asks the API for the checkpoint interval and the
// pool's preemption rate; it falls back to cfg.Interval (--interval),
// saying why, when it cannot. Without a checkpoint cost yet (no
// --checkpoint-seconds, no checkpoint) it still passes the rate on: the
// job works the interval out once its first save is measured.
func advisedInterval(c *cobra.Command, cfg runwrap.Config, region, gpuType string, costSecs float64) (time.Duration, float64) {
	fallback := func(why string) (time.Duration, float64) {
		fmt.Fprintf(c.ErrOrStderr(), "sparecap run: no checkpoint advice (%s): using --interval %s\n", why, cfg.Interval)
		return cfg.Interval, 0
	}
	if region == "" || gpuType == "" {
		return fallback("--region and --gpu-type go together")
	}
	cost := checkpointCost(cfg, costSecs)
	url, token := apiOf(c)
	if url == "" || token == "" {
		return fallback("no API: set SPARECAP_URL and SPARECAP_TOKEN")
	}
	ctx, cancel := context.WithTimeout(c.Context(), 10*time.Second)
	defer cancel()
	asked := cost
	if asked <= 0 {
		asked = time.Second // any cost: the rate does not depend on it
	}
	a, err := preempt.Advise(ctx, url, token, region, gpuType, asked)
	if err != nil {
		return fallback(err.Error())
	}
	if a.Interval <= 0 {
		return fallback("the API measured no preemption rate in " + region + " " + gpuType)
	}
	if cost <= 0 {
		fmt.Fprintf(c.ErrOrStderr(), "sparecap run: preemption rate %.3f %%/h %s; no checkpoint cost yet: the job works its interval out from its first checkpoint (%s), else --interval %s\n",
			a.RatePercentPerHour, a.RateBasis, preempt.EnvPreemptionRate, cfg.Interval)
		return cfg.Interval, a.RatePercentPerHour
	}
	fmt.Fprintf(c.ErrOrStderr(), "sparecap run: checkpoint every %s (%s, from %.3f %%/h %s; a checkpoint takes %s)\n",
		a.Interval.Round(time.Second), a.Formula, a.RatePercentPerHour, a.RateBasis, cost.Round(time.Millisecond))
	return a.Interval, a.RatePercentPerHour
}

// checkpointCost is --checkpoint-seconds, else what the latest
// checkpoint took (its manifest), else 0.
func checkpointCost(cfg runwrap.Config, costSecs float64) time.Duration {
	cost := time.Duration(costSecs * float64(time.Second))
	if cost <= 0 && cfg.CheckpointDir != "" {
		if store, err := preempt.Open(cfg.CheckpointDir); err == nil {
			cost = store.Cost()
		}
	}
	return cost
}

// apiOf is the API's address and token: the flags, else SPARECAP_URL and
// SPARECAP_TOKEN.
func apiOf(c *cobra.Command) (url, token string) {
	url, _ = c.Flags().GetString("url")
	token, _ = c.Flags().GetString("token")
	if url == "" {
		url = os.Getenv("SPARECAP_URL")
	}
	if token == "" {
		token = os.Getenv("SPARECAP_TOKEN")
	}
	return url, token
}
