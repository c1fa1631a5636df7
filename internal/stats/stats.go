package stats

import (
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
)

// partition is one region and GPU type.
type partition struct{ region, gpuType string }

// tally accumulates one partition's figures.
type tally struct {
	nodes           int
	servedMicros    int64
	lifetimes       []time.Duration
	early, deadline int
}

// Preemptions returns the interruption statistics of the preemptible nodes
// over the window [from, to), one entry per region and GPU type of
// machines, sorted by region then GPU type. now ends the service of nodes
// still serving. The package documentation defines every field.
func Preemptions(nodes []domain.Node, machines []domain.Machine, from, to, now time.Time) []apiv1.PreemptionStats {
	where := make(map[string]partition, len(machines))
	tallies := map[partition]*tally{}
	for _, m := range machines {
		p := partition{m.Region, m.GPUType}
		where[m.ID] = p
		if tallies[p] == nil {
			tallies[p] = &tally{}
		}
	}
	in := func(t time.Time) bool { return !t.IsZero() && !t.Before(from) && t.Before(to) }
	for _, n := range nodes {
		if n.Class != domain.Preemptible || n.ReadyAt.IsZero() {
			continue
		}
		p, ok := where[n.MachineID]
		if !ok {
			continue
		}
		t := tallies[p]
		counted := false
		if d := overlap(n.ReadyAt, serviceEnd(n, now), from, to); d > 0 {
			t.servedMicros += d.Microseconds()
			counted = true
		}
		if Preempted(n) {
			if in(n.DrainStartedAt) {
				t.lifetimes = append(t.lifetimes, max(n.DrainStartedAt.Sub(n.ReadyAt), 0))
				counted = true
			}
			if in(n.DrainedAt) {
				switch n.Outcome {
				case domain.OutcomeEarly:
					t.early++
					counted = true
				case domain.OutcomeDeadline:
					t.deadline++
					counted = true
				}
			}
		}
		if counted {
			t.nodes++
		}
	}

	out := make([]apiv1.PreemptionStats, 0, len(tallies))
	for p, t := range tallies {
		hours := float64(t.servedMicros) / float64(time.Hour/time.Microsecond)
		s := apiv1.PreemptionStats{
			Region: p.region, GPUType: p.gpuType, NodesObserved: t.nodes,
			PreemptibleNodeHours: hours, Preemptions: len(t.lifetimes),
			DrainsEndedEarly: t.early, DrainsEndedAtDeadline: t.deadline,
		}
		if t.servedMicros > 0 {
			s.PreemptionsPerNodeHour = float64(s.Preemptions) / hours
		}
		if len(t.lifetimes) > 0 {
			slices.Sort(t.lifetimes)
			s.MedianLifetimeSeconds = Percentile(t.lifetimes, 50).Seconds()
			s.P90LifetimeSeconds = Percentile(t.lifetimes, 90).Seconds()
		}
		if drains := t.early + t.deadline; drains > 0 {
			s.EarlyShare = float64(t.early) / float64(drains)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b apiv1.PreemptionStats) int {
		if c := strings.Compare(a.Region, b.Region); c != 0 {
			return c
		}
		return strings.Compare(a.GPUType, b.GPUType)
	})
	return out
}

// Preempted reports whether the node's drain has started for a cause the
// tenant did not ask for.
func Preempted(n domain.Node) bool {
	return !n.DrainStartedAt.IsZero() && !n.DrainCause.TenantInitiated()
}

// serviceEnd is when the node stopped serving: the drain notice, else its
// removal, else now (it still serves).
func serviceEnd(n domain.Node, now time.Time) time.Time {
	switch {
	case !n.DrainStartedAt.IsZero():
		return n.DrainStartedAt
	case !n.RemovedAt.IsZero():
		return n.RemovedAt
	}
	return now
}

// overlap is the length of [start, end) ∩ [from, to), 0 if they do not meet.
func overlap(start, end, from, to time.Time) time.Duration {
	if start.Before(from) {
		start = from
	}
	if end.After(to) {
		end = to
	}
	return max(end.Sub(start), 0)
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be sorted ascending and not empty: the value of rank
// ⌈p·N/100⌉ (1-based). It is always one of the values.
func Percentile(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	rank := (p*n + 99) / 100
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}
