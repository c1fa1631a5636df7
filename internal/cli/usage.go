package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

const outCSV = "csv"

// allowCSV lets a command take -o csv on top of the usual formats.
func allowCSV(s *state) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error {
		if s.output == outCSV {
			return nil
		}
		if err := checkOutput(s.output); err != nil {
			return fmt.Errorf("unknown output format %q for -o/--output: use table, json, yaml or csv", s.output)
		}
		return nil
	}
}

// monthPeriod is [first of month, first of next month) in UTC.
func monthPeriod(month string) (time.Time, time.Time, error) {
	start, err := time.Parse("2006-01", month)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("--month %q is not a month like 2026-11", month)
	}
	return start, start.AddDate(0, 1, 0), nil
}

func newUsageCmd(s *state) *cobra.Command {
	var q client.UsageQuery
	var from, to, month string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show priced usage: what each node cost, the on-demand equivalent and the savings",
		Long: `Show priced usage for a period: one line per node and stretch of constant
prices (or grouped by cluster, compute class or day), what it cost, what the same
usage would have cost on demand, and the savings. Preemptible nodes cost a
flat discount off the on-demand price (50% unless the operator set another)
and stop billing at the preemption notice; see docs/billing.md.

Grouped by namespace, job, account, work (a pod, a Slurm job's run) or
label:<key> (a pod label such as team, or "user" of a Slurm job), each
node's cost is split among the work that ran on it by GPUs held and time;
what no work held is "(idle)". A job is one line across all its reclaims
and reruns; see docs/cost.md.

The period is the current month up to now unless --month or --from/--to say
otherwise. A project token sees its own project; the admin token sees every
project, or one with --project-id.`,
		Example: `  sparecap usage
  sparecap usage --cluster <cluster-id> --group-by compute_class
  sparecap usage --month 2026-11 --group-by label:team
  sparecap usage --from 2026-11-01T00:00:00Z --to 2026-11-15T00:00:00Z -o csv > usage.csv`,
		Args:              cobra.NoArgs,
		PersistentPreRunE: allowCSV(s),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			var err error
			if q.From, q.To, err = s.period(cmd, c, month, from, to); err != nil {
				return err
			}
			if s.output == outCSV {
				return c.UsageCSV(cmd.Context(), q, cmd.OutOrStdout())
			}
			u, err := c.Usage(cmd.Context(), q)
			if err != nil {
				return fmt.Errorf("usage: %w", err)
			}
			return s.print(cmd.OutOrStdout(), u, func(tw *tabwriter.Writer) {
				if byWork(u.GroupBy) {
					workTable(tw, u.LineItems)
				} else {
					s.usageTable(tw, u.LineItems)
				}
				fmt.Fprintln(tw)
				s.totalsTable(tw, u.Currency, u.Totals, u.ByClass)
			})
		}),
	}
	periodFlags(cmd, &q, &from, &to, &month)
	cmd.Flags().StringVar(&q.GroupBy, "group-by", "node", "node, cluster, compute_class, gpu_type, day, or split among the work on the nodes: namespace, job, account, work or label:<key>")
	return cmd
}

// byWork: the grouping splits nodes among their work (cost allocation).
func byWork(groupBy string) bool {
	switch groupBy {
	case "namespace", "job", "account", "work":
		return true
	}
	return strings.HasPrefix(groupBy, "label:")
}

// workTable shows usage split among work: a line per group, "(none)" for
// work without the group's value, "(idle)" for what no work held.
func workTable(tw *tabwriter.Writer, lines []apiv1.UsageLine) {
	units := slices.ContainsFunc(lines, func(l apiv1.UsageLine) bool { return l.Units > 0 })
	head := []any{"GROUP", "CLUSTER", "CLASS", "GPU-HOURS", "AMOUNT", "ON-DEMAND"}
	if units {
		head = append(head, "UNITS", "PER-UNIT")
	}
	row(tw, head...)
	for _, l := range lines {
		group := l.Group
		switch {
		case l.Idle:
			group = "(idle)"
		case group == "":
			group = "(none)"
		}
		name := cmp.Or(l.ClusterName, l.ClusterID)
		cols := []any{group, orDash(name), orDash(l.ComputeClass), gpuHours(l.GPUSeconds), l.Amount, l.OnDemandAmount}
		if units {
			n := "-"
			if l.Units > 0 {
				n = strconv.FormatInt(l.Units, 10)
			}
			cols = append(cols, n, orDash(l.CostPerUnit))
		}
		row(tw, cols...)
	}
}

// periodFlags are the flags of a usage period and scope: --cluster,
// --project-id, --from, --to and --month (see state.period).
func periodFlags(cmd *cobra.Command, q *client.UsageQuery, from, to, month *string) {
	f := cmd.Flags()
	f.StringVar(&q.ClusterID, "cluster", "", "only this cluster")
	f.StringVar(&q.ProjectID, "project-id", "", "only this project (admin token)")
	f.StringVar(from, "from", "", "start of the period, RFC 3339 (default: the first of this month, UTC)")
	f.StringVar(to, "to", "", "end of the period, RFC 3339 (default: now)")
	f.StringVar(month, "month", "", "a whole month, like 2026-11 (instead of --from/--to)")
}

