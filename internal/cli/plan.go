package cli

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/plan"
	"github.com/sparecap/sparecap/internal/termsafe"
)

func newPlanCmd(s *state) *cobra.Command {
	q := client.PlanQuery{RatePercentPerHour: -1}
	var tracePath string
	var price, discount float64
	var remotePlan func(cmd *cobra.Command, c *client.Client, _ []string) error
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "What a job will cost and take on preemptible and standard nodes; a plan for a deadline",
		Long: `Ask the server what a job of --gpu-hours on --gpus GPUs at once would cost and
take on preemptible nodes and on standard ones in a region and GPU type, at
the preemption rate measured there over the last 7 days (--rate for a
what-if), with the checkpoint interval to use, the extra time and its spread,
and the preemption rate at which preemptible stops paying.

With --deadline it adds the plan that meets it: run on preemptible nodes and
move to standard nodes at the last checkpoint or interruption after which one
more interruption would make the deadline unreachable; with the chance of
meeting it and the expected cost, beside two baselines: greedy (preemptible
until it is too late) and standard nodes only. Expectations are a formula;
the spread and the deadline plans come from a seeded Monte Carlo of the job,
so the same question gets the same answer.

With --availability-trace it plans on its own, without a server, against a
recorded availability trace in SkyPilot's format (skypilot-org/spot-traces):
each run of the Monte Carlo starts at another tick of the trace, the gang
runs while enough instances are available and is interrupted when they are
not. The price is then --on-demand-price (and --discount).`,
		Example: `  sparecap plan --region us-central-2 --gpu-type H100_SXM --gpu-hours 4000 --gpus 32 --checkpoint 90s --restart 10m
  sparecap plan --region us-central-2 --gpu-type H100_SXM --gpu-hours 384 --checkpoint 90s --restart 12m --deadline 52h --rate 4.1
  sparecap plan --region us-central-2 --gpu-type H100_SXM --gpu-hours 384 --checkpoint-at-notice -o json
  sparecap plan --availability-trace us-west-2a_v100_1.json --on-demand-price 3.06 --gpu-hours 384 --checkpoint 90s --restart 12m --deadline 70h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tracePath != "" {
				if !(q.GPUHours > 0) {
					return fmt.Errorf("--gpu-hours must be the job's work in GPU-hours (above 0)")
				}
				p, err := planOnTrace(q, tracePath, price, discount)
				if err != nil {
					return err
				}
				return s.print(cmd.OutOrStdout(), p, func(tw *tabwriter.Writer) { planTable(tw, p) })
			}
			return s.run(remotePlan)(cmd, args)
		},
	}
	remotePlan = func(cmd *cobra.Command, c *client.Client, _ []string) error {
		if q.Region == "" || q.GPUType == "" {
			return fmt.Errorf("--region and --gpu-type are required")
		}
		if !(q.GPUHours > 0) {
			return fmt.Errorf("--gpu-hours must be the job's work in GPU-hours (above 0)")
		}
		if cmd.Flags().Changed("rate") && !(q.RatePercentPerHour >= 0) {
			return fmt.Errorf("--rate must be a preemption rate in percent of nodes an hour (0 or more)")
		}
		p, err := c.Plan(cmd.Context(), q)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		return s.print(cmd.OutOrStdout(), p, func(tw *tabwriter.Writer) { planTable(tw, p) })
	}
	f := cmd.Flags()
	f.StringVar(&q.Region, "region", "", "region of the fleet")
	f.StringVar(&q.GPUType, "gpu-type", "", "GPU type")
	jobFlags(cmd, &q)
	f.Float64Var(&q.RatePercentPerHour, "rate", -1, "preemption rate to plan with, percent of nodes an hour (default: the measured one)")
	f.StringVar(&tracePath, "availability-trace", "", "plan locally against this availability trace (SkyPilot's JSON format) instead of asking the server")
	f.Float64Var(&price, "on-demand-price", 0, "with --availability-trace: the on-demand price per GPU-hour")
	f.Float64Var(&discount, "discount", 50, "with --availability-trace: the preemptible discount, percent")
	cmd.AddCommand(newPlanOptionsCmd(s))
	return cmd
}

// jobFlags are the flags that describe a job to plan.
func jobFlags(cmd *cobra.Command, q *client.PlanQuery) {
	f := cmd.Flags()
	f.Float64Var(&q.GPUHours, "gpu-hours", 0, "the job's work, in GPU-hours at full speed")
	f.IntVar(&q.GPUs, "gpus", 8, "GPUs the job runs on at once (a gang: a multiple of 8)")
	f.DurationVar(&q.Checkpoint, "checkpoint", 0, "how long one checkpoint takes")
	f.DurationVar(&q.Restart, "restart", 0, "how long the job needs after an interruption before it progresses again")
	f.DurationVar(&q.Interval, "interval", 0, "checkpoint interval to plan with (default: Daly's for the rate)")
	f.BoolVar(&q.CheckpointAtNotice, "checkpoint-at-notice", false, "the job checkpoints on its notice (sparecap run, the SDKs)")
	f.DurationVar(&q.Deadline, "deadline", 0, "time from now by which the job must end")
}

func newPlanOptionsCmd(s *state) *cobra.Command {
	q := client.PlanQuery{RatePercentPerHour: -1}
	var regions, types []string
	cmd := &cobra.Command{
		Use:   "options",
		Short: "Rank every region and GPU type a job may run in",
		Long: `Plan a job (the flags of sparecap plan) in every pool of the fleet in
--regions and of --gpu-types (any of them; default all), each at its own
price and measured preemption rate, with the GPUs it is forecast to lend
next hour, and rank them: pools that can lend the job's GPUs first; then,
with --deadline, those that meet it in 99% of runs by expected cost, then
the rest by their chance; without, by expected cost, then time.`,
		Example: `  sparecap plan options --gpu-hours 4000 --gpus 32 --checkpoint 90s --restart 10m --gpu-types H100_SXM,H200
  sparecap plan options --gpu-hours 384 --checkpoint 90s --deadline 52h -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if !(q.GPUHours > 0) {
				return fmt.Errorf("--gpu-hours must be the job's work in GPU-hours (above 0)")
			}
			o, err := c.PlanOptions(cmd.Context(), q, regions, types)
			if err != nil {
				return fmt.Errorf("plan options: %w", err)
			}
			return s.print(cmd.OutOrStdout(), o, func(tw *tabwriter.Writer) { optionsTable(tw, o) })
		}),
	}
	jobFlags(cmd, &q)
	cmd.Flags().StringSliceVar(&regions, "regions", nil, "only these regions (comma-separated)")
	cmd.Flags().StringSliceVar(&types, "gpu-types", nil, "only these GPU types (comma-separated): any of them will do")
	return cmd
}

