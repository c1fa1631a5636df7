package allocator

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sparecap/sparecap/internal/domain"
)

// harmWorld is one cluster "a" holding n ready preemptible nodes (oldest
// first) on n machines, everything else free.
func harmWorld(t interface{ Fatalf(string, ...any) }, n int) (*world, []domain.Node) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", n)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 8 * n})
	w.settle()
	nodes := w.nodesOf("a", domain.Preemptible, domain.NodeReady)
	if len(nodes) != n {
		t.Fatalf("a holds %d nodes, want %d", len(nodes), n)
	}
	w.loads = map[string]domain.NodeLoad{}
	return w, nodes
}

func ids(ns []domain.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestDemandTakesTheGangWhole is the example: a gang across 4
// nodes and 4 single-node jobs on 4 others, all started together with no
// checkpoint; standard demand for 4 nodes takes the gang's 4 (the same
// work lost, one job stopped rather than four), and says why.
func TestDemandTakesTheGangWhole(t *testing.T) {
	w, nodes := harmWorld(t, 8)
	for i, n := range nodes {
		l := domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 3600}
		if i%2 == 0 { // the gang interleaved with the singles by age
			l.Gang = "jobset/train"
		}
		w.loads[n.ID] = l
	}
	w.now = w.now.Add(time.Hour)
	pl, sf := w.tryCluster(domain.Cluster{ID: "b", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 32})
	if sf != nil {
		t.Fatal(sf)
	}
	want := []string{nodes[0].ID, nodes[2].ID, nodes[4].ID, nodes[6].ID}
	if got := sorted(reclaimed(pl)); !slices.Equal(got, sorted(want)) {
		t.Fatalf("reclaimed %v, want the gang's %v", got, want)
	}
	if why := pl.Reclaims[0].Why; !strings.Contains(why, "stops gang jobset/train") {
		t.Fatalf("first victim's why %q, want it to name the gang", why)
	}
	if why := pl.Reclaims[1].Why; !strings.Contains(why, "with the rest of gang jobset/train") {
		t.Fatalf("second victim's why %q", why)
	}
}

// TestRecentCheckpointGoesFirst: of two busy nodes, the one whose job
// checkpointed a moment ago goes before the one that has not in an hour,
// even though it is the older node.
func TestRecentCheckpointGoesFirst(t *testing.T) {
	w, nodes := harmWorld(t, 2)
	w.loads[nodes[0].ID] = domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 60}
	w.loads[nodes[1].ID] = domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 3600}
	w.cluster("a").DesiredPreemptibleGPUs = 8
	pl := w.plan()
	if got := reclaimed(pl); !slices.Equal(got, []string{nodes[0].ID}) {
		t.Fatalf("reclaimed %v, want the just-checkpointed %s", got, nodes[0].ID)
	}
	if why := pl.Reclaims[0].Why; !strings.Contains(why, "0.1 GPU-hours") {
		t.Fatalf("why %q, want the work it loses", why)
	}
}

// TestSurplusMembersGoBeforeAnyGangStops: an elastic gang of 4 that needs
// 2 gives its 2 surplus members before a single node of little work is
// stopped; past the surplus, the gang's core is hit only when that hurts
// least.
func TestSurplusMembersGoBeforeAnyGangStops(t *testing.T) {
	w, nodes := harmWorld(t, 5)
	for _, n := range nodes[:4] {
		w.loads[n.ID] = domain.NodeLoad{Known: true, Gang: "pg/elastic", GangMin: 2, LostGPUSeconds: 8 * 7200}
	}
	w.loads[nodes[4].ID] = domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 60}
	w.cluster("a").DesiredPreemptibleGPUs = 16 // give up 3
	pl := w.plan()
	got := reclaimed(pl)
	// The two youngest surplus members, then the single node: stopping
	// the gang would lose 16 GPU-hours, the single node 8 GPU-minutes.
	want := []string{nodes[3].ID, nodes[2].ID, nodes[4].ID}
	if !slices.Equal(got, want) {
		t.Fatalf("reclaimed %v, want the surplus %v then the single node", got, want)
	}
	if why := pl.Reclaims[0].Why; !strings.Contains(why, "surplus member of gang pg/elastic (4 running, 2 needed)") {
		t.Fatalf("why %q", why)
	}
}

