package api

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
)

// maxPoolsNamed bounds the pools an error names: a fleet of many regions
// and types would otherwise answer a typo with a page.
const maxPoolsNamed = 12

// knownPool checks that the fleet has a pool of gpuType in region. A plan
// or an advice for a pool with no machine would work from no node-hours
// (a rate of 0: a job never reclaimed), so it is refused, naming the
// pools there are. A name the fleet lacks altogether names its field.
// The statistics answer such a pool with an empty list instead: an
// aggregate of nothing is nothing, not a promise.
func (s *Server) knownPool(ctx context.Context, region, gpuType string) error {
	machines, err := s.store.ListMachines(ctx)
	if err != nil {
		return err
	}
	return poolOf(machines, region, gpuType)
}

// poolOf is knownPool on the fleet's machines.
func poolOf(machines []domain.Machine, region, gpuType string) error {
	regions, types, pools := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, m := range machines {
		regions[m.Region], types[m.GPUType], pools[m.Region+"/"+m.GPUType] = true, true, true
	}
	switch {
	case !regions[region]:
		return invalid("region", "unknown region %q; the fleet has %s", echo(region), list(regions))
	case !types[gpuType]:
		return invalid("gpu_type", "unknown gpu_type %q; the fleet has %s", echo(gpuType), list(types))
	case !pools[region+"/"+gpuType]:
		return invalid("gpu_type", "no pool of %s in %s; the pools are: %s", gpuType, region, poolList(pools))
	}
	return nil
}

// poolList names pools (region/type), sorted, at most maxPoolsNamed.
func poolList(pools map[string]bool) string {
	keys := make([]string, 0, len(pools))
	for k := range pools {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) <= maxPoolsNamed {
		return strings.Join(keys, ", ")
	}
	return strings.Join(keys[:maxPoolsNamed], ", ") + fmt.Sprintf(" and %d more", len(keys)-maxPoolsNamed)
}
