package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Result is what one policy's run did. Every figure is computed from what
// the control plane stored (nodes, usage records, the price book), with
// integer GPU-seconds and exact money, so a seed gives the same bytes.
type Result struct {
	Policy   Policy         `json:"policy"`
	Horizon  Duration       `json:"horizon"`
	Tenants  []Tenant       `json:"tenants"`
	Operator Operator       `json:"operator"`
	Series   []Sample       `json:"series"`
	Run      RunStats       `json:"run"`
	Pools    []PoolReclaims `json:"reclaims_by_pool"`
	// Warnings say what the figures hide: demand mostly refused, or cut
	// by the horizon.
	Warnings []string `json:"warnings,omitempty"`
}

// Tenant is one preemptible cluster's outcome.
type Tenant struct {
	Cluster       string  `json:"cluster"`
	Region        string  `json:"region"`
	GPUType       string  `json:"gpu_type"`
	TargetGPUs    int     `json:"target_gpus"`
	Weight        int     `json:"weight"`
	DeliveredGPUh float64 `json:"delivered_gpu_hours"`
	Reclaims      int     `json:"reclaims"`
	// ToldAhead counts the reclaims whose node was told its notice ahead
	// (a booking claimed its machine), in time for a checkpoint.
	ToldAhead int `json:"reclaims_told_ahead,omitempty"`
	// StoppedNodes counts the nodes whose work the reclaims stopped: a
	// reclaimed node waiting for a gang stops none, one of a gang stops
	// every member.
	StoppedNodes    int     `json:"nodes_stopped"`
	LostGPUh        float64 `json:"lost_gpu_hours"`
	RestartGPUh     float64 `json:"restart_gpu_hours"`
	CheckpointGPUh  float64 `json:"checkpoint_gpu_hours"`
	UsefulGPUh      float64 `json:"useful_gpu_hours"`
	Cost            string  `json:"cost"`
	OnDemandCost    string  `json:"on_demand_cost_of_useful_work"`
	SavingsPercent  float64 `json:"savings_percent"`
	EffectiveFactor float64 `json:"cost_per_useful_gpu_hour_vs_on_demand"`
	// With jobs.gpu_hours: the jobs that ended, their mean and p90 time,
	// and the time one takes on the target's GPUs on demand.
	JobsCompleted int `json:"jobs_completed,omitempty"`
	// With jobs.gang_gpus: GPU-hours its ready nodes waited for a gang
	// (fewer of them than a gang needs, or the rest of one).
	GangWaitGPUh     float64 `json:"gang_wait_gpu_hours,omitempty"`
	JobHoursMean     float64 `json:"job_hours_mean,omitempty"`
	JobHoursP90      float64 `json:"job_hours_p90,omitempty"`
	JobHoursOnDemand float64 `json:"job_hours_on_demand,omitempty"`
}

// Operator is the fleet's outcome.
type Operator struct {
	FleetGPUh float64 `json:"fleet_gpu_hours"`
	// What the demand asked within the horizon, in the whole nodes it
	// asked for.
	AskedStandardGPUh    float64  `json:"asked_standard_gpu_hours"`
	AskedPreemptibleGPUh float64  `json:"asked_preemptible_gpu_hours"`
	StandardGPUh         float64  `json:"standard_gpu_hours"`
	PreemptibleGPUh      float64  `json:"preemptible_gpu_hours"`
	TransitGPUh          float64  `json:"transit_gpu_hours"`
	IdleGPUh             float64  `json:"idle_gpu_hours"`
	LentFromIdleGPUh     float64  `json:"lent_from_idle_gpu_hours"`
	LentFromReserveGPUh  float64  `json:"lent_from_reserved_gpu_hours"`
	StandardRevenue      string   `json:"standard_revenue"`
	PreemptibleRevenue   string   `json:"preemptible_revenue"`
	Reclaims             int      `json:"reclaims"`
	ReclaimsToldAhead    int      `json:"reclaims_told_ahead,omitempty"`
	OnDemandRequests     int      `json:"on_demand_requests"`
	Refused              int      `json:"on_demand_refused"`
	WaitedForDrain       int      `json:"on_demand_waited_for_a_drain"`
	WaitP50              Duration `json:"on_demand_wait_p50"`
	WaitMax              Duration `json:"on_demand_wait_max"`
}