// TestProtectedWorkGoesLast: work its tenant protects goes only when
// nothing else can serve, whatever the others would lose.
func TestProtectedWorkGoesLast(t *testing.T) {
	w, nodes := harmWorld(t, 2)
	w.loads[nodes[0].ID] = domain.NodeLoad{Known: true, Protected: true}
	w.loads[nodes[1].ID] = domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 36000}
	w.cluster("a").DesiredPreemptibleGPUs = 8
	if got := reclaimed(w.plan()); !slices.Equal(got, []string{nodes[1].ID}) {
		t.Fatalf("reclaimed %v, want the unprotected %s", got, nodes[1].ID)
	}
	w.cluster("a").DesiredPreemptibleGPUs = 0
	pl := w.plan()
	if len(pl.Reclaims) != 2 || !strings.Contains(pl.Reclaims[1].Why, "protected by its tenant") {
		t.Fatalf("scaled to zero: %+v, want both, the protected one saying so", pl.Reclaims)
	}
}

// TestLeastHarmAgainstAnOracle: on small clusters of random gangs, loads
// and demands, the nodes a scale-down gives up are as many as asked, idle
// ones first, and no other choice of as many nodes hurts less (by brute
// force over every subset); every stopped gang but one gives all its
// nodes.
func TestLeastHarmAgainstAnOracle(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 9).Draw(rt, "nodes")
		w, nodes := harmWorld(rt, n)
		loads := make([]domain.NodeLoad, n)
		for i := range nodes {
			l := domain.NodeLoad{Known: true}
			switch rapid.IntRange(0, 5).Draw(rt, "kind") {
			case 0:
				l.Idle = true
			case 1, 2:
				l.Gang = fmt.Sprintf("g%d", rapid.IntRange(0, 2).Draw(rt, "gang"))
			}
			l.LostGPUSeconds = int64(rapid.IntRange(0, 5).Draw(rt, "lost")) * 3600
			l.Protected = rapid.IntRange(0, 6).Draw(rt, "protected") == 0
			l.Priority = int64(rapid.SampledFrom([]int{0, 0, 0, 100}).Draw(rt, "priority"))
			loads[i] = l
		}
		// A gang's minimum is one number for all its members.
		mins := map[string]int{}
		for i := range loads {
			g := loads[i].Gang
			if _, ok := mins[g]; !ok && g != "" {
				mins[g] = rapid.IntRange(0, 3).Draw(rt, "min")
			}
			loads[i].GangMin = mins[g]
			if loads[i].Idle {
				loads[i] = domain.NodeLoad{Known: true, Idle: true}
			}
			w.loads[nodes[i].ID] = loads[i]
		}
		k := rapid.IntRange(1, n).Draw(rt, "give")
		w.cluster("a").DesiredPreemptibleGPUs = 8 * (n - k)
		got := reclaimed(w.plan())
		if len(got) != k {
			rt.Fatalf("gave up %d nodes, want %d", len(got), k)
		}
		pos := map[string]int{}
		for i, nd := range nodes {
			pos[nd.ID] = i
		}
		var set uint
		for _, id := range got {
			set |= 1 << pos[id]
		}
		idle := 0
		for i := range loads {
			if loads[i].Idle {
				idle++
			}
		}
		for j, id := range got[:min(idle, k)] {
			if !loads[pos[id]].Idle {
				rt.Fatalf("victim %d (%s) is busy while %d nodes are idle", j, id, idle)
			}
		}
		best := oracleHarm(loads, set)
		for s := uint(0); s < 1<<n; s++ {
			if bits.OnesCount(s) == k && oracleHarm(loads, s).less(best) {
				rt.Fatalf("gave up %b at harm %+v; %b hurts less: %+v", set, best, s, oracleHarm(loads, s))
			}
		}
		partial := 0
		for g := range mins {
			taken, all := 0, 0
			for i := range loads {
				if loads[i].Gang == g {
					all++
					if set&(1<<i) != 0 {
						taken++
					}
				}
			}
			if surplus := max(all-mins[g], 0); mins[g] > 0 && taken <= surplus {
				continue // not stopped
			}
			if taken > 0 && taken < all {
				partial++
			}
		}
		if partial > 1 {
			rt.Fatalf("%d gangs were stopped without giving all their nodes", partial)
		}
	})
}

// oracleCost is what giving up a set of nodes costs, compared in order:
// the most kept work stopped (protected above the rest, then by
// priority), then the harm (ignoring the nodes' ages).
type oracleCost struct {
	protected bool
	priority  int64
	h         harm
}

func (a oracleCost) less(b oracleCost) bool {
	switch {
	case a.protected != b.protected:
		return !a.protected
	case a.priority != b.priority:
		return a.priority < b.priority
	}
	return a.h.lessIgnoringAge(b.h)
}

