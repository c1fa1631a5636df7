package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/client"
)

func newStatsLendingCmd(s *state) *cobra.Command {
	var q client.UsageQuery
	var from, to, month string
	cmd := &cobra.Command{
		Use:   "lending",
		Short: "Show what the fleet lent and earned per pool (operator)",
		Long: `Show, per pool, the GPU-hours lent as preemptible capacity out of idle
machines and out of reserved machines their holders did not use, the
standard GPU-hours, the revenue of each class, the reclaims and the work
they put at risk (the lost-work ledger). Needs the admin token. The period
is the current month up to now unless --month or --from/--to say otherwise.`,
		Example: `  sparecap stats lending
  sparecap stats lending --month 2026-11 -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			var err error
			if q.From, q.To, err = s.period(cmd, c, month, from, to); err != nil {
				return err
			}
			l, err := c.Lending(cmd.Context(), q.From, q.To)
			if err != nil {
				return fmt.Errorf("lending: %w", err)
			}
			return s.print(cmd.OutOrStdout(), l, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "Period: %s to %s\n\n", l.From.UTC().Format(time.RFC3339), l.To.UTC().Format(time.RFC3339))
				row(tw, "REGION", "GPU_TYPE", "LENT_IDLE_GPU_H", "LENT_RESERVED_GPU_H", "STANDARD_GPU_H", "PREEMPTIBLE_USD", "STANDARD_USD", "RECLAIMS", "LOST_GPU_H", "LOST_USD")
				for _, p := range append(l.Pools, l.Totals) {
					region, gpu := p.Region, p.GPUType
					if region == "" {
						region, gpu = "total", ""
					}
					row(tw, region, gpu, fmt.Sprintf("%.1f", p.LentIdleGPUHours), fmt.Sprintf("%.1f", p.LentReservedGPUHours),
						fmt.Sprintf("%.1f", p.StandardGPUHours), p.PreemptibleRevenue, p.StandardRevenue, p.Reclaims,
						fmt.Sprintf("%.1f", p.LostGPUHours), p.LostValue)
				}
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "start of the period, RFC 3339 (default: the first of this month, UTC)")
	f.StringVar(&to, "to", "", "end of the period, RFC 3339 (default: now)")
	f.StringVar(&month, "month", "", "a whole month, like 2026-11 (instead of --from/--to)")
	return cmd
}