// PoolReclaims counts reclaims in one pool.
type PoolReclaims struct {
	Region   string `json:"region"`
	GPUType  string `json:"gpu_type"`
	Reserved bool   `json:"reserved"`
	Reclaims int    `json:"reclaims"`
}

// Sample is the fleet's GPUs by use at one time.
type Sample struct {
	At          Duration `json:"at"`
	Standard    int      `json:"standard"`
	Preemptible int      `json:"preemptible"`
	Transit     int      `json:"transit"`
	Idle        int      `json:"idle"`
	// Reclaims started since the sample before (at the first: none).
	Reclaims int `json:"reclaims"`
}

// RunStats say what the run took, in virtual terms only.
type RunStats struct {
	Ticks      int `json:"ticks"`
	Nodes      int `json:"nodes"`
	StepErrors int `json:"step_errors"`
}

// samples is how many points Series has.
const samples = 120

// span is a node's life, clipped to the horizon: it holds its machine
// over [from, to), from the start of its provisioning (a pending node
// waits for a machine still draining, and holds none) to its removal,
// and is ready over [ready, stop).
type span struct {
	n                     *domain.Node
	from, to, ready, stop time.Time
	// told: the node's reclaim was told ahead, in time for a checkpoint
	// (tells.ahead).
	told bool
}

func (w *world) result(ctx context.Context) (*Result, error) {
	return outcome{st: w.st, sc: w.sc, pol: w.pol, evs: w.evs, refused: w.refused, told: w.told}.result(ctx, RunStats{Ticks: w.ticks, StepErrors: w.errs})
}

// Outcome is the Result of sc under pol as the control plane behind st
// stored it: a simulator's run, or a server that ran the same demand evs
// (refused counts the on-demand requests it refused for capacity; Run
// holds only the node count). The simulator's fidelity test compares the
// two.
func Outcome(ctx context.Context, st store.Store, sc Scenario, pol Policy, evs []Event, refused int) (*Result, error) {
	return outcome{st: st, sc: sc, pol: pol, evs: evs, refused: refused}.result(ctx, RunStats{})
}

// outcome reads a run's Result from what its control plane stored.
type outcome struct {
	st      store.Store
	sc      Scenario
	pol     Policy
	evs     []Event
	refused int
	// told are the notices the control plane told ahead (none for a
	// server's run).
	told tells
	// clusters caches the clusters' records (see cluster).
	clusters map[string]domain.Cluster
}

// cluster is cluster id's record, deleted or not.
func (w outcome) cluster(ctx context.Context, id string) (domain.Cluster, error) {
	if c, ok := w.clusters[id]; ok {
		return c, nil
	}
	c, err := w.st.GetClusterRecord(ctx, id)
	if err != nil {
		return c, fmt.Errorf("cluster %s: %w", id, err)
	}
	w.clusters[id] = c
	return c, nil
}

// tenant: a preemptible tenant's cluster (its one standard node, which
// every cluster holds, is not an on-demand request).
func tenant(c domain.Cluster) bool { return c.DesiredPreemptibleGPUs > 0 }