// optionsTable is a job's ranked pools for a person.
func optionsTable(tw *tabwriter.Writer, o *apiv1.PlanOptions) {
	head := []any{"RANK", "REGION", "GPU_TYPE", "$/GPU-H", "RATE %/H", "EXPECTED COST", "EXPECTED HOURS", "P90 HOURS"}
	if o.DeadlineHours > 0 {
		head = append(head, "MEETS DEADLINE")
	}
	row(tw, append(head, "LENDABLE NEXT HOUR")...)
	for _, x := range o.Options {
		cols := []any{x.Rank, x.Region, x.GPUType, x.OnDemandPerGPUHour, x.PreemptionRatePercentPerHour, x.ExpectedCost, x.ExpectedHours, x.P90Hours}
		if x.MeetProbability != nil {
			cols = append(cols, fmt.Sprintf("%.1f%%", 100**x.MeetProbability))
		}
		lend := "unknown"
		if x.ForecastSamples > 0 {
			lend = strconv.FormatFloat(x.LendableGPUs, 'f', -1, 64)
			if !x.Fits {
				lend += " (too few)"
			}
		}
		row(tw, append(cols, lend)...)
	}
	if o.Note != "" {
		fmt.Fprintf(tw, "\n%s\n", termsafe.Escape(o.Note))
	}
}

// planOnTrace plans a job locally against an availability trace.
func planOnTrace(q client.PlanQuery, path string, price, discount float64) (*apiv1.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the trace: %w", err)
	}
	defer f.Close()
	a, err := plan.ReadSkyPilot(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !(price > 0) {
		return nil, fmt.Errorf("--on-demand-price is required with --availability-trace (the price per GPU-hour, above 0)")
	}
	if q.GPUs == 0 {
		q.GPUs = plan.GPUsPerNode
	}
	j := plan.Job{GPUHours: q.GPUHours, GPUs: q.GPUs, CheckpointCost: q.Checkpoint, RestartCost: q.Restart, Interval: q.Interval,
		CheckpointAtNotice: q.CheckpointAtNotice, Deadline: q.Deadline}
	m := plan.Market{RatePercentPerHour: a.RatePercentPerHour(q.GPUs / plan.GPUsPerNode), OnDemand: price, Discount: discount / 100, Window: 5 * time.Minute}
	if err := plan.Check(j, m); err != nil {
		return nil, err
	}
	runs, err := plan.Runs(j, m)
	if err != nil {
		return nil, err
	}
	res := plan.Make(j, m, runs, plan.TraceRuns(a, j.GPUs, runs))
	out := &apiv1.Plan{Region: "trace", GPUType: filepath.Base(path), GPUHours: j.GPUHours, GPUs: j.GPUs, CheckpointSeconds: j.CheckpointCost.Seconds(),
		RestartSeconds: j.RestartCost.Seconds(), CheckpointAtNotice: j.CheckpointAtNotice, DeadlineHours: j.Deadline.Hours(),
		PreemptionRatePercentPerHour: math.Round(m.RatePercentPerHour*1000) / 1000, RateBasis: "trace",
		OnDemandPerGPUHour: strconv.FormatFloat(price, 'f', -1, 64), PreemptibleDiscountPercent: strconv.FormatFloat(discount, 'f', -1, 64),
		DrainWindowSeconds: m.Window.Seconds(),
		Note: fmt.Sprintf("%s of trace, %d ticks of %s, the gang's %d nodes available %.0f%% of the time", shortDuration(a.Duration()), len(a.Counts), a.Gap,
			q.GPUs/plan.GPUsPerNode, 100*a.UpShare(q.GPUs/plan.GPUsPerNode))}
	res.Fill(out)
	return out, nil
}

