package allocator

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Covers checks a plan Partitioned made (got, with the token naming the
// partitions it planned) against the whole plan of the world it planned
// from (s, a store's snapshot): got is the whole plan for the partitions
// it planned (its Clusters: the states that change), and the whole plan
// changes nothing in the others (they were settled). It returns what
// differs. Tests of whatever plans through a Partitioned use it.
func Covers(s Snapshot, tok Token, got Plan, now time.Time, cfg Config) error {
	full := Compute(s, now, cfg)
	planned := map[string]bool{}
	stored := map[string]*domain.Cluster{}
	for i := range s.Clusters {
		c := &s.Clusters[i]
		planned[c.ID], stored[c.ID] = tok.Planned(c.Region, c.GPUType), c
	}
	var want Plan
	for _, p := range full.Provisions {
		if !planned[p.ClusterID] {
			return fmt.Errorf("the whole plan provisions %+v in a partition not planned (settled)", p)
		}
		want.Provisions = append(want.Provisions, p)
	}
	for _, r := range full.Reclaims {
		if !planned[r.ClusterID] {
			return fmt.Errorf("the whole plan reclaims %+v in a partition not planned (settled)", r)
		}
		want.Reclaims = append(want.Reclaims, r)
	}
	for _, sf := range full.Shortfalls {
		if planned[sf.ClusterID] {
			want.Shortfalls = append(want.Shortfalls, sf)
		}
	}
	for _, cs := range full.Clusters {
		c := stored[cs.ClusterID]
		if !StateChanged(c, cs, now) {
			continue
		}
		if !planned[c.ID] {
			return fmt.Errorf("cluster %s of a settled partition would change: stored %s/%s, planned %+v", c.ID, c.Status, c.Unfulfilled, cs)
		}
		want.Clusters = append(want.Clusters, cs)
	}
	got = canonical(got)
	want = canonical(want)
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("at %s the partitions' plan differs from the whole plan's:\n got %+v\nwant %+v", now, got, want)
	}
	return nil
}

// canonical is p with its reclaims, shortfalls and cluster states in one
// order (the whole plan orders them across partitions, Partitioned by
// partition), no empty slices, and no wake-up (the whole plan's has every
// partition's).
func canonical(p Plan) Plan {
	p.Reclaims = slices.Clone(p.Reclaims)
	p.Shortfalls = slices.Clone(p.Shortfalls)
	p.Clusters = slices.Clone(p.Clusters)
	slices.SortFunc(p.Clusters, func(a, b ClusterState) int { return cmpString(a.ClusterID, b.ClusterID) })
	slices.SortFunc(p.Reclaims, func(a, b Reclaim) int { return cmpString(a.NodeID, b.NodeID) })
	slices.SortFunc(p.Shortfalls, func(a, b Shortfall) int { return cmpString(a.ClusterID, b.ClusterID) })
	p.NextWake = time.Time{}
	if len(p.Reclaims) == 0 {
		p.Reclaims = nil
	}
	if len(p.Provisions) == 0 {
		p.Provisions = nil
	}
	if len(p.Clusters) == 0 {
		p.Clusters = nil
	}
	if len(p.Shortfalls) == 0 {
		p.Shortfalls = nil
	}
	return p
}
