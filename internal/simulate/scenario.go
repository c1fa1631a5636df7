package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
)

// Scenario is what a simulation runs: the file `sparecap simulate`
// reads (YAML or JSON; see docs/planning.md).
type Scenario struct {
	// Seed of every random draw (demand, the controller's jitter and
	// identifiers).
	Seed uint64 `json:"seed"`
	// Horizon is how much virtual time the run covers.
	Horizon Duration `json:"horizon"`
	// Fleet is a fleet file's content (pools and prices).
	Fleet fleet.File `json:"fleet"`
	// OnDemand is the on-demand demand process of every on-demand pool;
	// unused when the demand comes from a trace.
	OnDemand OnDemand `json:"on_demand"`
	// Tenants are the preemptible tenants; unused with a trace.
	Tenants Tenants `json:"tenants"`
	// Jobs is the job model the work lost is counted with.
	Jobs Jobs `json:"jobs"`
	// Policy is the control plane's configuration.
	Policy Policy `json:"policy"`
	// Compare, if set, is a second policy run on the same demand.
	Compare *Policy `json:"compare,omitempty"`
	// Trace, set by whoever read the demand from a trace (not a field of
	// the file), is what the trace's rows ask, shown beside the results.
	Trace *TraceAsk `json:"-"`
}

// OnDemand: standard clusters arrive in each on-demand pool as a Poisson
// process and live an exponentially distributed time.
type OnDemand struct {
	ArrivalsPerHour float64  `json:"arrivals_per_hour"`
	MeanLifetime    Duration `json:"mean_lifetime"`
	// GPUs are the sizes a cluster is drawn from, uniformly.
	GPUs []int `json:"gpus"`
	// BookedAhead, if set, books every on-demand cluster this long before
	// it starts (starts_at; docs/concepts.md "Capacity booked ahead"):
	// the control plane then knows, and tells, which preemptible nodes
	// its start will take back.
	BookedAhead Duration `json:"booked_ahead,omitempty"`
}

// Tenants: Count preemptible clusters in every region and GPU type of the
// fleet, each with a target of TargetGPUs for the whole horizon, and the
// weights of their fair shares of spare capacity (tenant i has
// Weights[i mod len]; default 1).
type Tenants struct {
	Count      int   `json:"count"`
	TargetGPUs int   `json:"target_gpus"`
	Weights    []int `json:"weights,omitempty"`
	// PreemptibleGPUTypes, if set, spreads every tenant's target over
	// its own GPU type, then these types of its region in this order
	// (the cluster's preemptible_gpu_types).
	PreemptibleGPUTypes []string `json:"preemptible_gpu_types,omitempty"`
}

// Jobs is the job every preemptible node runs: it checkpoints every
// CheckpointInterval (each taking CheckpointCost), exits ExitAfterNotice
// after its notice (SIGTERM), loses what it did since its last
// checkpoint at a reclaim unless CheckpointAtNotice (and the checkpoint
// fits the drain window), and pays RestartCost on the node that
// replaces it.
type Jobs struct {
	// GPUHours, if set, is the size of the jobs each tenant runs one after
	// another on its preemptible nodes: the result then tells how many
	// ended and how long each took.
	GPUHours           float64  `json:"gpu_hours"`
	CheckpointInterval Duration `json:"checkpoint_interval"`
	CheckpointCost     Duration `json:"checkpoint_cost"`
	RestartCost        Duration `json:"restart_cost"`
	ExitAfterNotice    Duration `json:"exit_after_notice"`
	CheckpointAtNotice bool     `json:"checkpoint_at_notice"`
	// CheckpointAhead: a job told its notice ahead (its node's
	// preempt_at, at least CheckpointCost before the notice) checkpoints
	// so that the checkpoint ends at the notice, and loses nothing to the
	// reclaim (as `sparecap run --checkpoint-ahead` asks it to).
	CheckpointAhead bool `json:"checkpoint_ahead,omitempty"`
	// GangGPUs, if set, is the size of a gang: a tenant's jobs run on
	// gangs of this many GPUs formed from its ready preemptible nodes (a
	// node left over waits for the next gang), and a reclaim of one node
	// stops its whole gang (every member loses its work since the gang's
	// last checkpoint and pays the restart). 0: each node runs alone.
	GangGPUs int `json:"gang_gpus,omitempty"`
	// Mix, if set, gives tenants different jobs: each tenant runs one
	// class of it (by its cluster's name, JobsOf), which sets its gang
	// size and checkpoint interval over the ones above.
	Mix []JobClass `json:"mix,omitempty"`
}

// JobClass is one kind of job of a mix.
type JobClass struct {
	GangGPUs           int      `json:"gang_gpus"`
	CheckpointInterval Duration `json:"checkpoint_interval"`
}

// largestGang is the largest gang of j and its mix, in GPUs.
func (j Jobs) largestGang() int {
	g := j.GangGPUs
	for _, c := range j.Mix {
		g = max(g, c.GangGPUs)
	}
	return g
}

// maxMix bounds a job mix.
const maxMix = 100

