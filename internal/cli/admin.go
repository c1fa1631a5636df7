package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/termsafe"
)

func newCapacityCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Show GPU capacity per region and GPU type",
		Long: `Show GPU capacity per region and GPU type, in GPUs:

  TOTAL              every machine of the fleet
  ON_DEMAND_AVAIL    what a new ON_DEMAND standard request could get now
                     (free on-demand machines plus those reclaimable from
                     preemptible use)
  PREEMPTIBLE_AVAIL  spare capacity preemptible targets share: machines of any pool
                     (idle reservations included) not serving standard nodes and
                     not cooling down, counting those lent out now
  RESERVED           machines bought by a project
  STD_IN_USE         serving standard nodes
  PREEMPT_IN_USE     serving preemptible nodes
  OUT_OF_SERVICE     taken out of service by the operator`,
		Example: `  sparecap capacity
  sparecap capacity -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.Capacity(cmd.Context())
			if err != nil {
				return fmt.Errorf("get capacity: %w", err)
			}
			return s.print(cmd.OutOrStdout(), list, func(tw *tabwriter.Writer) {
				row(tw, "REGION", "GPU_TYPE", "TOTAL", "ON_DEMAND_AVAIL", "PREEMPTIBLE_AVAIL", "RESERVED", "STD_IN_USE", "PREEMPT_IN_USE", "OUT_OF_SERVICE")
				for _, c := range list.Capacity {
					row(tw, c.Region, c.GPUType, c.Total, c.AvailableOnDemand, c.AvailablePreemptible, c.Reserved, c.InUseStandard, c.InUsePreemptible, c.OutOfService)
				}
			})
		}),
	}
	cmd.AddCommand(newForecastCmd(s))
	return cmd
}

func newForecastCmd(s *state) *cobra.Command {
	var region, gpuType string
	var hours int
	cmd := &cobra.Command{
		Use:   "forecast",
		Short: "Forecast the GPUs preemptible tenants can expect, hour by hour",
		Long: `Forecast, for every pool (or those --region and --gpu-type select), the
lendable GPUs (in service, not held by standard nodes: what preemptible
targets share by fair share) hour by hour from the next hour: the expected
number and a 90% interval, from the same hour of the week, and two hours
either side, in each of the pool's last four weeks. A pool with less
history says so. Any token may ask.`,
		Example: `  sparecap capacity forecast --region us-central-2 --gpu-type RTX_6000_PCI
  sparecap capacity forecast --hours 168 -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			f, err := c.CapacityForecast(cmd.Context(), region, gpuType, hours)
			if err != nil {
				return fmt.Errorf("get the capacity forecast: %w", err)
			}
			return s.print(cmd.OutOrStdout(), f, func(tw *tabwriter.Writer) {
				booked := slices.ContainsFunc(f.Pools, func(p apiv1.PoolForecast) bool {
					return slices.ContainsFunc(p.Hours, func(h apiv1.ForecastGPUs) bool { return h.BookedGPUs > 0 })
				})
				head := []any{"REGION", "GPU_TYPE", "HOUR", "EXPECTED", "90% INTERVAL", "OF"}
				if booked {
					head = append(head, "BOOKED")
				}
				row(tw, head...)
				for _, p := range f.Pools {
					for _, h := range p.Hours {
						cols := []any{p.Region, p.GPUType, s.localTime(h.Start), num1(h.ExpectedGPUs), num1(h.LowGPUs) + " - " + num1(h.HighGPUs), p.CapacityGPUs}
						if booked {
							cols = append(cols, h.BookedGPUs)
						}
						row(tw, cols...)
					}
				}
				for _, p := range f.Pools {
					if p.Note != "" {
						fmt.Fprintf(tw, "\n%s/%s: %s\n", termsafe.Escape(p.Region), termsafe.Escape(p.GPUType), termsafe.Escape(p.Note))
					}
				}
			})
		}),
	}
	cmd.Flags().StringVar(&region, "region", "", "only this region's pools")
	cmd.Flags().StringVar(&gpuType, "gpu-type", "", "only this GPU type's pools")
	cmd.Flags().IntVar(&hours, "hours", 48, "hours to forecast, from 1 to 168")
	return cmd
}

