package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/client"
)

func newAdviseCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "advise",
		Short:   "Advice for jobs on preemptible capacity",
		Long:    `Advice for jobs on preemptible capacity, from what the fleet measured.`,
		Example: `  sparecap advise checkpoint --region us-central-2 --gpu-type RTX_6000_PCI --checkpoint-seconds 90`,
	}
	var region, gpuType, runStart string
	var secs float64
	var runHours int
	checkpoint := &cobra.Command{
		Use:   "checkpoint",
		Short: "The checkpoint interval for a job, from the measured preemption rate",
		Long: `Show the checkpoint interval for a job in a region and GPU type whose
checkpoints take --checkpoint-seconds, worked out with Daly's refinement of
Young's formula (√(2δM)) from the preemption rate measured there over the
last 7 days (sparecap stats), with the share of time it costs and the work a
preemption loses without a checkpoint on its notice (with one that completes
before the deadline: none). With no preemption seen, the rate assumes at
most one in the node-hours observed. With --run-hours (and --run-start,
default now) the rate is the pool's in the hours the job will run, by hour
of the week over the last four weeks, once they have enough history
(docs/cost.md). sparecap run and the SDKs ask the same.`,
		Example: `  sparecap advise checkpoint --region us-central-2 --gpu-type RTX_6000_PCI --checkpoint-seconds 90
  sparecap advise checkpoint --region eu-west-1 --gpu-type L40S --checkpoint-seconds 240 -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if region == "" || gpuType == "" {
				return fmt.Errorf("--region and --gpu-type are required")
			}
			if !(secs > 0) {
				return fmt.Errorf("--checkpoint-seconds must be the seconds one checkpoint takes (above 0)")
			}
			if runHours < 0 || runHours > 168 {
				return fmt.Errorf("--run-hours must be from 1 to 168 (0: the window's rate); got %d", runHours)
			}
			start, err := parseTimeFlag("run-start", runStart)
			if err != nil {
				return err
			}
			if !start.IsZero() && runHours == 0 {
				return fmt.Errorf("--run-start needs --run-hours")
			}
			a, err := c.CheckpointAdviceForRun(cmd.Context(), region, gpuType, time.Duration(secs*float64(time.Second)), start, runHours)
			if err != nil {
				return fmt.Errorf("get checkpoint advice: %w", err)
			}
			return s.print(cmd.OutOrStdout(), a, func(tw *tabwriter.Writer) {
				sec := func(v float64) string { return shortDuration(time.Duration(v * float64(time.Second))) }
				row(tw, "Where:", a.Region+" "+a.GPUType)
				row(tw, "Window:", a.From.UTC().Format(time.RFC3339)+" to "+a.To.UTC().Format(time.RFC3339))
				row(tw, "Measured:", fmt.Sprintf("%d preemptions in %.1f preemptible node-hours", a.Preemptions, a.PreemptibleNodeHours))
				if a.RateBasis == "none" {
					row(tw, "Interval:", "none: "+a.Note)
					return
				}
				row(tw, "Rate:", fmt.Sprintf("%.3f %%/h (%s); one preemption every %s per node", a.PreemptionRatePercentPerHour, a.RateBasis, sec(a.MTBFSeconds)))
				row(tw, "Checkpoint every:", fmt.Sprintf("%s (%s; Young's: %s)", sec(a.RecommendedIntervalSeconds), a.Formula, sec(a.YoungIntervalSeconds)))
				row(tw, "Expected overhead:", fmt.Sprintf("%.2f%% of the run", a.ExpectedOverheadPercent))
				row(tw, "Lost per preemption:", sec(a.ExpectedLostSecondsPerPreemption)+" without a checkpoint on the notice; none with one")
				if a.Note != "" {
					row(tw, "Note:", a.Note)
				}
			})
		}),
	}
	checkpoint.Flags().StringVar(&region, "region", "", "the job's region")
	checkpoint.Flags().StringVar(&gpuType, "gpu-type", "", "the job's GPU type")
	checkpoint.Flags().Float64Var(&secs, "checkpoint-seconds", 0, "how long one checkpoint takes, in seconds")
	checkpoint.Flags().IntVar(&runHours, "run-hours", 0, "the hours the job will run (1 to 168): use the pool's rate in those hours of the week")
	checkpoint.Flags().StringVar(&runStart, "run-start", "", "when the job will start, RFC 3339 (default: now; needs --run-hours)")
	cmd.AddCommand(checkpoint)
	return cmd
}
