package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/client"
)

func newStatsLostWorkCmd(s *state) *cobra.Command {
	var q client.UsageQuery
	var from, to, month string
	cmd := &cobra.Command{
		Use:   "lost-work",
		Short: "Show the work reclaims put at risk, by drain, job, cluster or month",
		Long: `Show the lost-work ledger of a period: for every drain of a node that ran
the tenant's work, the GPU-seconds since that work's last checkpoints at
the notice (since its start when it reports none), grouped by --group-by:
reclaim (one line a drain), job (a gang's drains together; a node's own
work is node/<name>), cluster or month. Each line is valued at the price
the work was paid at then, and the totals sit next to what preemptible
capacity saved the same scope in the period: whether it paid.

Work that reports a checkpoint after its notice, before it goes (sparecap
run and the SDKs report one), saved what was at risk: DESTROYED_GPU_HOURS
leaves it out. Work that does not loses all of it. The
period is the current month up to now unless --month or --from/--to say
otherwise.`,
		Example: `  sparecap stats lost-work
  sparecap stats lost-work --group-by job --month 2026-11
  sparecap stats lost-work --cluster <cluster-id> -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			var err error
			if q.From, q.To, err = s.period(cmd, c, month, from, to); err != nil {
				return err
			}
			lw, err := c.LostWork(cmd.Context(), q)
			if err != nil {
				return fmt.Errorf("get the lost-work ledger: %w", err)
			}
			return s.print(cmd.OutOrStdout(), lw, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "Period: %s to %s, by %s\n\n", lw.From.UTC().Format(time.RFC3339), lw.To.UTC().Format(time.RFC3339), lw.GroupBy)
				row(tw, "KEY", "CLUSTER", "JOB", "CAUSE", "NOTICED", "DRAINS", "LOST_GPU_HOURS", "LOST_USD", "DESTROYED_GPU_HOURS")
				for _, l := range lw.Lines {
					noticed := "-"
					if l.NoticedAt != nil {
						noticed = l.NoticedAt.UTC().Format(time.RFC3339)
					}
					row(tw, l.Key, dash(l.ClusterName), dash(l.Job), dash(l.Cause), noticed, l.Drains, fmt.Sprintf("%.2f", l.LostGPUHours), l.LostAmount,
						fmt.Sprintf("%.2f", l.DestroyedGPUHours))
				}
				t := lw.Totals
				fmt.Fprintf(tw, "\nTotal: %d drains, %.2f GPU-hours at risk worth $%s, %.2f destroyed (the rest checkpointed within the notice); preemptible capacity saved $%s in the period\n",
					t.Drains, t.LostGPUHours, t.LostAmount, t.DestroyedGPUHours, t.PreemptibleSavings)
			})
		}),
	}
	periodFlags(cmd, &q, &from, &to, &month)
	cmd.Flags().StringVar(&q.GroupBy, "group-by", "reclaim", "reclaim, job, cluster or month")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
