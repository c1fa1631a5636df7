package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/simulate"
	"github.com/sparecap/sparecap/internal/termsafe"
)

// maxScenario bounds a scenario file.
const maxScenario = 1 << 20

// simulateArgs are simulate's flags.
type simulateArgs struct {
	tracePath, traceFormat, nodesPath, fleetPath string
	seed                                         uint64
	horizon                                      time.Duration
	progress                                     bool
}

func newSimulateCmd(s *state) *cobra.Command {
	var a simulateArgs
	cmd := &cobra.Command{
		Use:   "simulate SCENARIO",
		Short: "Replay demand through sparecap's own control plane on a virtual clock",
		Long: `Run a scenario (a fleet, on-demand clusters arriving and leaving, preemptible
tenants with their targets, a job model and one or two policies) through
sparecap's production controller, allocator, reclaim machine, step runner,
meter and price book on a virtual clock that jumps from one due time to the
next, against the simulated fleet. It needs no server and touches nothing:
the store is in memory.

It prints, per policy, what the operator saw (GPU-hours by use, lent out of
idle and out of reserved capacity, revenue, reclaims, on-demand requests
refused or waiting for a drain) and what each tenant got (GPU-hours
delivered, reclaims, work lost under the job model, cost against the same
useful work on demand). The same scenario and seed give the same output to
the byte. -o csv writes every figure, and the capacity over time, as rows
of policy,scope,name,metric,value.

With --trace the demand comes from a trace instead of the scenario's random
process: in sparecap's format, or (--trace-format) the pod list of Alibaba's
GPU cluster trace 2023 or the job list of its spot GPU trace 2026, whose GPUs
are summed per class and GPU type (a pod of any type, or of "A|B", goes at its
arrival to the first of those with room, cheapest first); --nodes reads the
fleet from the same trace's node list (keeping the scenario's prices). A run
whose demand was mostly refused says so first. See docs/planning.md.`,
		Example: `  sparecap simulate scenario.yaml
  sparecap simulate scenario.yaml --seed 2 --horizon 720h -o json
  sparecap simulate scenario.yaml --fleet /etc/sparecap/fleet.yaml
  sparecap simulate scenario.yaml --trace demand.csv -o csv > result.csv
  sparecap simulate scenario.yaml --trace-format alibaba-gpu-2023 --trace openb_pod_list_default.csv --nodes openb_node_list_gpu_node.csv`,
		PersistentPreRunE: allowCSV(s),
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, evs, err := a.load(cmd, args[0])
			if err != nil {
				return err
			}
			var report func(simulate.Progress)
			if a.progress || (!cmd.Flags().Changed("progress") && isTerminal(cmd.ErrOrStderr())) {
				report = progressBar(cmd.ErrOrStderr())
			}
			batchGC()
			c, err := simulate.Compare(cmd.Context(), sc, evs, report)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if s.output != outTable {
				warnAbout(cmd.ErrOrStderr(), c) // the table shows them itself
			}
			switch s.output {
			case outCSV:
				return c.WriteCSV(out)
			case outTable:
				return c.WriteTable(out)
			}
			return s.print(out, c, nil)
		},
	}
	cmd.Flags().StringVar(&a.tracePath, "trace", "", "demand from this trace instead of the scenario's random process")
	cmd.Flags().StringVar(&a.traceFormat, "trace-format", simulate.FormatSparecap, "format of --trace and --nodes: "+strings.Join(simulate.Formats, ", "))
	cmd.Flags().StringVar(&a.fleetPath, "fleet", "", "the fleet from this fleet file (the server's --fleet) instead of the scenario's")
	cmd.Flags().StringVar(&a.nodesPath, "nodes", "", "the fleet from this Alibaba node list (with an Alibaba --trace-format) instead of the scenario's pools")
	cmd.Flags().Uint64Var(&a.seed, "seed", 0, "seed of the run (default: the scenario's)")
	cmd.Flags().DurationVar(&a.horizon, "horizon", 0, "virtual time to cover (default: the scenario's)")
	cmd.Flags().BoolVar(&a.progress, "progress", false, "show progress on stderr (default: when stderr is a terminal)")
	return cmd
}