// period is the period of --month or --from/--to, by default the current
// month (UTC, the server's clock) up to now.
func (s *state) period(cmd *cobra.Command, c *client.Client, month, from, to string) (start, end time.Time, err error) {
	switch {
	case month != "" && (from != "" || to != ""):
		return start, end, fmt.Errorf("give either --month or --from/--to, not both")
	case month != "":
		return monthPeriod(month)
	}
	// "Now" is the server's: learn it before asking.
	if _, err := c.WhoAmI(cmd.Context()); err != nil {
		return start, end, fmt.Errorf("usage: %w", err)
	}
	now := s.now().UTC().Truncate(time.Second)
	start, end = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), now.Add(time.Second)
	if from != "" {
		if start, err = time.Parse(time.RFC3339, from); err != nil {
			return start, end, fmt.Errorf("--from %q is not an RFC 3339 time like 2026-11-01T00:00:00Z", from)
		}
	}
	if to != "" {
		if end, err = time.Parse(time.RFC3339, to); err != nil {
			return start, end, fmt.Errorf("--to %q is not an RFC 3339 time like 2026-11-30T00:00:00Z", to)
		}
	}
	return start, end, nil
}

func (s *state) usageTable(tw *tabwriter.Writer, lines []apiv1.UsageLine) {
	row(tw, "CLUSTER", "NODE", "CLASS", "GPUS", "START", "END", "BILLED", "RATE/GPU-H", "AMOUNT", "ON-DEMAND")
	for _, l := range lines {
		name := l.ClusterName
		if name == "" {
			name = l.ClusterID
		}
		gpus := "-"
		if l.GPUs > 0 {
			gpus = fmt.Sprint(l.GPUs)
		}
		rate := orDash(l.RatePerGPUHour)
		if !l.Priced {
			rate = "no price"
		}
		row(tw, orDash(name), orDash(l.NodeName), orDash(l.ComputeClass), gpus, s.localTime(l.Start), s.localTime(l.End),
			shortDuration(time.Duration(l.BilledSeconds)*time.Second), rate, l.Amount, l.OnDemandAmount)
	}
}

func (s *state) totalsTable(tw *tabwriter.Writer, currency string, t apiv1.UsageTotals, byClass map[string]apiv1.UsageTotals) {
	row(tw, "", "AMOUNT", "ON-DEMAND EQUIVALENT", "SAVINGS", "GPU-HOURS")
	for _, class := range []string{"standard", "preemptible"} {
		if c, ok := byClass[class]; ok {
			row(tw, class, currency+" "+c.Amount, currency+" "+c.OnDemandEquivalent, currency+" "+c.Savings, gpuHours(c.GPUSeconds))
		}
	}
	row(tw, "total", currency+" "+t.Amount, currency+" "+t.OnDemandEquivalent, currency+" "+t.Savings, gpuHours(t.GPUSeconds))
	if t.UnpricedGPUSeconds > 0 {
		row(tw, "unpriced", gpuHours(t.UnpricedGPUSeconds)+" GPU-hours had no price in the price book")
	}
}

func gpuHours(gpuSeconds int64) string {
	return fmt.Sprintf("%.2f", float64(gpuSeconds)/3600)
}

func newInvoiceCmd(s *state) *cobra.Command {
	var project, month string
	cmd := &cobra.Command{
		Use:   "invoice",
		Short: "Show a project's invoice for a month, by cluster and compute class",
		Long: `Show a project's invoice for a month: each cluster's standard and preemptible
usage with its amount and on-demand equivalent, subtotals per compute class,
the total to pay (rounded to the cent from the exact sum) and the savings.
A project token reads its own invoice; the admin names the project.`,
		Example: `  sparecap invoice
  sparecap invoice --month 2026-10 -o csv > invoice-2026-10.csv
  sparecap invoice --project-id team-ml --month 2026-11`,
		Args:              cobra.NoArgs,
		PersistentPreRunE: allowCSV(s),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if month == "" {
				if _, err := c.WhoAmI(cmd.Context()); err != nil {
					return fmt.Errorf("invoice: %w", err)
				}
				month = s.now().UTC().Format("2006-01")
			} else if _, _, err := monthPeriod(month); err != nil {
				return err
			}
			if s.output == outCSV {
				return c.InvoiceCSV(cmd.Context(), project, month, cmd.OutOrStdout())
			}
			inv, err := c.Invoice(cmd.Context(), project, month)
			if err != nil {
				return fmt.Errorf("invoice: %w", err)
			}
			return s.print(cmd.OutOrStdout(), inv, func(tw *tabwriter.Writer) {
				row(tw, "Project:", inv.ProjectID)
				row(tw, "Period:", inv.From.Format("2006-01-02")+" to "+inv.To.Format("2006-01-02")+" (UTC)")
				row(tw, "Preemptible discount:", inv.PreemptibleDiscount+"%")
				fmt.Fprintln(tw)
				s.usageTable(tw, inv.Lines)
				fmt.Fprintln(tw)
				s.totalsTable(tw, inv.Currency, inv.Total, inv.ByClass)
			})
		}),
	}
	cmd.Flags().StringVar(&project, "project-id", "", "the project (required with the admin token)")
	cmd.Flags().StringVar(&month, "month", "", "the month, like 2026-11 (default: this month)")
	return cmd
}

func newPricesCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prices",
		Short: "Show what capacity costs per GPU-hour now, on demand and preemptible",
		Long: `Show the price per GPU-hour of each region and GPU type of the fleet, on
demand and preemptible (a flat discount off on-demand, the same for everyone).`,
		Example: `  sparecap prices
  sparecap prices book
  sparecap prices set --kind on_demand --gpu-type H100_SXM --value 3.19`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			r, err := c.Rates(cmd.Context())
			if err != nil {
				return fmt.Errorf("prices: %w", err)
			}
			return s.print(cmd.OutOrStdout(), r, func(tw *tabwriter.Writer) {
				row(tw, "REGION", "GPU_TYPE", "ON_DEMAND/GPU-H", "PREEMPTIBLE/GPU-H")
				for _, x := range r.Rates {
					row(tw, x.Region, x.GPUType, orDash(x.OnDemand), orDash(x.Preemptible))
				}
				fmt.Fprintf(tw, "\nPrices in %s; preemptible capacity is %s%% off on-demand.\n", r.Currency, r.PreemptibleDiscountPercent)
			})
		}),
	}
	cmd.AddCommand(newPricesBookCmd(s), newPricesSetCmd(s))
	return cmd
}

func newPricesBookCmd(s *state) *cobra.Command {
	return &cobra.Command{
		Use:   "book",
		Short: "List the whole price book, past and future entries (admin)",
		Long: `List every entry of the price book in the order they take effect: on-demand
prices, reserved prices and the preemptible discount, including past ones
(usage before a change keeps the price it had) and future ones.`,
		Example: `  sparecap prices book`,
		Args:    cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			b, err := c.PriceBook(cmd.Context())
			if err != nil {
				return fmt.Errorf("price book: %w", err)
			}
			return s.print(cmd.OutOrStdout(), b, func(tw *tabwriter.Writer) {
				row(tw, "ID", "KIND", "REGION", "GPU_TYPE", "RESERVATION", "VALUE", "EFFECTIVE_FROM")
				for _, p := range b.Prices {
					row(tw, p.ID, p.Kind, orDash(p.Region), orDash(p.GPUType), orDash(p.ReservationID), p.Value, s.localTime(p.EffectiveFrom))
				}
			})
		}),
	}
}

func newPricesSetCmd(s *state) *cobra.Command {
	var req apiv1.CreatePriceRequest
	var effective string
	set := &cobra.Command{
		Use:   "set",
		Short: "Add a price book entry, effective now or later (admin)",
		Long: `Add a price book entry. Entries are never changed: a new price takes effect
from --effective-from (default now; never in the past) and usage before it
keeps the price it had. Kinds: on_demand (dollars per GPU-hour, by
--gpu-type and optionally --region), reserved (per GPU-hour, for a
--reservation-id), preemptible_discount (percent off on-demand).`,
		Example: `  sparecap prices set --kind on_demand --gpu-type H100_SXM --value 3.19
  sparecap prices set --kind reserved --reservation-id rsv-acme-us-central-8-h100-sxm --value 1.90
  sparecap prices set --kind preemptible_discount --value 50 --effective-from 2026-12-01T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if effective != "" {
				t, err := time.Parse(time.RFC3339, effective)
				if err != nil {
					return fmt.Errorf("--effective-from %q is not an RFC 3339 time", effective)
				}
				req.EffectiveFrom = &t
			}
			p, err := c.CreatePrice(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("set price: %w", err)
			}
			return s.print(cmd.OutOrStdout(), p, func(tw *tabwriter.Writer) {
				row(tw, "ID:", p.ID)
				row(tw, "Kind:", p.Kind)
				row(tw, "Value:", p.Value)
				row(tw, "Effective from:", s.localTime(p.EffectiveFrom))
			})
		}),
	}
	sf := set.Flags()
	sf.StringVar(&req.Kind, "kind", "", "on_demand, reserved or preemptible_discount (required)")
	sf.StringVar(&req.Value, "value", "", "dollars per GPU-hour, or percent for the discount (required)")
	sf.StringVar(&req.Region, "region", "", "region (on_demand; default: every region)")
	sf.StringVar(&req.GPUType, "gpu-type", "", "GPU type (on_demand)")
	sf.StringVar(&req.ReservationID, "reservation-id", "", "reservation (reserved)")
	sf.StringVar(&effective, "effective-from", "", "RFC 3339 time the price takes effect (default now)")
	_ = set.MarkFlagRequired("kind")
	_ = set.MarkFlagRequired("value")
	return set
}