// num1 prints a figure with at most one decimal.
func num1(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func newProjectsCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "projects",
		Aliases: []string{"project"},
		Short:   "Manage projects (tenants) and their tokens (admin)",
		Long: `Manage projects. A project is a tenant: it owns clusters and reservations
and authenticates with its own token. Needs the admin token.`,
		Example: `  sparecap projects create team-ml
  sparecap projects list`,
	}
	create := &cobra.Command{
		Use:   "create <project-id>",
		Short: "Create a project and print its token",
		Long: `Create a project and print its API token. The token is shown only this once:
the server keeps only its hash. Give it to the tenant, who sets it with
--token or SPARECAP_TOKEN.`,
		Example: `  sparecap projects create team-ml
  export SPARECAP_TOKEN=$(sparecap projects create team-ml -o json | jq -r .token)`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			p, err := c.CreateProject(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("create project %s: %w", args[0], err)
			}
			return s.printToken(cmd, p)
		}),
	}
	list := &cobra.Command{
		Use:     "list",
		Short:   "List projects",
		Long:    `List projects. Tokens are never listed.`,
		Example: `  sparecap projects list`,
		Args:    cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListProjects(cmd.Context())
			if err != nil {
				return fmt.Errorf("list projects: %w", err)
			}
			return s.print(cmd.OutOrStdout(), list, func(tw *tabwriter.Writer) {
				row(tw, "PROJECT", "CREATED")
				for _, p := range list.Projects {
					row(tw, p.ProjectID, s.timeAndAge(p.CreatedAt))
				}
			})
		}),
	}
	token := &cobra.Command{
		Use:   "token <project-id>",
		Short: "Issue another token for a project",
		Long: `Issue another API token for an existing project, for a new user. Earlier
tokens keep working; see sparecap tokens to name, list, revoke and rotate
them. The token is shown only this once.`,
		Example: `  sparecap projects token team-ml`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			p, err := c.CreateToken(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("issue token for %s: %w", args[0], err)
			}
			return s.printToken(cmd, p)
		}),
	}
	cmd.AddCommand(create, list, token, newStorageQuotaCmd(s))
	return cmd
}

func newMachinesCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "machines",
		Aliases: []string{"machine"},
		Short:   "Manage the fleet's GPU machines (admin)",
		Long: `Manage the GPU machines of the fleet: register them, list them, and take
them out of service. Needs the admin token.`,
		Example: `  sparecap machines add --region us-central-8 --gpu-type H100_SXM --count 4
  sparecap machines list --state free`,
	}
	cmd.AddCommand(newMachinesListCmd(s), newMachinesAddCmd(s), newMachinesSetCmd(s))
	return cmd
}

func newMachinesListCmd(s *state) *cobra.Command {
	var filter client.ListMachinesOptions
	list := &cobra.Command{
		Use:   "list",
		Short: "List machines",
		Long: `List machines with their pool (on-demand or a reservation), state, and the
cluster and node they serve, if any.`,
		Example: `  sparecap machines list
  sparecap machines list --region us-central-8 --gpu-type H100_SXM --state out_of_service`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListMachines(cmd.Context(), filter)
			if err != nil {
				return fmt.Errorf("list machines: %w", err)
			}
			return s.printMachines(cmd, list.Machines, list)
		}),
	}
	list.Flags().StringVar(&filter.Region, "region", "", "only machines in this region")
	list.Flags().StringVar(&filter.GPUType, "gpu-type", "", "only machines of this GPU type")
	list.Flags().StringVar(&filter.State, "state", "", "only machines in this state (free, provisioning, ready, draining, removing, out_of_service)")
	return list
}

func newMachinesAddCmd(s *state) *cobra.Command {
	var req apiv1.CreateMachinesRequest
	add := &cobra.Command{
		Use:   "add",
		Short: "Register machines",
		Long: `Register --count machines of --gpus-per-machine GPUs each. They join the
on-demand pool, or the pool of a reservation with --reservation (idle
reserved machines are still lent as preemptible capacity).`,
		Example: `  sparecap machines add --region us-central-8 --gpu-type H100_SXM --count 4
  sparecap machines add --region us-central-8 --gpu-type H100_SXM --count 2 --reservation res-1`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.CreateMachines(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("add machines: %w", err)
			}
			return s.printMachines(cmd, list.Machines, list)
		}),
	}
	add.Flags().StringVar(&req.Region, "region", "", "region (required)")
	add.Flags().StringVar(&req.GPUType, "gpu-type", "", "GPU type (required)")
	add.Flags().IntVar(&req.Count, "count", 0, "number of machines (required)")
	add.Flags().IntVar(&req.GPUsPerMachine, "gpus-per-machine", 8, "GPUs per machine")
	add.Flags().StringVar(&req.ReservationID, "reservation", "", "reservation the machines belong to (default: the on-demand pool)")
	for _, name := range []string{"region", "gpu-type", "count"} {
		_ = add.MarkFlagRequired(name)
	}
	return add
}

