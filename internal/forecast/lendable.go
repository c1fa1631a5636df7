package forecast

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Lendable is the pool's mean lendable GPUs in each hour of [from, to),
// from truncated to the hour: the GPUs of its machines in service now
// that existed then, less those of the standard nodes on them (from
// their creation, when they claim the machine, to their removal; a node
// not removed holds on to the end). Preemptible tenants share what is
// lendable by fair share.
func Lendable(nodes []domain.Node, machines []domain.Machine, region, gpuType string, from, to time.Time) []float64 {
	from = from.Truncate(time.Hour)
	n := int(to.Sub(from) / time.Hour)
	if n <= 0 {
		return nil
	}
	// GPU-seconds per hour: capacity added, standard use taken away.
	secs := make([]float64, n)
	in := map[string]bool{}
	for _, m := range machines {
		if m.Region != region || m.GPUType != gpuType {
			continue
		}
		in[m.ID] = true
		if !m.OutOfService {
			spread(secs, from, m.CreatedAt, to, float64(m.GPUs))
		}
	}
	for _, nd := range nodes {
		if nd.Class != domain.Standard || !in[nd.MachineID] {
			continue
		}
		end := to
		if !nd.RemovedAt.IsZero() && nd.RemovedAt.Before(to) {
			end = nd.RemovedAt
		}
		spread(secs, from, nd.CreatedAt, end, -float64(nd.GPUs))
	}
	for i := range secs {
		secs[i] = max(secs[i]/3600, 0)
	}
	return secs
}

// spread adds gpus over [start, end) to the hourly GPU-seconds of secs,
// whose first hour starts at from.
func spread(secs []float64, from, start, end time.Time, gpus float64) {
	if start.Before(from) {
		start = from
	}
	last := from.Add(time.Duration(len(secs)) * time.Hour)
	if end.After(last) {
		end = last
	}
	for start.Before(end) {
		i := int(start.Sub(from) / time.Hour)
		next := from.Add(time.Duration(i+1) * time.Hour)
		if next.After(end) {
			next = end
		}
		secs[i] += gpus * next.Sub(start).Seconds()
		start = next
	}
}