func (w outcome) result(ctx context.Context, run RunStats) (*Result, error) {
	w.clusters = map[string]domain.Cluster{}
	end := Epoch.Add(w.sc.Horizon.D)
	nodes, err := w.st.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		return nil, err
	}
	machines, err := w.st.ListMachines(ctx)
	if err != nil {
		return nil, err
	}
	mach := map[string]*domain.Machine{}
	fleetGPUs := 0
	for i := range machines {
		mach[machines[i].ID] = &machines[i]
		fleetGPUs += machines[i].GPUs
	}
	spans := make([]span, len(nodes))
	for i := range nodes {
		spans[i] = spanOf(&nodes[i], end)
		spans[i].told = w.told.ahead(&nodes[i], w.sc.Jobs.CheckpointCost.D)
	}
	run.Nodes = len(nodes)
	r := &Result{Policy: w.pol, Horizon: w.sc.Horizon, Run: run, Tenants: []Tenant{}, Pools: []PoolReclaims{}}
	lines, err := w.priced(ctx, end)
	if err != nil {
		return nil, err
	}
	if err := w.tenants(ctx, r, spans, lines); err != nil {
		return nil, err
	}
	if err := w.operator(ctx, r, spans, mach, fleetGPUs, lines, end); err != nil {
		return nil, err
	}
	r.Series = series(spans, fleetGPUs, w.sc.Horizon.D)
	a := askedOf(w.evs, w.sc.Horizon.D)
	r.Operator.AskedStandardGPUh, r.Operator.AskedPreemptibleGPUh = hours(a.std), hours(a.pre)
	r.Warnings = a.warnings(&r.Operator, poolTypes(machines), w.sc.Horizon.D)
	return r, nil
}

// poolTypes are the GPU types of machines.
func poolTypes(ms []domain.Machine) []string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m.GPUType) {
			out = append(out, m.GPUType)
		}
	}
	return out
}

func spanOf(n *domain.Node, end time.Time) span {
	clip := func(t time.Time) time.Time {
		if t.IsZero() || t.After(end) {
			return end
		}
		return t
	}
	s := span{n: n, from: clip(n.ProvisioningAt), to: clip(n.RemovedAt)}
	if n.ProvisioningAt.IsZero() {
		s.from = s.to
	}
	if !n.ReadyAt.IsZero() && n.ReadyAt.Before(end) {
		s.ready = n.ReadyAt
		s.stop = s.to
		if !n.DrainStartedAt.IsZero() {
			s.stop = clip(n.DrainStartedAt)
		}
	}
	return s
}

// readySecs is a span's ready GPU-seconds.
func (s span) readySecs() int64 {
	if s.ready.IsZero() {
		return 0
	}
	return int64(s.stop.Sub(s.ready)/time.Second) * int64(s.n.GPUs)
}

// reclaimed: the operator took the node back (not the tenant).
func reclaimed(n *domain.Node) bool {
	if n.Class != domain.Preemptible || n.DrainStartedAt.IsZero() || n.ReadyAt.IsZero() {
		return false
	}
	switch n.DrainCause {
	case domain.CausePreempted, domain.CauseFairShare, domain.CauseOutOfService:
		return true
	}
	return false
}

// priced are the usage lines of the horizon, by cluster.
type pricedUsage struct {
	book *billing.Book
	// byCl: every line of a cluster; preByCl: its preemptible ones.
	byCl, preByCl map[string]*billing.Totals
	byClass       map[domain.ComputeClass]*billing.Totals
}

func (w outcome) priced(ctx context.Context, end time.Time) (*pricedUsage, error) {
	prices, err := w.st.ListPrices(ctx)
	if err != nil {
		return nil, err
	}
	book, err := billing.NewBook(prices)
	if err != nil {
		return nil, err
	}
	recs, err := w.st.ListUsage(ctx, store.UsageFilter{From: Epoch, To: end})
	if err != nil {
		return nil, err
	}
	p := &pricedUsage{book: book, byCl: map[string]*billing.Totals{}, preByCl: map[string]*billing.Totals{},
		byClass: map[domain.ComputeClass]*billing.Totals{domain.Standard: {}, domain.Preemptible: {}}}
	add := func(by map[string]*billing.Totals, l billing.Line) {
		t := by[l.Record.ClusterID]
		if t == nil {
			t = &billing.Totals{}
			by[l.Record.ClusterID] = t
		}
		t.Add(l)
	}
	book.Price(recs, Epoch, end, func(l billing.Line) {
		add(p.byCl, l)
		if l.Record.Class == domain.Preemptible {
			add(p.preByCl, l)
		}
		p.byClass[l.Record.Class].Add(l)
	})
	return p, nil
}