func newMachinesSetCmd(s *state) *cobra.Command {
	var (
		outOfService  bool
		maintenanceAt string
	)
	set := &cobra.Command{
		Use:   "set <machine-id>",
		Short: "Take a machine out of service, book it for maintenance, or put it back",
		Long: `Take a machine out of service (--out-of-service=true) or put it back
(--out-of-service=false). A machine taken out of service while serving a node
has that node drained first, with the usual notice.

--maintenance-at books the machine out for maintenance ahead (RFC 3339; an
empty value cancels): the node on it is told now when its notice will come
(a drain window before), and the machine goes out of service then. Putting
it back in service ends the maintenance.`,
		Example: `  sparecap machines set m-12 --out-of-service=true
  sparecap machines set m-12 --out-of-service=false
  sparecap machines set m-12 --maintenance-at 2026-12-14T02:00:00Z
  sparecap machines set m-12 --maintenance-at=`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			var req apiv1.UpdateMachineRequest
			if cmd.Flags().Changed("out-of-service") {
				req.OutOfService = &outOfService
			}
			if cmd.Flags().Changed("maintenance-at") {
				req.MaintenanceAt = &maintenanceAt
			}
			if req.OutOfService == nil && req.MaintenanceAt == nil {
				return errors.New("nothing to set: give --out-of-service=true|false or --maintenance-at TIME")
			}
			m, err := c.UpdateMachine(cmd.Context(), args[0], req)
			if err != nil {
				return fmt.Errorf("update machine %s: %w", args[0], err)
			}
			return s.printMachines(cmd, []apiv1.Machine{*m}, m)
		}),
	}
	set.Flags().BoolVar(&outOfService, "out-of-service", false, "take the machine out of service (true) or put it back (false)")
	set.Flags().StringVar(&maintenanceAt, "maintenance-at", "", "book the machine out for maintenance from this time (RFC 3339; empty cancels)")
	return set
}

// printMachines prints ms as a table, or v (the API's answer) as JSON or
// YAML.
func (s *state) printMachines(cmd *cobra.Command, ms []apiv1.Machine, v any) error {
	return s.print(cmd.OutOrStdout(), v, func(tw *tabwriter.Writer) {
		reasons := slices.ContainsFunc(ms, func(m apiv1.Machine) bool { return m.OutOfServiceReason != "" })
		head := []any{"ID", "REGION", "GPU_TYPE", "GPUS", "POOL", "STATE", "CLUSTER", "NODE"}
		if reasons {
			head = append(head, "REASON")
		}
		row(tw, head...)
		for _, m := range ms {
			cols := []any{m.MachineID, m.Region, m.GPUType, m.GPUs, m.Pool, m.State, orDash(m.ClusterID), orDash(m.NodeName)}
			if reasons {
				cols = append(cols, orDash(oneLine(m.OutOfServiceReason)))
			}
			row(tw, cols...)
		}
	})
}

func newReservationsCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "reservations",
		Aliases: []string{"reservation"},
		Short:   "Manage capacity reservations (admin)",
		Long: `Manage reservations: capacity bought by one project in one region and GPU
type. Machines join a reservation with 'machines add --reservation'. Idle
reserved GPUs are lent as preemptible capacity and reclaimed when the owner
needs them. Needs the admin token.`,
		Example: `  sparecap reservations create --project-id team-ml --region us-central-8 --gpu-type H100_SXM
  sparecap reservations list`,
	}
	var req apiv1.CreateReservationRequest
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a reservation",
		Long: `Create a reservation for a project. Its ID is generated unless --id is given.
Add machines to it with 'sparecap machines add --reservation <id>'.`,
		Example: `  sparecap reservations create --project-id team-ml --region us-central-8 --gpu-type H100_SXM --id res-ml-1`,
		Args:    cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			r, err := c.CreateReservation(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("create reservation: %w", err)
			}
			return s.printReservations(cmd, []apiv1.Reservation{*r}, r)
		}),
	}
	create.Flags().StringVar(&req.ProjectID, "project-id", "", "project that owns the reservation (required)")
	create.Flags().StringVar(&req.Region, "region", "", "region (required)")
	create.Flags().StringVar(&req.GPUType, "gpu-type", "", "GPU type (required)")
	create.Flags().StringVar(&req.ReservationID, "id", "", "reservation ID (default: generated)")
	for _, name := range []string{"project-id", "region", "gpu-type"} {
		_ = create.MarkFlagRequired(name)
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List reservations",
		Long: `List reservations with their machines, GPUs, and how many of those GPUs are
lent as preemptible capacity right now.`,
		Example: `  sparecap reservations list`,
		Args:    cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListReservations(cmd.Context())
			if err != nil {
				return fmt.Errorf("list reservations: %w", err)
			}
			return s.printReservations(cmd, list.Reservations, list)
		}),
	}
	cmd.AddCommand(create, list)
	return cmd
}

// printReservations prints rs as a table, or v (the API's answer) as JSON or
// YAML.
func (s *state) printReservations(cmd *cobra.Command, rs []apiv1.Reservation, v any) error {
	return s.print(cmd.OutOrStdout(), v, func(tw *tabwriter.Writer) {
		row(tw, "ID", "PROJECT", "REGION", "GPU_TYPE", "MACHINES", "GPUS", "LENT_PREEMPTIBLE", "AGE")
		for _, r := range rs {
			row(tw, r.ReservationID, r.ProjectID, r.Region, r.GPUType, r.Machines, r.GPUs, r.LentGPUs, s.age(r.CreatedAt))
		}
	})
}

// printToken shows a newly issued token, which the server never shows again.
func (s *state) printToken(cmd *cobra.Command, p *apiv1.Project) error {
	if err := s.print(cmd.OutOrStdout(), p, func(tw *tabwriter.Writer) {
		row(tw, "Project:", p.ProjectID)
		row(tw, "Token:", p.Token)
	}); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "Note: the token is shown only once; store it now (it cannot be retrieved later).")
	return nil
}
