package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func newStatsCmd(s *state) *cobra.Command {
	var fromText, toText, region, gpuType string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show preemption statistics per region and GPU type",
		Long: `Show how often preemptible nodes were interrupted, per region and GPU type,
over the window [--from, --to). Without flags the window is the last 7 days
up to now; with only --to it is the 7 days before it. The window may be at
most 366 days. Only preemptible nodes that became ready count; the figures
are fleet-wide, so any token may ask.

  NODE_HOURS       hours preemptible nodes served in the window (from ready
                   to the drain notice, or removal)
  PREEMPTIONS      drains started in the window that the tenant did not ask
                   for: preempted, fair_share or out_of_service (scale-downs
                   and cluster deletions are not preemptions)
  PER_NODE_HOUR    PREEMPTIONS / NODE_HOURS ("-" when there are no
                   node-hours; 0 in JSON and YAML)
  MEDIAN_LIFETIME  nearest-rank median and 90th percentile of ready → notice
  P90_LIFETIME     of the nodes counted in PREEMPTIONS ("-" when none)
  EARLY            drains of preempted nodes finished in the window whose
                   pods all exited before the deadline
  DEADLINE         such drains that reached the deadline
  EARLY_SHARE      EARLY / (EARLY + DEADLINE) ("-" when no drain finished)

-o json and -o yaml print the API's fields, with lifetimes in seconds
(docs/api.md defines them precisely).`,
		Example: `  sparecap stats
  sparecap stats --region us-central-2 --gpu-type RTX_6000_PCI
  sparecap stats --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			from, err := parseTimeFlag("from", fromText)
			if err != nil {
				return err
			}
			to, err := parseTimeFlag("to", toText)
			if err != nil {
				return err
			}
			list, err := c.PreemptionStats(cmd.Context(), from, to, region, gpuType)
			if err != nil {
				return fmt.Errorf("get preemption statistics: %w", err)
			}
			return s.print(cmd.OutOrStdout(), list, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "Window: %s to %s (%s)\n\n", list.From.UTC().Format(time.RFC3339), list.To.UTC().Format(time.RFC3339), shortDuration(list.To.Sub(list.From)))
				row(tw, "REGION", "GPU_TYPE", "NODE_HOURS", "PREEMPTIONS", "PER_NODE_HOUR", "MEDIAN_LIFETIME", "P90_LIFETIME", "EARLY", "DEADLINE", "EARLY_SHARE")
				for _, st := range list.Stats {
					row(tw, st.Region, st.GPUType, fmt.Sprintf("%.1f", st.PreemptibleNodeHours), st.Preemptions, perNodeHour(st),
						lifetime(st, st.MedianLifetimeSeconds), lifetime(st, st.P90LifetimeSeconds),
						st.DrainsEndedEarly, st.DrainsEndedAtDeadline, earlyShare(st))
				}
			})
		}),
	}
	cmd.AddCommand(newStatsWeekCmd(s), newStatsLostWorkCmd(s), newStatsLendingCmd(s))
	f := cmd.Flags()
	f.StringVar(&fromText, "from", "", "start of the window, RFC 3339 (default: 7 days before --to)")
	f.StringVar(&toText, "to", "", "end of the window, RFC 3339, excluded (default: now)")
	f.StringVar(&region, "region", "", "only this region")
	f.StringVar(&gpuType, "gpu-type", "", "only this GPU type")
	return cmd
}

// parseTimeFlag parses an RFC 3339 flag value; empty is the zero time.
func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q is not an RFC 3339 time such as 2026-11-30T12:00:00Z", name, v)
	}
	return t, nil
}

func perNodeHour(st apiv1.PreemptionStats) string {
	if st.PreemptibleNodeHours == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", st.PreemptionsPerNodeHour)
}

func lifetime(st apiv1.PreemptionStats, seconds float64) string {
	if st.Preemptions == 0 {
		return "-"
	}
	return shortDuration(time.Duration(seconds * float64(time.Second)))
}

func earlyShare(st apiv1.PreemptionStats) string {
	if st.DrainsEndedEarly+st.DrainsEndedAtDeadline == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*st.EarlyShare)
}
