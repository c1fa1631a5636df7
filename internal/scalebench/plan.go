package scalebench

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// GPUsPerMachine is the size of every machine (one node is one machine).
const GPUsPerMachine = 8

// Regions and GPUTypes of the generated fleet: every region has every GPU
// type, 16 partitions.
var (
	Regions  = []string{"us-central-2", "us-central-8", "eu-west-1", "ap-south-1"}
	GPUTypes = []string{"H100_SXM", "A100_SXM", "L40S", "RTX_6000_PCI"}
	// Prices are the on-demand prices per GPU-hour of the fleet file.
	Prices = map[string]string{"H100_SXM": "2.99", "A100_SXM": "1.79", "L40S": "1.09", "RTX_6000_PCI": "0.89"}
)

// Partition is a region and GPU type.
type Partition struct {
	Region  string `json:"region"`
	GPUType string `json:"gpu_type"`
}

func (p Partition) String() string { return p.Region + "/" + p.GPUType }

// Partitions lists the 16 partitions, region-major.
func Partitions() []Partition {
	var ps []Partition
	for _, r := range Regions {
		for _, g := range GPUTypes {
			ps = append(ps, Partition{r, g})
		}
	}
	return ps
}

// Shape is what a run asks for.
type Shape struct {
	GPUs               int
	Clusters           int
	ClustersPerProject int // 50: one project lists exactly that many
	ReservationHolders int // projects holding the reservations (4)
	Reserved           bool
	Seed               uint64
}

// Pool is one pool of the fleet file.
type Pool struct {
	Partition
	Machines    int
	ReservedFor string
}

// ClusterSpec is one cluster to create.
type ClusterSpec struct {
	Index              int
	Name               string
	Project            string
	Partition          Partition
	Billing            string // ON_DEMAND or RESERVED
	NumGPUs            int
	NumPreemptibleGPUs int
}

// Plan is the generated world: the fleet and the clusters to create.
type Plan struct {
	Shape    Shape
	Machines int
	Pools    []Pool
	Projects []string
	// Holder is the project holding each partition's reservation.
	Holder   map[Partition]string
	Clusters []ClusterSpec
	// StdNodes and PreemptibleNodes are what the clusters ask for, in
	// nodes (machines).
	StdNodes, PreemptibleNodes int
	// PreemptibleRange is the preemptible target per cluster, in nodes.
	PreemptibleRange [2]int
	// ListProject has the most clusters (exactly ClustersPerProject when
	// there are that many clusters), for the list benchmark.
	ListProject string
}

// ProjectName is the i-th benchmark project.
func ProjectName(i int) string { return fmt.Sprintf("sb-p%02d", i) }

// NewPlan generates the fleet and the clusters of s, deterministically.
func NewPlan(s Shape) (Plan, error) {
	parts := Partitions()
	switch {
	case s.GPUs%GPUsPerMachine != 0:
		return Plan{}, fmt.Errorf("-gpus must be a multiple of %d; got %d", GPUsPerMachine, s.GPUs)
	case s.GPUs < GPUsPerMachine*len(parts)*2:
		return Plan{}, fmt.Errorf("-gpus must be at least %d (2 machines per partition); got %d", GPUsPerMachine*len(parts)*2, s.GPUs)
	case s.Clusters < 1:
		return Plan{}, fmt.Errorf("-clusters must be at least 1; got %d", s.Clusters)
	}
	if s.ClustersPerProject < 1 {
		s.ClustersPerProject = 50
	}
	if s.ReservationHolders < 1 {
		s.ReservationHolders = 4
	}
	p := Plan{Shape: s, Machines: s.GPUs / GPUsPerMachine, Holder: map[Partition]string{}}
	nProjects := (s.Clusters + s.ClustersPerProject - 1) / s.ClustersPerProject
	for i := 0; i < nProjects; i++ {
		p.Projects = append(p.Projects, ProjectName(i))
	}
	holders := min(s.ReservationHolders, nProjects)

	// The fleet: machines split evenly, the remainder to the first
	// partitions; a fifth of each partition reserved.
	base, extra := p.Machines/len(parts), p.Machines%len(parts)
	for i, part := range parts {
		m := base
		if i < extra {
			m++
		}
		rsv := int(math.Round(float64(m) / 5))
		rsv = max(1, min(rsv, m-1))
		holder := ProjectName(i % holders)
		p.Holder[part] = holder
		p.Pools = append(p.Pools, Pool{Partition: part, Machines: m - rsv}, Pool{Partition: part, Machines: rsv, ReservedFor: holder})
	}

	// The clusters: 1–2 standard nodes, and a preemptible target around
	// what brings the total to half the machines.
	mean := float64(p.Machines) / 2 / float64(s.Clusters)
	pMean := max(0, mean-1.5)
	lo, hi := int(math.Round(pMean*2/3)), int(math.Round(pMean*4/3))
	p.PreemptibleRange = [2]int{lo, hi}
	rng := rand.New(rand.NewPCG(s.Seed, 0x5ca1eb))
	for i := 0; i < s.Clusters; i++ {
		part := parts[i%len(parts)]
		c := ClusterSpec{
			Index:     i,
			Name:      fmt.Sprintf("sb-%05d", i),
			Project:   ProjectName(i / s.ClustersPerProject),
			Partition: part,
			Billing:   "ON_DEMAND",
		}
		std := 1 + rng.IntN(2)
		pre := lo + rng.IntN(hi-lo+1)
		c.NumGPUs, c.NumPreemptibleGPUs = std*GPUsPerMachine, pre*GPUsPerMachine
		if s.Reserved && p.Holder[part] == c.Project {
			c.Billing = "RESERVED"
		}
		p.StdNodes += std
		p.PreemptibleNodes += pre
		p.Clusters = append(p.Clusters, c)
	}
	counts := map[string]int{}
	for _, c := range p.Clusters {
		counts[c.Project]++
	}
	best := -1
	for _, pr := range p.Projects {
		if counts[pr] > best {
			p.ListProject, best = pr, counts[pr]
		}
	}
	return p, nil
}

