package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func newStatsWeekCmd(s *state) *cobra.Command {
	var fromText, toText, region, gpuType string
	var ahead int
	cmd := &cobra.Command{
		Use:   "week --region R --gpu-type G",
		Short: "Show when a pool is reclaimed, by hour of the week, and the next hours",
		Long: `Show how often the pool's preemptible nodes were reclaimed in each hour of
the week (UTC), over the window [--from, --to) (default: the four weeks up
to now), and what that history says of the next --ahead hours.

The grid shows preemptions per 100 node-hours, a row a day, a column an
hour; "." marks an hour of the week with less than 8 node-hours of service
in the window, whose rate is not a pattern yet. A pool needs two weeks of
history before the hours of the week mean much: the command says so.

  START        the coming hour
  RATE         preemptions per 100 node-hours in that hour of the week
  INTERVAL     its 95% confidence interval
  MEAN_NODES   preemptible nodes serving then, on average

-o json and -o yaml print every hour of the week with its interval.`,
		Example: `  sparecap stats week --region us-central-2 --gpu-type RTX_6000_PCI
  sparecap stats week --region us-central-2 --gpu-type RTX_6000_PCI --ahead 48 -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if region == "" || gpuType == "" {
				return errors.New("--region and --gpu-type name the pool: both are required")
			}
			if ahead < 0 || ahead > 168 {
				return fmt.Errorf("--ahead must be from 0 to 168 hours; got %d", ahead)
			}
			from, err := parseTimeFlag("from", fromText)
			if err != nil {
				return err
			}
			to, err := parseTimeFlag("to", toText)
			if err != nil {
				return err
			}
			w, err := c.PreemptionWeek(cmd.Context(), region, gpuType, from, to, ahead)
			if err != nil {
				return fmt.Errorf("get the pool's week: %w", err)
			}
			return s.print(cmd.OutOrStdout(), w, func(tw *tabwriter.Writer) { printWeek(tw, w) })
		}),
	}
	f := cmd.Flags()
	f.StringVar(&region, "region", "", "the pool's region (required)")
	f.StringVar(&gpuType, "gpu-type", "", "the pool's GPU type (required)")
	f.StringVar(&fromText, "from", "", "start of the window, RFC 3339 (default: four weeks before --to)")
	f.StringVar(&toText, "to", "", "end of the window, RFC 3339, excluded (default: now)")
	f.IntVar(&ahead, "ahead", 24, "hours to forecast after the window (0 to 168)")
	return cmd
}

// printWeek prints the grid of rates and the forecast.
func printWeek(tw *tabwriter.Writer, w *apiv1.WeekStats) {
	fmt.Fprintf(tw, "Pool %s %s, %s to %s\n", w.Region, w.GPUType, w.From.UTC().Format(time.RFC3339), w.To.UTC().Format(time.RFC3339))
	if w.Note != "" {
		fmt.Fprintf(tw, "Too little history: %s.\n", w.Note)
	}
	fmt.Fprintln(tw, "\nPreemptions per 100 node-hours, by hour of the week (UTC):")
	head := []any{"DAY"}
	for h := range 24 {
		head = append(head, fmt.Sprintf("%02d", h))
	}
	row(tw, head...)
	for d := range 7 {
		cols := []any{w.Hours[d*24].Day}
		for h := range 24 {
			cols = append(cols, per100(w.Hours[d*24+h]))
		}
		row(tw, cols...)
	}
	if len(w.Forecast) == 0 {
		return
	}
	fmt.Fprintln(tw)
	row(tw, "START", "RATE", "INTERVAL", "MEAN_NODES")
	for _, f := range w.Forecast {
		interval := "-"
		if f.NodeHours > 0 {
			interval = fmt.Sprintf("%.1f-%.1f", 100*f.RateLow, 100*f.RateHigh)
		}
		row(tw, f.Start.UTC().Format("Mon 15:04"), per100(f.WeekHour), interval, fmt.Sprintf("%.1f", f.MeanNodes))
	}
}

// per100 is an hour's rate per 100 node-hours, "." without enough service.
func per100(h apiv1.WeekHour) string {
	if !h.Enough {
		return "."
	}
	return fmt.Sprintf("%.1f", 100*h.Rate)
}