// planTable is a plan for a person.
func planTable(tw *tabwriter.Writer, p *apiv1.Plan) {
	hours := func(h float64) string {
		if h < 0 {
			return "did not finish"
		}
		return fmt.Sprintf("%.1fh", h)
	}
	rate := fmt.Sprintf("%.3g %%/h (%s)", p.PreemptionRatePercentPerHour, p.RateBasis)
	row(tw, "Job:", fmt.Sprintf("%g GPU-hours on %d GPUs in %s %s", p.GPUHours, p.GPUs, p.Region, p.GPUType))
	row(tw, "Preemption rate:", rate)
	interval := "none (no checkpoint cost given)"
	switch {
	case p.IntervalSeconds > 0:
		interval = shortDuration(time.Duration(p.IntervalSeconds * float64(time.Second)))
		if p.IntervalBasis == plan.IntervalDeadline {
			interval += " (for the deadline; Daly's " + shortDuration(time.Duration(p.DalyIntervalSeconds*float64(time.Second))) + ")"
		}
	case p.CheckpointAtNotice:
		interval = "none needed (checkpoint at the notice)"
	case p.PreemptionRatePercentPerHour == 0:
		interval = "none needed (no preemption)"
	}
	row(tw, "Checkpoint every:", interval)
	row(tw, "Standard nodes:", fmt.Sprintf("%s, %.2f", hours(p.StandardHours), p.StandardCost))
	pr := p.Preemptible
	row(tw, "Preemptible nodes:", fmt.Sprintf("%s expected (p10 %s, p50 %s, p90 %s), %.2f expected; overhead %.1f%% by formula",
		hours(pr.ExpectedHours), hours(pr.P10Hours), hours(pr.P50Hours), hours(pr.P90Hours), pr.ExpectedCost, p.OverheadPercent))
	row(tw, "Break-even rate:", breakEven(p))
	if d := p.Deadline; d != nil {
		row(tw, "Deadline:", hours(d.Hours))
		for _, o := range []struct {
			name string
			o    apiv1.PlanOutcome
		}{{"  plan (move when the slack runs out):", d.Plan}, {"  greedy (preemptible until too late):", d.Greedy}} {
			row(tw, o.name, fmt.Sprintf("met in %.1f%%, %.2f expected, %s expected, %.0f%% move", 100*o.o.MeetProbability, o.o.ExpectedCost,
				hours(o.o.ExpectedHours), 100*o.o.MovedShare))
		}
		met := "meets it"
		if !d.StandardMeets {
			met = "misses it"
		}
		row(tw, "  standard only:", fmt.Sprintf("%s, %.2f, %s", hours(d.StandardHours), d.StandardCost, met))
	}
	row(tw, "Advice:", p.Advice)
	if p.Note != "" {
		row(tw, "Note:", p.Note)
	}
}

// breakEven is a plan's break-even rate for a person: past any pool's
// rate, in words (a rate of 290 %/h reads as one a pool could have).
func breakEven(p *apiv1.Plan) string {
	be := p.BreakEvenRatePercentPerHour
	switch {
	case be == nil:
		return fmt.Sprintf("preemptible always pays: no rate up to %d %%/h makes it cost what standard does", plan.MaxRate)
	case p.PreemptibleAlwaysPays:
		return fmt.Sprintf("preemptible always pays: it would break even only at %.3g %%/h, past any pool's rate (%d %%/h is a node lasting an hour)", *be, plan.RealRate)
	}
	return fmt.Sprintf("%.3g %%/h", *be)
}