// ClustersOf counts the plan's clusters of project.
func (p Plan) ClustersOf(project string) int {
	n := 0
	for _, c := range p.Clusters {
		if c.Project == project {
			n++
		}
	}
	return n
}

// FleetYAML is the fleet file of the plan (docs/operations.md, "Fleet
// file").
func (p Plan) FleetYAML() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# scalebench fleet: %d GPUs, %d machines of %d GPUs in %d partitions\n", p.Shape.GPUs, p.Machines, GPUsPerMachine, len(Partitions()))
	b.WriteString("pools:\n")
	for _, pool := range p.Pools {
		fmt.Fprintf(&b, "  - {region: %s, gpu_type: %s, machines: %d", pool.Region, pool.GPUType, pool.Machines)
		if pool.ReservedFor != "" {
			fmt.Fprintf(&b, ", reserved_for: %s", pool.ReservedFor)
		}
		b.WriteString("}\n")
	}
	b.WriteString("prices:\n")
	gpus := make([]string, 0, len(Prices))
	for g := range Prices {
		gpus = append(gpus, g)
	}
	sort.Strings(gpus)
	for _, g := range gpus {
		fmt.Fprintf(&b, "  %s: %q\n", g, Prices[g])
	}
	return b.Bytes()
}

// PartitionState is what the admin machine listing says about one
// partition's on-demand pool.
type PartitionState struct {
	Partition
	// ODFree: on-demand machines with no node.
	ODFree int
	// ODPreemptible: on-demand machines serving a ready preemptible node,
	// which a standard request would reclaim once the free ones are used.
	ODPreemptible int
}

// BurstPart is what the burst does in one partition: fill its free
// on-demand machines first, then ask for Reclaim more, each taking a
// machine from a preemptible node.
type BurstPart struct {
	Partition
	Fill    int
	Reclaim int
}

// PlanBurst picks partitions, those with the most lent on-demand machines
// first (then by name), until their lent machines cover want reclaims. It
// returns fewer than want reclaims in all when the fleet has fewer lent
// on-demand machines.
func PlanBurst(states []PartitionState, want int) []BurstPart {
	sorted := append([]PartitionState(nil), states...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].ODPreemptible != sorted[j].ODPreemptible {
			return sorted[i].ODPreemptible > sorted[j].ODPreemptible
		}
		return sorted[i].Partition.String() < sorted[j].Partition.String()
	})
	var out []BurstPart
	left := want
	for _, s := range sorted {
		if left <= 0 {
			break
		}
		if s.ODPreemptible == 0 {
			continue
		}
		k := min(left, s.ODPreemptible)
		out = append(out, BurstPart{Partition: s.Partition, Fill: s.ODFree, Reclaim: k})
		left -= k
	}
	return out
}
