package simulate

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"

	"github.com/sparecap/sparecap/internal/csvcell"
)

// Comparison is a scenario's runs: its policy, and its second one if it
// has one, on the same demand.
type Comparison struct {
	Seed    uint64   `json:"seed"`
	Horizon Duration `json:"horizon"`
	Events  int      `json:"demand_events"`
	// GangGPUs is the scenario's largest gang (jobs.gang_gpus or its mix;
	// 0: none).
	GangGPUs int `json:"gang_gpus,omitempty"`
	// Trace is what the trace's rows ask, when the demand is a trace's.
	Trace *TraceAsk `json:"trace,omitempty"`
	Runs  []*Result `json:"runs"`
}

// Compare runs evs under the scenario's policy and, if set, its Compare
// policy.
func Compare(ctx context.Context, s Scenario, evs []Event, progress func(Progress)) (*Comparison, error) {
	c := &Comparison{Seed: s.Seed, Horizon: s.Horizon, Events: len(evs), GangGPUs: s.Jobs.largestGang(), Trace: s.Trace}
	pols := []Policy{s.Policy}
	if s.Compare != nil {
		pols = append(pols, *s.Compare)
	}
	// The policies' runs share nothing (each has its own store, fleet and
	// control plane): they run at once, each as deterministic as alone.
	c.Runs = make([]*Result, len(pols))
	errs := make([]error, len(pols))
	var mu sync.Mutex
	report := progress
	if progress != nil {
		report = func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			progress(p)
		}
	}
	var wg sync.WaitGroup
	for i, p := range pols {
		wg.Go(func() {
			c.Runs[i], errs[i] = Run(ctx, s, evs, p, report)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", pols[i].Name, err)
		}
	}
	return c, nil
}

// warned: a run has warnings.
func (c *Comparison) warned() bool {
	for _, r := range c.Runs {
		if len(r.Warnings) > 0 {
			return true
		}
	}
	return false
}

// WriteJSON writes the comparison as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(c)
}

// WriteTable writes the summary a person reads: the operator's figures
// with a column per policy, then each tenant's.
func (c *Comparison) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Seed %d, horizon %s, %d demand events.\n", c.Seed, c.Horizon.D, c.Events)
	if t := c.Trace; t != nil {
		fmt.Fprintf(tw, "The trace's %d rows with GPUs ask %s standard and %s preemptible GPU-hours as they are; the replay asks them in whole 8-GPU nodes.\n",
			t.Rows, num(t.StandardGPUh), num(t.PreemptibleGPUh))
	}
	fmt.Fprintln(tw)
	for _, r := range c.Runs {
		for _, w := range r.Warnings {
			fmt.Fprintf(tw, "WARNING (%s): %s.\n", r.Policy.Name, w)
		}
	}
	if c.warned() {
		fmt.Fprintln(tw)
	}
	head := "OPERATOR"
	for _, r := range c.Runs {
		head += "\t" + r.Policy.Name
	}
	fmt.Fprintln(tw, head)
	for _, m := range operatorMetrics {
		if m.rare && !slices.ContainsFunc(c.Runs, func(r *Result) bool { return m.value(&r.Operator) != "0" }) {
			continue // a row for a feature the scenario does not use
		}
		line := m.name
		for _, r := range c.Runs {
			line += "\t" + m.value(&r.Operator)
		}
		fmt.Fprintln(tw, line)
	}
	fmt.Fprintln(tw)
	gang := func(string) string { return "" } // the gang column, with gangs
	if c.GangGPUs > 0 {
		gang = func(s string) string { return s + "\t" }
	}
	fmt.Fprintln(tw, "TENANT\tPOLICY\tTARGET\tDELIVERED GPU-H\tRECLAIMS\tLOST GPU-H\t"+gang("GANG WAIT GPU-H")+"USEFUL GPU-H\tCOST\tON-DEMAND COST\tSAVED")
	for i := range c.Runs[0].Tenants {
		for _, r := range c.Runs {
			if i >= len(r.Tenants) {
				continue
			}
			t := r.Tenants[i]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s%s\t%s\t%s\t%s%%\n", t.Cluster, r.Policy.Name, t.TargetGPUs, num(t.DeliveredGPUh), t.Reclaims,
				num(t.LostGPUh), gang(num(t.GangWaitGPUh)), num(t.UsefulGPUh), t.Cost, t.OnDemandCost, num(t.SavingsPercent))
		}
	}
	return tw.Flush()
}