// tenants works out each preemptible cluster's outcome under the job
// model.
func (w outcome) tenants(ctx context.Context, r *Result, spans []span, p *pricedUsage) error {
	type acc struct {
		t         Tenant
		delivered int64
		nodes     []*span
	}
	by := map[string]*acc{}
	var order []string
	j := w.sc.Jobs
	end := Epoch.Add(w.sc.Horizon.D)
	saveAtNotice := savesAtNotice(j, w.pol)
	for i := range spans {
		n := spans[i].n
		a := by[n.ClusterID]
		if a == nil {
			c, err := w.cluster(ctx, n.ClusterID)
			if err != nil {
				return err
			}
			if !tenant(c) {
				continue
			}
			// Listed even if no preemptible node of it ever came.
			a = &acc{t: Tenant{Cluster: c.Name, Region: c.Region, GPUType: c.GPUType, TargetGPUs: c.DesiredPreemptibleGPUs, Weight: c.Weight}}
			by[n.ClusterID] = a
			order = append(order, n.ClusterID)
		}
		if n.Class != domain.Preemptible {
			continue
		}
		a.delivered += spans[i].readySecs()
		a.nodes = append(a.nodes, &spans[i])
		if reclaimed(n) && !n.DrainStartedAt.After(end) {
			a.t.Reclaims++
			if spans[i].told {
				a.t.ToldAhead++
			}
		}
	}
	for _, id := range order {
		a := by[id]
		t := a.t
		tj := j.JobsOf(t.Cluster)
		jr := newGangRunner(tj, saveAtNotice).run(a.nodes, end)
		wait := a.delivered - jr.running
		useful := max(jr.running-jr.lost-jr.restart-jr.checkpoint, 0)
		t.DeliveredGPUh, t.LostGPUh, t.RestartGPUh, t.CheckpointGPUh, t.UsefulGPUh =
			hours(a.delivered), hours(jr.lost), hours(jr.restart), hours(jr.checkpoint), hours(useful)
		if tj.GangGPUs > 0 {
			t.GangWaitGPUh = hours(wait)
		}
		t.StoppedNodes = jr.stopped
		cost := billing.Money{}
		if tot := p.preByCl[id]; tot != nil {
			cost = tot.Amount
		}
		rate, _ := p.book.OnDemandRate(t.Region, t.GPUType, Epoch.Unix())
		od := billing.AtFullRate(rate, uint64(useful))
		t.Cost, t.OnDemandCost = cost.Round(2), od.Round(2)
		if j.GPUHours > 0 {
			t.jobTimes(jr.work, j.GPUHours)
		}
		if odF, _ := od.Rat().Float64(); odF > 0 {
			c, _ := cost.Rat().Float64()
			t.SavingsPercent = round(100 * (1 - c/odF))
			t.EffectiveFactor = round(c / odF)
		}
		r.Tenants = append(r.Tenants, t)
	}
	sort.SliceStable(r.Tenants, func(i, j int) bool { return r.Tenants[i].Cluster < r.Tenants[j].Cluster })
	return nil
}