// JobsOf is the jobs the tenant of cluster name runs: j, with its class
// of the mix (an FNV hash of the name picks it) if there is one.
func (j Jobs) JobsOf(name string) Jobs {
	if len(j.Mix) == 0 {
		return j
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	c := j.Mix[h.Sum32()%uint32(len(j.Mix))]
	j.GangGPUs, j.CheckpointInterval, j.Mix = c.GangGPUs, c.CheckpointInterval, nil
	return j
}

// Policy is what an operator can set.
type Policy struct {
	Name string `json:"name"`
	// DrainWindow: the bounded notice (default 5m).
	DrainWindow Duration `json:"drain_window"`
	// Cooldown keeps a machine a standard node gave back out of lending
	// this long (default 30s; "0s" is none).
	Cooldown *Duration `json:"cooldown,omitempty"`
	// Victims is how a cluster's nodes to give up are chosen, as far as
	// what a node runs goes (docs/reclaim.md): "least-harm" (the
	// default, also when empty: what the tenants' jobs would lose, from
	// the job model), "idle-first" (only whether a node runs a job: a
	// driver that sees pods and nothing more), or "youngest" (nothing
	// known: a driver that cannot tell).
	Victims string `json:"victims,omitempty"`
	// MinLease is every pool's minimum lease of a preemptible node
	// (docs/reclaim.md); 0, the default: none.
	MinLease *Duration `json:"min_lease,omitempty"`
}

// Victim choices of a Policy.
const (
	VictimsLeastHarm = "least-harm"
	VictimsIdleFirst = "idle-first"
	VictimsYoungest  = "youngest"
)

// Limits of a scenario: a scenario may come from anyone a simulation
// service runs for.
const (
	MaxHorizon = 366 * 24 * time.Hour
	MaxTenants = 1000
	MaxEvents  = 1_000_000
	// MaxMachines bounds a scenario's fleet (2,000,000 GPUs), and
	// MaxTenantClusters its tenants over all regions and GPU types (a
	// million GPUs in pools of 5,000 with 125 tenants each is 25,000): a
	// scenario handed to a server must not take its memory.
	MaxMachines       = 250_000
	MaxTenantClusters = 50_000
)

// Parse reads a scenario, strictly (an unknown field is an error), and
// checks it.
func Parse(data []byte) (Scenario, error) {
	s, err := Decode(data)
	if err != nil {
		return Scenario{}, err
	}
	if err := s.Check(); err != nil {
		return Scenario{}, err
	}
	return s, nil
}

// Decode reads a scenario strictly without checking it: the caller may
// fill what it lacks (a server, its own fleet) and then Check it.
func Decode(data []byte) (Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		if strings.Contains(err.Error(), `unknown field "poll"`) {
			return Scenario{}, errors.New("parse scenario: policy.poll is gone: nothing polls the simulated fleet, which says when each node is next due (docs/planning.md); remove it")
		}
		return Scenario{}, fmt.Errorf("parse scenario: %w", err)
	}
	return s, nil
}

// Check validates the scenario and fills the defaults.
func (s *Scenario) Check() error {
	if s.Horizon.D <= 0 || s.Horizon.D > MaxHorizon {
		return fmt.Errorf("horizon must be above 0 and at most %s; got %s", MaxHorizon, s.Horizon.D)
	}
	if err := s.checkFleet(); err != nil {
		return err
	}
	if err := s.OnDemand.check(); err != nil {
		return err
	}
	if err := s.Tenants.check(); err != nil {
		return err
	}
	if err := s.Jobs.check(); err != nil {
		return err
	}
	if err := s.Policy.check("policy"); err != nil {
		return err
	}
	if s.Compare != nil {
		if err := s.Compare.check("compare"); err != nil {
			return err
		}
	}
	return nil
}

// checkFleet validates the fleet, filling its defaults, and bounds the
// fleet and the tenants' clusters over it.
func (s *Scenario) checkFleet() error {
	f, err := fleet.Parse(mustJSON(s.Fleet))
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	s.Fleet = f
	machines := 0
	for _, p := range f.Pools {
		machines += p.Machines
	}
	if machines > MaxMachines {
		return fmt.Errorf("fleet: %d machines, more than the %d a simulation takes", machines, MaxMachines)
	}
	if n := s.Tenants.Count * len(offers(f)); n > MaxTenantClusters {
		return fmt.Errorf("tenants: %d clusters (%d in each of %d regions and GPU types), more than the %d a simulation takes", n, s.Tenants.Count, len(offers(f)), MaxTenantClusters)
	}
	return nil
}

// check validates the on-demand demand process.
func (od OnDemand) check() error {
	switch {
	case od.ArrivalsPerHour < 0 || od.ArrivalsPerHour > 1000:
		return fmt.Errorf("on_demand.arrivals_per_hour must be between 0 and 1000; got %g", od.ArrivalsPerHour)
	case od.ArrivalsPerHour > 0 && od.MeanLifetime.D <= 0:
		return errors.New("on_demand.mean_lifetime must be above 0 when clusters arrive")
	case od.ArrivalsPerHour > 0 && len(od.GPUs) == 0:
		return errors.New("on_demand.gpus must list at least one cluster size")
	case od.BookedAhead.D < 0 || od.BookedAhead.D > 366*24*time.Hour:
		return fmt.Errorf("on_demand.booked_ahead must be between 0 and a year; got %s", od.BookedAhead.D)
	}
	for _, g := range od.GPUs {
		if err := checkGPUs("on_demand.gpus", g, false); err != nil {
			return err
		}
	}
	return nil
}