// load reads the scenario at path, changed as the flags say, and the
// demand to replay: the scenario's own, or the trace's.
func (a *simulateArgs) load(cmd *cobra.Command, path string) (simulate.Scenario, []simulate.Event, error) {
	sc, err := readScenario(path)
	if err != nil {
		return sc, nil, err
	}
	fl := cmd.Flags()
	if fl.Changed("seed") {
		sc.Seed = a.seed
	}
	if fl.Changed("horizon") {
		sc.Horizon.D = a.horizon
	}
	if a.fleetPath != "" {
		b, err := readBounded(a.fleetPath, maxScenario)
		if err != nil {
			return sc, nil, fmt.Errorf("read the fleet file: %w", err)
		}
		if sc.Fleet, err = fleet.Parse(b); err != nil {
			return sc, nil, fmt.Errorf("%s: %w", a.fleetPath, err)
		}
	}
	if a.nodesPath != "" {
		if err := fleetFromNodes(&sc, a.traceFormat, a.nodesPath); err != nil {
			return sc, nil, err
		}
	}
	if err := sc.Check(); err != nil {
		return sc, nil, fmt.Errorf("%s: %w", path, err)
	}
	evs := simulate.Generate(sc)
	if a.tracePath != "" {
		if evs, sc.Trace, err = readTrace(a.traceFormat, a.tracePath, sc.Fleet); err != nil {
			return sc, nil, err
		}
	}
	return sc, evs, nil
}

func readScenario(path string) (simulate.Scenario, error) {
	b, err := readBounded(path, maxScenario)
	if err != nil {
		return simulate.Scenario{}, fmt.Errorf("read the scenario: %w", err)
	}
	sc, err := simulate.Decode(b) // checked once the flags are applied
	if err != nil {
		return simulate.Scenario{}, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// fleetFromNodes replaces the scenario's pools with an Alibaba node
// list's, keeping its prices.
func fleetFromNodes(sc *simulate.Scenario, format, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read the node list: %w", err)
	}
	defer f.Close()
	fl, err := simulate.ReadAlibabaNodes(format, f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sc.Fleet.Pools = fl.Pools
	return nil
}

func readTrace(format, path string, fl fleet.File) ([]simulate.Event, *simulate.TraceAsk, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read the trace: %w", err)
	}
	defer f.Close()
	evs, ask, err := simulate.ReadTraceAs(format, f, fl)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return evs, ask, nil
}

// readBounded reads a file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

// warnAbout writes a comparison's warnings where a person sees them.
func warnAbout(w io.Writer, c *simulate.Comparison) {
	for _, r := range c.Runs {
		for _, m := range r.Warnings {
			fmt.Fprintf(w, "WARNING (%s): %s.\n", termsafe.Escape(r.Policy.Name), termsafe.Escape(m))
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar draws a run's progress on one line of w.
func progressBar(w io.Writer) func(simulate.Progress) {
	return func(p simulate.Progress) {
		const width = 30
		done := int(int64(width) * int64(p.Done) / int64(max(p.Total, 1)))
		fmt.Fprintf(w, "\r%-14s [%s%s] %3d%%  %s of %s", p.Policy, strings.Repeat("#", done), strings.Repeat(".", width-done),
			100*int64(p.Done)/int64(max(p.Total, 1)), p.Done.Round(time.Second), p.Total)
		if p.Done >= p.Total {
			fmt.Fprintln(w)
		}
	}
}

// batchGC lets the heap grow to five times what is live between
// collections, unless GOGC says otherwise: a simulation is a batch whose
// live heap is small next to what it allocates, and the collector took a
// quarter of its CPU at the default.
func batchGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
