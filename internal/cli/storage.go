package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func newStorageCmd(s *state) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "What each project's input makes the server keep, against its storage quota",
		Long: `Show what a project's own input makes the server keep (its work spans,
budgets and alerts, webhook endpoints and deliveries, tokens), by table,
against its storage quota. At the quota its optional writes are refused:
new work spans are not recorded, new budgets and webhook endpoints fail.
Usage, billing, events and notices are never counted nor refused.
A project token shows its own project; the admin token every project,
or one with --project.`,
		Example: `  sparecap storage
  sparecap storage --project team-ml -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			st, err := c.Storage(cmd.Context(), project)
			if err != nil {
				return fmt.Errorf("storage: %w", err)
			}
			return s.print(cmd.OutOrStdout(), st, func(tw *tabwriter.Writer) {
				row(tw, "PROJECT", "USED", "QUOTA", "%", "TABLES")
				for _, p := range st.Projects {
					tables := ""
					for i, t := range p.Tables {
						if i > 0 {
							tables += ", "
						}
						tables += fmt.Sprintf("%s %s", t.Table, apiv1.Bytes(t.Bytes))
					}
					pct := "-"
					if p.QuotaBytes > 0 {
						pct = strconv.FormatFloat(100*float64(p.UsedBytes)/float64(p.QuotaBytes), 'f', 1, 64)
					}
					row(tw, p.ProjectID, apiv1.Bytes(p.UsedBytes), apiv1.Bytes(p.QuotaBytes), pct, tables)
				}
			})
		}),
	}
	cmd.Flags().StringVar(&project, "project", "", "only this project (admin)")
	return cmd
}

func newStorageQuotaCmd(s *state) *cobra.Command {
	return &cobra.Command{
		Use:   "storage-quota <project-id> <bytes>",
		Short: "Set a project's storage quota in bytes, 0 for the server's default (admin)",
		Long: `Set how many bytes a project's own input may make the server keep (see
sparecap storage). 0 gives it back the server's default
(--project-storage-quota); otherwise at least 1048576 (1 MiB).`,
		Example: `  sparecap projects storage-quota team-ml 4294967296
  sparecap projects storage-quota team-ml 0`,
		Args: cobra.ExactArgs(2),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			n, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("bytes %q is not a whole number of bytes", args[1])
			}
			if err := c.SetStorageQuota(cmd.Context(), args[0], n); err != nil {
				return fmt.Errorf("set the storage quota of %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "project %s: storage quota %s\n", args[0], map[bool]string{true: "the server's default", false: apiv1.Bytes(n)}[n == 0])
			return nil
		}),
	}
}