// check validates the preemptible tenants.
func (t Tenants) check() error {
	if t.Count < 0 || t.Count > MaxTenants {
		return fmt.Errorf("tenants.count must be between 0 and %d; got %d", MaxTenants, t.Count)
	}
	if t.Count > 0 {
		if err := checkGPUs("tenants.target_gpus", t.TargetGPUs, false); err != nil {
			return err
		}
	}
	if len(t.Weights) > MaxTenants {
		return fmt.Errorf("tenants.weights lists more than %d weights", MaxTenants)
	}
	for _, w := range t.Weights {
		if w < 1 || w > domain.MaxWeight {
			return fmt.Errorf("tenants.weights: %d is not a weight from 1 to %d", w, domain.MaxWeight)
		}
	}
	if len(t.PreemptibleGPUTypes) > 8 {
		return fmt.Errorf("tenants.preemptible_gpu_types names more than 8 GPU types")
	}
	for i, g := range t.PreemptibleGPUTypes {
		if !domain.ValidName(g) || slices.Contains(t.PreemptibleGPUTypes[:i], g) {
			return fmt.Errorf("tenants.preemptible_gpu_types: %q is not a GPU type name, or is named twice", g)
		}
	}
	return nil
}

// check validates the job model.
func (j Jobs) check() error {
	for name, d := range map[string]Duration{"checkpoint_interval": j.CheckpointInterval, "checkpoint_cost": j.CheckpointCost,
		"restart_cost": j.RestartCost, "exit_after_notice": j.ExitAfterNotice} {
		if d.D < 0 || d.D > MaxHorizon {
			return fmt.Errorf("jobs.%s must be between 0 and %s; got %s", name, MaxHorizon, d.D)
		}
	}
	if j.GangGPUs != 0 {
		if err := checkGPUs("jobs.gang_gpus", j.GangGPUs, false); err != nil {
			return err
		}
	}
	if len(j.Mix) > maxMix {
		return fmt.Errorf("jobs.mix lists more than %d classes", maxMix)
	}
	for i, c := range j.Mix {
		if err := checkGPUs(fmt.Sprintf("jobs.mix[%d].gang_gpus", i), c.GangGPUs, true); err != nil {
			return err
		}
		if c.CheckpointInterval.D < 0 || c.CheckpointInterval.D > MaxHorizon {
			return fmt.Errorf("jobs.mix[%d].checkpoint_interval must be between 0 and %s; got %s", i, MaxHorizon, c.CheckpointInterval.D)
		}
	}
	if !(j.GPUHours >= 0 && j.GPUHours <= 1e9) {
		return fmt.Errorf("jobs.gpu_hours must be between 0 and 1e9; got %g", j.GPUHours)
	}
	return nil
}

// check validates a policy and fills its defaults.
func (p *Policy) check(field string) error {
	if p.Name == "" {
		p.Name = field
	}
	if len(p.Name) > 63 {
		return fmt.Errorf("%s.name is longer than 63 bytes", field)
	}
	if p.DrainWindow.D == 0 {
		p.DrainWindow.D = 5 * time.Minute
	}
	switch {
	case p.DrainWindow.D < time.Second || p.DrainWindow.D > 24*time.Hour:
		return fmt.Errorf("%s.drain_window must be between 1s and 24h; got %s", field, p.DrainWindow.D)
	case p.Cooldown != nil && (p.Cooldown.D < 0 || p.Cooldown.D > 24*time.Hour):
		return fmt.Errorf("%s.cooldown must be between 0s and 24h; got %s", field, p.Cooldown.D)
	case p.MinLease != nil && (p.MinLease.D < 0 || p.MinLease.D > fleet.MaxMinLease):
		return fmt.Errorf("%s.min_lease must be between 0s and %s; got %s", field, fleet.MaxMinLease, p.MinLease.D)
	case p.Victims != "" && p.Victims != VictimsLeastHarm && p.Victims != VictimsIdleFirst && p.Victims != VictimsYoungest:
		return fmt.Errorf("%s.victims must be %s, %s or %s; got %.64q", field, VictimsLeastHarm, VictimsIdleFirst, VictimsYoungest, p.Victims)
	}
	return nil
}

// checkGPUs: a size is a positive multiple of a node's 8 GPUs (zero
// allowed where it means "none").
func checkGPUs(field string, g int, zero bool) error {
	if (g == 0 && zero) || (g > 0 && g%8 == 0 && g <= 100_000) {
		return nil
	}
	return fmt.Errorf("%s: %d GPUs is not a multiple of 8 between 8 and 100000", field, g)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Duration is a time.Duration written as "90s", "5m", "720h".
type Duration struct{ D time.Duration }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.D.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"90s\" or \"720h\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.D = v
	return nil
}