// oracleHarm is the cost of giving up the nodes in set: a gang stops
// when more of its members go than its surplus (or any, without a
// minimum) and then costs all its members' work; a node of its own
// costs its work.
func oracleHarm(loads []domain.NodeLoad, set uint) oracleCost {
	var c oracleCost
	stop := func(protected bool, priority int64, h harm) {
		c.h = c.h.add(h)
		if protected && !c.protected {
			c.protected, c.priority = true, priority
		} else if protected == c.protected {
			c.priority = max(c.priority, priority)
		}
	}
	var h harm
	gangs := map[string][]int{}
	for i, l := range loads {
		switch {
		case l.Idle:
		case l.Gang != "":
			gangs[l.Gang] = append(gangs[l.Gang], i)
		case set&(1<<i) != 0:
			stop(l.Protected, l.Priority, harm{jobs: 1, lost: l.LostGPUSeconds, protected: b2i(l.Protected)})
		}
	}
	for _, members := range gangs {
		taken, min := 0, loads[members[0]].GangMin
		g := harm{jobs: 1}
		var pri int64
		for _, i := range members {
			if set&(1<<i) != 0 {
				taken++
			}
			g.lost += loads[i].LostGPUSeconds
			if loads[i].Protected {
				g.protected = 1
			}
			pri = max(pri, loads[i].Priority)
		}
		surplus := 0
		if min > 0 {
			surplus = max(len(members)-min, 0)
		}
		if taken > surplus {
			stop(g.protected > 0, pri, g)
		}
	}
	c.h = c.h.add(h)
	return c
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func (a harm) lessIgnoringAge(b harm) bool {
	a.rank, b.rank = 0, 0
	return a.less(b)
}

// TestLowPriorityWorkGoesFirst: of two busy nodes, the one whose work has
// the lower priority goes, even though it would lose more.
func TestLowPriorityWorkGoesFirst(t *testing.T) {
	w, nodes := harmWorld(t, 2)
	w.loads[nodes[0].ID] = domain.NodeLoad{Known: true, Priority: 1000, LostGPUSeconds: 60}
	w.loads[nodes[1].ID] = domain.NodeLoad{Known: true, LostGPUSeconds: 8 * 3600}
	w.cluster("a").DesiredPreemptibleGPUs = 8
	if got := reclaimed(w.plan()); !slices.Equal(got, []string{nodes[1].ID}) {
		t.Fatalf("reclaimed %v, want the low-priority %s", got, nodes[1].ID)
	}
}

// BenchmarkLeastHarmScaleDown: a cluster holding every machine of a
// 100,000-GPU partition (12,500 nodes) in gangs of 8 nodes and single
// nodes, all with work known, gives up give of them: the cost of the
// least-harm choice on top of a plan (docs/perf.md, "Least harm on a
// month").
func BenchmarkLeastHarmScaleDown(b *testing.B) {
	const nodes = 12500
	for _, c := range []struct {
		give  int
		known bool
	}{{1, false}, {1, true}, {100, true}, {6250, false}, {6250, true}} {
		give := c.give
		b.Run(fmt.Sprintf("give=%d/known=%v", give, c.known), func(b *testing.B) {
			w, ns := harmWorld(b, nodes)
			for i, n := range ns {
				if !c.known {
					w.loads[n.ID] = domain.NodeLoad{Known: true}
					continue
				}
				l := domain.NodeLoad{Known: true, LostGPUSeconds: int64(8 * (i % 3600))}
				if i%2 == 0 {
					l.Gang = fmt.Sprintf("g%d", i/16)
				}
				w.loads[n.ID] = l
			}
			w.cluster("a").DesiredPreemptibleGPUs = 8 * (nodes - give)
			b.ReportAllocs()
			for b.Loop() {
				if pl := w.plan(); len(pl.Reclaims) != give {
					b.Fatalf("%d reclaims, want %d", len(pl.Reclaims), give)
				}
			}
		})
	}
}

// TestCheapestPerNode: past the exact choice's size, whole items go by
// least work lost per node they give, protected ones last, until the
// nodes needed are covered, in their age order.
func TestCheapestPerNode(t *testing.T) {
	item := func(rank int64, nodes int, lost int64, protected int32) *harmItem {
		return &harmItem{nodes: make([]int32, nodes), cost: harm{jobs: 1, lost: lost, rank: rank, protected: protected}}
	}
	gang := item(0, 4, 400, 0)  // 100 a node
	single := item(1, 1, 50, 0) // 50 a node
	dear := item(2, 1, 1000, 0) // 1000 a node
	kept := item(3, 1, 0, 1)    // protected
	items := []*harmItem{gang, single, dear, kept}
	for _, tc := range []struct {
		k    int
		want []*harmItem
	}{
		{1, []*harmItem{single}},
		{3, []*harmItem{gang, single}},
		{5, []*harmItem{gang, single}},
		{6, []*harmItem{gang, single, dear}},
		{7, []*harmItem{gang, single, dear, kept}},
	} {
		if got := cheapestPerNode(items, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("k=%d: got %v, want %v", tc.k, got, tc.want)
		}
	}
}