// operator works out the fleet's outcome.
func (w outcome) operator(ctx context.Context, r *Result, spans []span, mach map[string]*domain.Machine, fleetGPUs int, p *pricedUsage, end time.Time) error {
	var std, pre, occupied, fromIdle, fromRsv int64
	pools := map[PoolReclaims]int{}
	firstAsk := map[string]time.Time{}
	lastReady := map[string]time.Time{}
	op := &r.Operator
	for _, s := range spans {
		n := s.n
		occupied += int64(s.to.Sub(s.from)/time.Second) * int64(n.GPUs)
		ready := s.readySecs()
		m := mach[n.MachineID]
		if n.Class == domain.Standard {
			std += ready
			c, err := w.cluster(ctx, n.ClusterID)
			if err != nil {
				return err
			}
			if at, ok := firstAsk[n.ClusterID]; !tenant(c) && (!ok || n.CreatedAt.Before(at)) {
				firstAsk[n.ClusterID] = n.CreatedAt
			}
		} else {
			pre += ready
			if m != nil && m.ReservationID != "" {
				fromRsv += ready
			} else {
				fromIdle += ready
			}
		}
		if reclaimed(n) && !n.DrainStartedAt.After(end) {
			op.Reclaims++
			if s.told {
				op.ReclaimsToldAhead++
			}
			k := PoolReclaims{Region: m.Region, GPUType: m.GPUType, Reserved: m.ReservationID != ""}
			pools[k]++
		}
	}
	// A standard cluster waited from its first nodes' creation until the
	// last of them was ready.
	for _, s := range spans {
		n := s.n
		if n.Class == domain.Standard && n.CreatedAt.Equal(firstAsk[n.ClusterID]) && !n.ReadyAt.IsZero() && n.ReadyAt.After(lastReady[n.ClusterID]) {
			lastReady[n.ClusterID] = n.ReadyAt
		}
	}
	var waits []time.Duration
	for id, at := range firstAsk {
		if rd, ok := lastReady[id]; ok {
			waits = append(waits, rd.Sub(at))
		}
	}
	slices.Sort(waits)
	provision := 20 * time.Second // sim.DefaultProvisionTime
	for _, d := range waits {
		if d > provision {
			op.WaitedForDrain++
		}
	}
	if len(waits) > 0 {
		op.WaitP50, op.WaitMax = Duration{waits[len(waits)/2]}, Duration{waits[len(waits)-1]}
	}
	total := int64(fleetGPUs) * int64(w.sc.Horizon.D/time.Second)
	op.FleetGPUh, op.StandardGPUh, op.PreemptibleGPUh = hours(total), hours(std), hours(pre)
	op.TransitGPUh, op.IdleGPUh = hours(occupied-std-pre), hours(total-occupied)
	op.LentFromIdleGPUh, op.LentFromReserveGPUh = hours(fromIdle), hours(fromRsv)
	op.StandardRevenue = p.byClass[domain.Standard].Amount.Round(2)
	op.PreemptibleRevenue = p.byClass[domain.Preemptible].Amount.Round(2)
	op.OnDemandRequests = len(firstAsk) + w.refused
	op.Refused = w.refused
	for k, v := range pools {
		k.Reclaims = v
		r.Pools = append(r.Pools, k)
	}
	slices.SortFunc(r.Pools, func(a, b PoolReclaims) int {
		return strings.Compare(a.Region+"/"+a.GPUType+fmt.Sprint(a.Reserved), b.Region+"/"+b.GPUType+fmt.Sprint(b.Reserved))
	})
	return nil
}

// series samples the fleet's GPUs by use.
func series(spans []span, fleetGPUs int, horizon time.Duration) []Sample {
	out := make([]Sample, samples+1)
	for k := range out {
		at := horizon * time.Duration(k) / samples
		out[k].At = Duration{at.Round(time.Second)}
	}
	end := Epoch.Add(horizon)
	for _, s := range spans {
		if reclaimed(s.n) && s.n.DrainStartedAt.After(Epoch) && !s.n.DrainStartedAt.After(end) {
			// The first sample at or after the notice.
			k := int((s.n.DrainStartedAt.Sub(Epoch)*samples + horizon - 1) / horizon)
			out[min(k, samples)].Reclaims++
		}
		for k := range out {
			t := Epoch.Add(out[k].At.D)
			if !t.Before(end) {
				t = end.Add(-time.Nanosecond) // the last sample: what is there at the end
			}
			switch {
			case t.Before(s.from) || !t.Before(s.to):
			case !s.ready.IsZero() && !t.Before(s.ready) && t.Before(s.stop) && s.n.Class == domain.Standard:
				out[k].Standard += s.n.GPUs
			case !s.ready.IsZero() && !t.Before(s.ready) && t.Before(s.stop):
				out[k].Preemptible += s.n.GPUs
			default:
				out[k].Transit += s.n.GPUs
			}
		}
	}
	for k := range out {
		out[k].Idle = fleetGPUs - out[k].Standard - out[k].Preemptible - out[k].Transit
	}
	return out
}

func hours(gpuSeconds int64) float64 { return round(float64(gpuSeconds) / 3600) }

// round keeps three decimals, so that the output is short and stable.
func round(f float64) float64 {
	if f < 0 {
		return -round(-f)
	}
	return float64(int64(f*1000+0.5)) / 1000
}
