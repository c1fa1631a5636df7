package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func newBudgetsCmd(s *state) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:     "budgets",
		Aliases: []string{"budget"},
		Short:   "Set monthly budgets, see their forecasts, and the alerts they raised",
		Long: `Manage a project's monthly budgets: on the whole project, or on the work of
one label value (--label team=vision: its share of the nodes it ran on, as
sparecap usage --group-by label:team splits them). After every metering pass
sparecap works out each budget's spend this month and forecasts the month's
end from the recent daily rate, with a 95% interval once the month has three
complete days. A budget raises an alert, once each, when its spend crosses a
threshold (percentages of the budget, default 50, 80 and 100), when the
forecast reaches the budget, and, with --change-percent, when a day's spend
jumps that much above the mean of the seven days before. Alerts are listed
here and in the console, delivered to webhook endpoints that ask for
BudgetAlert, and counted in sparecap_budget_alerts_total. See docs/cost.md.`,
		Example: `  sparecap budgets create ml --amount 20000
  sparecap budgets create vision --amount 5000 --label team=vision --threshold 80 --threshold 100 --change-percent 50
  sparecap budgets list
  sparecap budgets alerts --month 2026-11
  sparecap budgets delete bg-3f2a9c1d0b7e`,
	}
	cmd.PersistentFlags().StringVar(&project, "project-id", "", "this project's budgets (operator token needed)")
	// The subcommands read --project-id when they run.
	cmd.AddCommand(
		newBudgetsCreateCmd(s, &project),
		newBudgetsListCmd(s, &project),
		newBudgetsDeleteCmd(s, &project),
		newBudgetsAlertsCmd(s, &project),
	)
	return cmd
}

func newBudgetsCreateCmd(s *state, project *string) *cobra.Command {
	var req apiv1.CreateBudgetRequest
	create := &cobra.Command{
		Use:   "create <name>",
		Short: "Create a monthly budget",
		Long: `Create a monthly budget of the project, or of the work of one label value.
Its name is unique in the project (1-63 letters, digits, '_', '.', '-'); a
project has at most 20 budgets.`,
		Example: `  sparecap budgets create ml --amount 20000
  sparecap budgets create vision --amount 5000 --label team=vision --threshold 80 --threshold 100`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			req.Name = args[0]
			b, err := c.CreateBudget(cmd.Context(), *project, req)
			if err != nil {
				return fmt.Errorf("create budget: %w", err)
			}
			return s.print(cmd.OutOrStdout(), b, func(tw *tabwriter.Writer) { budgetTable(tw, []apiv1.Budget{*b}) })
		}),
	}
	create.Flags().StringVar(&req.Amount, "amount", "", "the monthly budget in dollars, like 5000 or 1250.50 (required)")
	create.Flags().StringVar(&req.Label, "label", "", "budget the work with this label, key=value (default: the whole project)")
	create.Flags().IntSliceVar(&req.Thresholds, "threshold", nil, "alert when this percentage of the budget is spent (repeat; default 50, 80, 100)")
	create.Flags().IntVar(&req.ChangePercent, "change-percent", 0, "alert when a day's spend is this much above the mean of the seven days before (0: never)")
	create.MarkFlagRequired("amount")
	return create
}

func newBudgetsListCmd(s *state, project *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List budgets with their spend this month and forecast",
		Long: `List the project's budgets with their spend this month so far, the share of
the budget spent, the month-end forecast and its 95% range (once the month
has three complete days), and a note when the history is too short.`,
		Example: `  sparecap budgets list
  sparecap budgets list -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			l, err := c.Budgets(cmd.Context(), *project)
			if err != nil {
				return fmt.Errorf("list budgets: %w", err)
			}
			return s.print(cmd.OutOrStdout(), l, func(tw *tabwriter.Writer) { budgetTable(tw, l.Budgets) })
		}),
	}
}

func newBudgetsDeleteCmd(s *state, project *string) *cobra.Command {
	return &cobra.Command{
		Use:     "delete <budget-id>",
		Short:   "Delete a budget (its alerts stay listed)",
		Long:    `Delete a budget: it raises no more alerts; those it raised stay listed.`,
		Example: `  sparecap budgets delete bg-3f2a9c1d0b7e`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if err := c.DeleteBudget(cmd.Context(), *project, args[0]); err != nil {
				return fmt.Errorf("delete budget: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "budget %s deleted\n", args[0])
			return nil
		}),
	}
}

func newBudgetsAlertsCmd(s *state, project *string) *cobra.Command {
	var o client.BudgetAlertOptions
	alerts := &cobra.Command{
		Use:   "alerts",
		Short: "List the alerts budgets raised",
		Long: `List the alerts the project's budgets raised, oldest first (newest first
with --newest): a threshold of spend crossed (spend), the month-end
forecast reaching the budget (forecast), a day's spend jumping above the
week before (change). Each is raised once per budget name and month (a
change once per day), however often the budget is deleted and created
again. At most 1,000 are listed (--limit fewer).`,
		Example: `  sparecap budgets alerts
  sparecap budgets alerts --month 2026-11
  sparecap budgets alerts --newest --limit 20`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if o.Month != "" {
				if _, _, err := monthPeriod(o.Month); err != nil {
					return err
				}
			}
			if o.Limit < 0 || o.Limit > 1000 {
				return fmt.Errorf("--limit must be between 1 and 1000; got %d", o.Limit)
			}
			a, err := c.BudgetAlertsPage(cmd.Context(), *project, o)
			if err != nil {
				return fmt.Errorf("list budget alerts: %w", err)
			}
			return s.print(cmd.OutOrStdout(), a, func(tw *tabwriter.Writer) {
				row(tw, "AT", "BUDGET", "KIND", "SPEND", "FORECAST", "MESSAGE")
				for _, x := range a.Alerts {
					row(tw, s.localTime(x.At), x.Name, x.Kind, "$"+x.Spend, "$"+x.Forecast, x.Message)
				}
			})
		}),
	}
	alerts.Flags().StringVar(&o.Month, "month", "", "only this month, like 2026-11")
	alerts.Flags().BoolVar(&o.Newest, "newest", false, "newest first")
	alerts.Flags().IntVar(&o.Limit, "limit", 0, "at most this many (1 to 1000; 0: 1000)")
	return alerts
}

func budgetTable(tw *tabwriter.Writer, bs []apiv1.Budget) {
	row(tw, "ID", "NAME", "LABEL", "BUDGET", "MONTH", "SPENT", "SPENT%", "FORECAST", "95% RANGE", "THRESHOLDS")
	for _, b := range bs {
		rng := "-"
		if b.ForecastLow != "" {
			rng = "$" + b.ForecastLow + " to $" + b.ForecastHigh
		}
		th := make([]string, len(b.Thresholds))
		for i, t := range b.Thresholds {
			th[i] = strconv.Itoa(t) + "%"
		}
		row(tw, b.ID, b.Name, dash(b.Label), "$"+b.Amount, b.Month, "$"+b.Spend, fmt.Sprintf("%.1f", b.SpentPercent),
			"$"+b.Forecast, rng, strings.Join(th, " "))
	}
	first := true
	for _, b := range bs {
		if b.Note != "" {
			if first {
				fmt.Fprintln(tw)
				first = false
			}
			fmt.Fprintf(tw, "%s: %s\n", b.Name, b.Note)
		}
	}

}
