package simulate

import (
	"cmp"
	"slices"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
)

// maxAnyOf bounds the alternatives a trace's row may name ("A|B|…").
const maxAnyOf = 16

// fleetType is one GPU type of the fleet a trace replays on, with its
// GPUs in AlibabaRegion.
type fleetType struct {
	name string
	gpus int
}

// fleetTypes lists the GPU types of fl's pools in AlibabaRegion in the
// order a trace's "any of these" tries them, the order a user choosing a
// type would: the cheapest on demand first (fl's prices), then, unpriced
// or equal, in the order the fleet lists them (a node list: the order its
// models first appear).
func fleetTypes(fl fleet.File) []fleetType {
	var out []fleetType
	for _, p := range fl.Pools {
		if p.Region != AlibabaRegion {
			continue
		}
		i := slices.IndexFunc(out, func(t fleetType) bool { return t.name == p.GPUType })
		if i < 0 {
			out = append(out, fleetType{name: p.GPUType})
			i = len(out) - 1
		}
		out[i].gpus += p.Machines * p.GPUsPerMachine
	}
	price := func(t fleetType) (uint64, bool) {
		m, err := billing.ParseRate(fl.Prices[t.name])
		return m, err == nil
	}
	slices.SortStableFunc(out, func(a, b fleetType) int {
		pa, oka := price(a)
		pb, okb := price(b)
		switch {
		case oka && okb:
			return cmp.Compare(pa, pb)
		case oka != okb && oka:
			return -1
		case oka != okb:
			return 1
		}
		return 0
	})
	return out
}

// placer places a trace's usages on GPU types as they arrive, keeping
// the GPUs placed on each (class, type).
type placer struct {
	types []fleetType
	sum   map[[2]string]int
}

func newPlacer(types []fleetType) *placer {
	return &placer{types: types, sum: map[[2]string]int{}}
}

// nodes is what the cluster of class and type k asks: its GPUs in whole
// 8-GPU nodes.
func (p *placer) nodes(k [2]string) int {
	return min(wholeNodes(p.sum[k]), 100_000)
}

func wholeNodes(gpus int) int { return (max(gpus, 0) + 7) / 8 * 8 }

// place chooses u's type: the first of its candidates (the fleet's types
// it accepts, in fleetTypes' order, then those it names that the fleet
// lacks) where it fits at its arrival, in whole nodes: standard demand
// beside the standard demand already there (preemptible nodes give way
// to it), preemptible demand beside both. Where none has room, the one
// with the most (the first of equals): the replay then refuses or waits
// as the control plane would, and says so.
func (p *placer) place(u usage) string {
	cands := p.candidates(u.anyOf)
	if len(cands) == 0 {
		return "GPU" // no fleet to choose from: a type no pool has
	}
	best, bestRoom := 0, 0
	for i, t := range cands {
		std, pre := p.sum[[2]string{string(domain.Standard), t.name}], p.sum[[2]string{string(domain.Preemptible), t.name}]
		room := t.gpus - wholeNodes(std+u.gpus)
		if u.class == domain.Preemptible {
			room = t.gpus - wholeNodes(std) - wholeNodes(pre+u.gpus)
		}
		if room >= 0 {
			return t.name
		}
		if i == 0 || room > bestRoom {
			best, bestRoom = i, room
		}
	}
	return cands[best].name
}

// candidates are the types a usage accepting anyOf (none: any) may be
// placed on, in the order place tries them.
func (p *placer) candidates(anyOf []string) []fleetType {
	if len(anyOf) == 0 {
		return p.types
	}
	out := make([]fleetType, 0, len(anyOf))
	for _, t := range p.types {
		if slices.Contains(anyOf, t.name) {
			out = append(out, t)
		}
	}
	for _, n := range anyOf {
		if !slices.ContainsFunc(out, func(t fleetType) bool { return t.name == n }) {
			out = append(out, fleetType{name: n})
		}
	}
	return out
}