// operatorMetrics are the rows of the operator's table and CSV.
var operatorMetrics = []struct {
	name, key string
	value     func(*Operator) string
	// csv, if set, is the value in the CSV (seconds, not "1m30s").
	csv func(*Operator) string
	// rare: the table shows the row only when a run's value is not 0.
	rare bool
}{
	{"Fleet GPU-hours", "fleet_gpu_hours", func(o *Operator) string { return num(o.FleetGPUh) }, nil, false},
	{"Standard GPU-hours asked", "asked_standard_gpu_hours", func(o *Operator) string { return num(o.AskedStandardGPUh) }, nil, false},
	{"Preemptible GPU-hours asked", "asked_preemptible_gpu_hours", func(o *Operator) string { return num(o.AskedPreemptibleGPUh) }, nil, false},
	{"Standard GPU-hours", "standard_gpu_hours", func(o *Operator) string { return num(o.StandardGPUh) }, nil, false},
	{"Preemptible GPU-hours", "preemptible_gpu_hours", func(o *Operator) string { return num(o.PreemptibleGPUh) }, nil, false},
	{"  lent from idle on-demand", "lent_from_idle_gpu_hours", func(o *Operator) string { return num(o.LentFromIdleGPUh) }, nil, false},
	{"  lent from idle reservations", "lent_from_reserved_gpu_hours", func(o *Operator) string { return num(o.LentFromReserveGPUh) }, nil, false},
	{"In transit GPU-hours", "transit_gpu_hours", func(o *Operator) string { return num(o.TransitGPUh) }, nil, false},
	{"Idle GPU-hours", "idle_gpu_hours", func(o *Operator) string { return num(o.IdleGPUh) }, nil, false},
	{"Standard revenue", "standard_revenue", func(o *Operator) string { return o.StandardRevenue }, nil, false},
	{"Preemptible revenue", "preemptible_revenue", func(o *Operator) string { return o.PreemptibleRevenue }, nil, false},
	{"Reclaims", "reclaims", func(o *Operator) string { return strconv.Itoa(o.Reclaims) }, nil, false},
	{"  told ahead", "reclaims_told_ahead", func(o *Operator) string { return strconv.Itoa(o.ReclaimsToldAhead) }, nil, true},
	{"On-demand requests", "on_demand_requests", func(o *Operator) string { return strconv.Itoa(o.OnDemandRequests) }, nil, false},
	{"  refused (no capacity)", "on_demand_refused", func(o *Operator) string { return strconv.Itoa(o.Refused) }, nil, false},
	{"  waited for a drain", "on_demand_waited_for_a_drain", func(o *Operator) string { return strconv.Itoa(o.WaitedForDrain) }, nil, false},
	{"  wait p50", "on_demand_wait_p50_seconds", func(o *Operator) string { return o.WaitP50.D.String() }, func(o *Operator) string { return num(o.WaitP50.D.Seconds()) }, false},
	{"  wait max", "on_demand_wait_max_seconds", func(o *Operator) string { return o.WaitMax.D.String() }, func(o *Operator) string { return num(o.WaitMax.D.Seconds()) }, false},
}

// WriteCSV writes every figure as a row of policy,scope,name,metric,value
// (scope operator, tenant, pool or series), for a spreadsheet's pivot.
func (c *Comparison) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"policy", "scope", "name", "metric", "value"})
	for _, r := range c.Runs {
		// Names come from the scenario, which anyone may have written:
		// neutralised as formulas (csvcell).
		p := csvcell.Text(r.Policy.Name)
		for _, m := range operatorMetrics {
			v := m.value
			if m.csv != nil {
				v = m.csv
			}
			cw.Write([]string{p, "operator", "", m.key, v(&r.Operator)})
		}
		for _, t := range r.Tenants {
			for _, kv := range [][2]string{{"target_gpus", strconv.Itoa(t.TargetGPUs)}, {"weight", strconv.Itoa(t.Weight)}, {"delivered_gpu_hours", num(t.DeliveredGPUh)},
				{"reclaims", strconv.Itoa(t.Reclaims)}, {"nodes_stopped", strconv.Itoa(t.StoppedNodes)}, {"lost_gpu_hours", num(t.LostGPUh)}, {"restart_gpu_hours", num(t.RestartGPUh)},
				{"checkpoint_gpu_hours", num(t.CheckpointGPUh)}, {"useful_gpu_hours", num(t.UsefulGPUh)}, {"cost", t.Cost},
				{"on_demand_cost_of_useful_work", t.OnDemandCost}, {"savings_percent", num(t.SavingsPercent)}} {
				cw.Write([]string{p, "tenant", csvcell.Text(t.Cluster), kv[0], kv[1]})
			}
			if c.GangGPUs > 0 {
				cw.Write([]string{p, "tenant", csvcell.Text(t.Cluster), "gang_wait_gpu_hours", num(t.GangWaitGPUh)})
			}
			if t.JobsCompleted > 0 {
				for _, kv := range [][2]string{{"jobs_completed", strconv.Itoa(t.JobsCompleted)}, {"job_hours_mean", num(t.JobHoursMean)},
					{"job_hours_p90", num(t.JobHoursP90)}, {"job_hours_on_demand", num(t.JobHoursOnDemand)}} {
					cw.Write([]string{p, "tenant", csvcell.Text(t.Cluster), kv[0], kv[1]})
				}
			}
		}
		for _, w := range r.Warnings {
			cw.Write([]string{p, "warning", "", "message", csvcell.Text(w)})
		}
		if t := c.Trace; t != nil {
			for _, kv := range [][2]string{{"rows_with_gpus", strconv.Itoa(t.Rows)}, {"standard_gpu_hours", num(t.StandardGPUh)}, {"preemptible_gpu_hours", num(t.PreemptibleGPUh)}} {
				cw.Write([]string{p, "trace", "", kv[0], kv[1]})
			}
		}
		for _, pr := range r.Pools {
			name := pr.Region + "/" + pr.GPUType
			if pr.Reserved {
				name += "/reserved"
			}
			cw.Write([]string{p, "pool", csvcell.Text(name), "reclaims", strconv.Itoa(pr.Reclaims)})
		}
		for _, x := range r.Series {
			at := strconv.FormatInt(int64(x.At.D.Seconds()), 10)
			for _, kv := range [][2]string{{"standard_gpus", strconv.Itoa(x.Standard)}, {"preemptible_gpus", strconv.Itoa(x.Preemptible)},
				{"transit_gpus", strconv.Itoa(x.Transit)}, {"idle_gpus", strconv.Itoa(x.Idle)}, {"reclaims", strconv.Itoa(x.Reclaims)}} {
				cw.Write([]string{p, "series", at, kv[0], kv[1]})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// num prints a figure with at most three decimals.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
