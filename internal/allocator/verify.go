package allocator

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

// Covers checks a plan Partitioned made (got, planned on sub) against the
// whole plan of the world it planned from (s, a store's snapshot):
// got is the whole plan for the partitions it planned, and the whole plan
// changes nothing in the others (they were settled). It returns what
// differs. Tests of whatever plans through a Partitioned use it.
func Covers(s, sub Snapshot, got Plan, now time.Time, cfg Config) error {
	full := Compute(s, now, cfg)
	inSub := map[string]bool{}
	for _, c := range sub.Clusters {
		inSub[c.ID] = true
	}
	var want Plan
	for _, p := range full.Provisions {
		if !inSub[p.ClusterID] {
			return fmt.Errorf("the whole plan provisions %+v in a partition not planned (settled)", p)
		}
		want.Provisions = append(want.Provisions, p)
	}
	for _, r := range full.Reclaims {
		if !inSub[r.ClusterID] {
			return fmt.Errorf("the whole plan reclaims %+v in a partition not planned (settled)", r)
		}
		want.Reclaims = append(want.Reclaims, r)
	}
	for _, sf := range full.Shortfalls {
		if inSub[sf.ClusterID] {
			want.Shortfalls = append(want.Shortfalls, sf)
		}
	}
	byID := map[string]ClusterState{}
	for _, cs := range full.Clusters {
		byID[cs.ClusterID] = cs
	}
	for _, c := range s.Clusters {
		if cs := byID[c.ID]; !inSub[c.ID] && (c.Status != cs.Status || c.Unfulfilled != cs.Unfulfilled || c.UnfulfilledMessage != cs.Message) {
			return fmt.Errorf("cluster %s of a settled partition would change: stored %s/%s, planned %+v", c.ID, c.Status, c.Unfulfilled, cs)
		}
	}
	for _, cs := range got.Clusters {
		want.Clusters = append(want.Clusters, byID[cs.ClusterID])
	}
	got = canonical(got)
	want = canonical(want)
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("at %s the partitions' plan differs from the whole plan's:\n got %+v\nwant %+v", now, got, want)
	}
	return nil
}

// canonical is p with its reclaims and shortfalls in one order (the
// whole plan orders reclaims by kind across partitions, Partitioned by
// partition), no empty slices, and no wake-up (the whole plan's has every
// partition's).
func canonical(p Plan) Plan {
	p.Reclaims = slices.Clone(p.Reclaims)
	p.Shortfalls = slices.Clone(p.Shortfalls)
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
