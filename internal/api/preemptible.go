package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// updatable are the fields a PATCH of a cluster may set.
const updatable = "num_gpus, num_preemptible_gpus, max_preemptible_gpus, preemptible_gpu_types, preemptible_strategy and/or max_preemptible_per_gpu_hour"

// strategies are the preemptible strategies a cluster may name.
var strategies = []string{allocator.InOrder, allocator.LowestPrice, allocator.CapacityOptimized, allocator.PriceCapacityOptimized}

// checkStrategy checks a preemptible strategy ("" is in-order).
func checkStrategy(s string) error {
	if s != "" && !slices.Contains(strategies, s) {
		return invalid("preemptible_strategy", "preemptible_strategy must be in-order, lowest-price, capacity-optimized or price-capacity-optimized; got %q", echo(s))
	}
	return nil
}

// normCap is a price cap per GPU-hour as it is stored: "" (no cap) or a
// decimal amount of dollars above 0, written as prices are ("1.6" is
// "1.60").
func normCap(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	v, err := billing.ParseRate(s)
	if err != nil {
		return "", invalid("max_preemptible_per_gpu_hour", "max_preemptible_per_gpu_hour %q is not a price per GPU-hour: a decimal amount of dollars with at most 6 decimals, like \"1.60\" (\"\" removes the cap)", echo(s))
	}
	if v == 0 {
		return "", invalid("max_preemptible_per_gpu_hour", "max_preemptible_per_gpu_hour must be more than 0; \"\" removes the cap")
	}
	return billing.FormatRate(v), nil
}

// checkCreatePreemptible checks and normalizes a create's preemptible
// types, strategy and cap.
func checkCreatePreemptible(req *apiv1.CreateClusterRequest) error {
	if err := checkTypes(req.PreemptibleGPUTypes); err != nil {
		return err
	}
	if err := checkStrategy(req.PreemptibleStrategy); err != nil {
		return err
	}
	c, err := normCap(req.MaxPreemptiblePerGPUHour)
	req.MaxPreemptiblePerGPUHour = c
	return err
}

// decodeUpdatePreemptible reads a PATCH's preemptible types, strategy
// and cap into out.
func decodeUpdatePreemptible(b *updateBody, out *apiv1.UpdateClusterRequest) error {
	if b.PreemptibleTypes != nil && string(b.PreemptibleTypes) != "null" {
		var types []string
		if err := json.Unmarshal(b.PreemptibleTypes, &types); err != nil {
			return invalid("preemptible_gpu_types", "preemptible_gpu_types must be a list of GPU type names")
		}
		if err := checkTypes(types); err != nil {
			return err
		}
		out.PreemptibleGPUTypes = &types
	}
	if b.PreemptibleStrategy != nil {
		if err := checkStrategy(*b.PreemptibleStrategy); err != nil {
			return err
		}
		out.PreemptibleStrategy = b.PreemptibleStrategy
	}
	if b.MaxPreemptiblePerGPUHour != nil {
		c, err := normCap(*b.MaxPreemptiblePerGPUHour)
		if err != nil {
			return err
		}
		out.MaxPreemptiblePerGPUHour = &c
	}
	return nil
}

// ownType is types, or nil when they are only the cluster's own type
// (the default).
func ownType(types []string, gpuType string) []string {
	if len(types) == 0 || (len(types) == 1 && types[0] == gpuType) {
		return nil
	}
	return types
}

// preemptibleChange checks a PATCH's preemptible types against the
// fleet of c's region and fills ch with what it changes.
func (s *Server) preemptibleChange(ctx context.Context, c *domain.Cluster, req apiv1.UpdateClusterRequest, ch *controller.Change) error {
	if req.PreemptibleGPUTypes != nil {
		for _, t := range *req.PreemptibleGPUTypes {
			if err := s.checkOffering(ctx, c.Region, t); err != nil {
				return invalid("preemptible_gpu_types", "%s", err.Error())
			}
		}
		types := ownType(*req.PreemptibleGPUTypes, c.GPUType)
		ch.PreemptibleGPUTypes = &types
	}
	ch.PreemptibleStrategy, ch.MaxPreemptiblePrice = req.PreemptibleStrategy, req.MaxPreemptiblePerGPUHour
	return nil
}

// strategyOf is a cluster's strategy as the API shows it.
func strategyOf(c *domain.Cluster) string {
	if c.PreemptibleStrategy == "" {
		return allocator.InOrder
	}
	return c.PreemptibleStrategy
}

// byType counts gpus ready preemptible GPUs of type t in v.
func byType(v *apiv1.Cluster, t string, gpus int) {
	if v.AllocatedPreemptibleByType == nil {
		v.AllocatedPreemptibleByType = map[string]int{}
	}
	v.AllocatedPreemptibleByType[t] += gpus
}

// typeUsage prices the records of f over [from, to) grouped by GPU type
// and compute class (GET /v1/usage?group_by=gpu_type), from the records
// themselves: a rollup of a cluster's month merges its types.
func (s *Server) typeUsage(ctx context.Context, f store.UsageFilter, b *billing.Book, from, to time.Time) (priced, error) {
	pr := newPricer(b, from, to, func(r *domain.UsageRecord) string { return r.GPUType + "\x00" + string(r.Class) })
	g := f
	g.From, g.To = from, to
	if err := s.store.ScanUsage(ctx, g, pr.add); err != nil {
		return priced{}, err
	}
	out := pr.result()
	slices.SortStableFunc(out.lines, func(a, b apiv1.UsageLine) int {
		return strings.Compare(a.GPUType+"\x00"+a.ComputeClass, b.GPUType+"\x00"+b.ComputeClass)
	})
	return out, nil
}
