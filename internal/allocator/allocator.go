package allocator

import (
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Snapshot is the state a plan is made from. It has the same shape as
// store.Snapshot so the controller converts one into the other for free.
type Snapshot struct {
	Machines     []domain.Machine
	Reservations []domain.Reservation
	// Clusters not fully deleted.
	Clusters []domain.Cluster
	// Nodes not removed.
	Nodes []*domain.Node
}

// Config holds the knobs of a plan.
type Config struct {
	// DrainWindow is the bounded notice; deadlines are now + DrainWindow.
	DrainWindow time.Duration
	// Cooldown > 0 keeps machines that standard nodes are leaving out of
	// preemptible lending; once removed, the machine's CooldownUntil (set by
	// the controller) takes over.
	Cooldown time.Duration
}

// Plan is the allocator's output. Apply Reclaims, then Provisions, then
// Clusters; see the package documentation.
type Plan struct {
	Reclaims   []Reclaim
	Provisions []Provision
	Clusters   []ClusterState
	// Shortfalls lists clusters whose standard demand cannot be met.
	Shortfalls []Shortfall
	// NextWake is the earliest time at which the plan would change by the
	// passing of time alone (a cooldown ending); zero if none.
	NextWake time.Time
}

// Reclaim takes a node back from its cluster.
type Reclaim struct {
	NodeID    string
	ClusterID string
	MachineID string
	Cause     domain.DrainCause
	// Cancel is set for pending nodes: they hold no machine yet and are
	// dropped without a drain.
	Cancel bool
	// Deadline is now + DrainWindow; zero when Cancel.
	Deadline time.Time
}

// Provision creates a node of a cluster on a machine.
type Provision struct {
	ClusterID string
	MachineID string
	Class     domain.ComputeClass
	GPUs      int
	// Pending: the machine is still occupied by a node that is draining;
	// the new node starts once that one is removed.
	Pending bool
}

// ClusterState is what a cluster looks like once the plan is applied.
type ClusterState struct {
	ClusterID string
	Status    domain.ClusterStatus
	// StandardGPUs on live standard nodes (pending, provisioning, ready).
	StandardGPUs int
	// AllocatedPreemptibleGPUs on ready preemptible nodes.
	AllocatedPreemptibleGPUs int
	// FairShareGPUs is the cluster's share of spare capacity.
	FairShareGPUs int
	Unfulfilled   domain.UnfulfilledReason
	Message       string
}

// Shortfall is standard demand that cannot be met.
type Shortfall struct {
	ClusterID string
	Region    string
	GPUType   string
	WantGPUs  int
	CanGPUs   int
}

func (s Shortfall) Error() string {
	return fmt.Sprintf("asked for %d %s GPUs in %s; %d can be had", s.WantGPUs, s.GPUType, s.Region, s.CanGPUs)
}

type partKey struct{ region, gpuType string }

type poolKey struct {
	part int32
	res  string
}

// planner holds the indexes of one Plan call. Everything is addressed by
// index into the snapshot's slices to keep a 100,000-GPU plan within a few
// allocations.
type planner struct {
	s   *Snapshot
	now time.Time
	cfg Config
	out Plan

	resProject map[string]string

	// Per machine.
	mPart []int32
	occ   []int32 // active node, or -1
	claim []int32 // pending node, or -1
	pools map[poolKey]*poolRange

	// Per cluster.
	cPart    []int32
	cNodes   []int32 // node indexes grouped by cluster (offsets in cStart)
	cStart   []int32
	stdLive  []int32 // GPUs
	preLive  []int32 // nodes
	preReady []int32 // GPUs
	stdWait  []bool  // the plan provisions standard nodes for the cluster
	short    []bool

	// Per node.
	fair []int32 // preemptible share, in nodes
	dem  []int32 // preemptible target, in nodes

	nCluster []int32
	nMachine []int32
	facts    []nodeFact
	gone     []bool // reclaimed or cancelled by this plan

	// Per partition.
	partMachines [][]int32 // machine indexes
	partClusters [][]int32 // cluster indexes, oldest first
	partGPM      []int     // GPUs per machine

	scratch []int32
	// msgs holds the partition's Unfulfilled messages made so far: they
	// depend only on the reason and the share, and clusters of a
	// partition mostly have the same ones.
	msgs map[msgKey]string
	// Buffers reused by every partition's preemptible step.
	free0, leaving0 []int32
}

// Compute plans what should change. It is deterministic: the same snapshot
// and time give the same plan.
func Compute(s Snapshot, now time.Time, cfg Config) Plan {
	return compute(s, now, cfg, &Planner{})
}

func compute(s Snapshot, now time.Time, cfg Config, pl *Planner) Plan {
	if cfg.DrainWindow <= 0 {
		cfg.DrainWindow = domain.DefaultDrainWindow
	}
	p := &planner{s: &s, now: now, cfg: cfg}
	p.index(pl)
	p.deleted()
	p.outOfService()
	p.scaleDown()
	for part := range p.partMachines {
		p.standard(int32(part))
	}
	for part := range p.partMachines {
		p.preemptible(int32(part))
	}
	p.status()
	return p.out
}

func (p *planner) index(pl *Planner) {
	s := p.s
	nm, nc, nn := len(s.Machines), len(s.Clusters), len(s.Nodes)
	ml, cl, nj := pl.layouts(s)

	p.resProject = make(map[string]string, len(s.Reservations))
	for i := range s.Reservations {
		p.resProject[s.Reservations[i].ID] = s.Reservations[i].ProjectID
	}

	p.mPart = ml.mPart
	p.occ = make([]int32, 2*nm)
	p.claim = p.occ[nm:]
	p.occ = p.occ[:nm]
	for i := range p.occ {
		p.occ[i], p.claim[i] = -1, -1
	}

	p.cPart = cl.cPart
	ints := make([]int32, 5*nc)
	p.stdLive, p.preLive, p.preReady = ints[:nc], ints[nc:2*nc], ints[2*nc:3*nc]
	p.fair, p.dem, p.cStart = ints[3*nc:4*nc], ints[4*nc:5*nc], make([]int32, nc+1)
	bools := make([]bool, 2*nc)
	p.stdWait, p.short = bools[:nc], bools[nc:]

	p.nCluster, p.nMachine, p.facts, p.cNodes = nj.nCluster, nj.nMachine, nj.facts, make([]int32, nn)
	p.gone = make([]bool, nn)
	for i, f := range p.facts {
		ci, mi := p.nCluster[i], p.nMachine[i]
		if ci >= 0 {
			p.cStart[ci+1]++
		}
		if mi >= 0 {
			switch {
			case f.is(fPending):
				p.claim[mi] = int32(i)
			case f.is(fActive):
				p.occ[mi] = int32(i)
			}
		}
		if ci >= 0 && f.is(fLive) {
			p.count(ci, f, +1)
		}
	}
	// Group node indexes by cluster (counting sort).
	for i := 1; i <= nc; i++ {
		p.cStart[i] += p.cStart[i-1]
	}
	fill := slices.Clone(p.cStart[:nc])
	for i := range s.Nodes {
		if ci := p.nCluster[i]; ci >= 0 {
			p.cNodes[fill[ci]] = int32(i)
			fill[ci]++
		}
	}

	p.partMachines, p.partClusters, p.partGPM = cl.partMachines, cl.partClusters, cl.partGPM

	// New nodes go mostly to free or draining machines, at most one each:
	// sizing Provisions for those spares the slice its growth copies.
	open := 16
	for mi := range p.claim {
		if p.claim[mi] < 0 && !s.Machines[mi].OutOfService && (p.occ[mi] < 0 || !p.facts[p.occ[mi]].is(fLive)) {
			open++
		}
	}
	p.out.Provisions = make([]Provision, 0, open)

	// Free machines of a pool are found with a cursor instead of a scan.
	p.pools = make(map[poolKey]*poolRange, len(ml.pools))
	ranges := make([]poolRange, len(ml.pools))
	for i, sp := range ml.pools {
		ranges[i].ms = sp.ms
		p.pools[sp.key] = &ranges[i]
	}
}

// poolRange is the machines of one pool of one partition, with a cursor
// past the machines known not to be free any more. Machines never become
// free during a plan (a reclaim only starts a drain), so the cursor only
// moves forward.
type poolRange struct {
	ms     []int32
	cursor int
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (p *planner) count(ci int32, f nodeFact, sign int32) {
	switch {
	case f.is(fStandard):
		p.stdLive[ci] += sign * f.gpus
	case f.is(fPreemptible):
		p.preLive[ci] += sign
		if f.is(fReady) {
			p.preReady[ci] += sign * f.gpus
		}
	}
}

// reclaim takes node ni away from its cluster within this plan.
func (p *planner) reclaim(ni int32, cause domain.DrainCause) {
	if p.gone[ni] {
		return
	}
	n := p.s.Nodes[ni]
	p.gone[ni] = true
	if ci := p.nCluster[ni]; ci >= 0 {
		p.count(ci, p.facts[ni], -1)
	}
	r := Reclaim{NodeID: n.ID, ClusterID: n.ClusterID, MachineID: n.MachineID, Cause: cause}
	if n.State == domain.NodePending {
		r.Cancel = true
		if mi := p.nMachine[ni]; mi >= 0 && p.claim[mi] == ni {
			p.claim[mi] = -1
		}
	} else {
		r.Deadline = p.now.Add(p.cfg.DrainWindow)
	}
	p.out.Reclaims = append(p.out.Reclaims, r)
}

// Node indexes at or beyond len(Nodes) stand for nodes this plan provisions:
// index len(Nodes)+i is Provisions[i].

// liveNode reports whether node index ni is live and not taken by this plan.
func (p *planner) liveNode(ni int32) bool {
	if ni < 0 {
		return false
	}
	if int(ni) >= len(p.s.Nodes) {
		return true
	}
	return !p.gone[ni] && p.facts[ni].is(fLive)
}

func (p *planner) classOf(ni int32) domain.ComputeClass {
	if int(ni) >= len(p.s.Nodes) {
		return p.out.Provisions[int(ni)-len(p.s.Nodes)].Class
	}
	switch f := p.facts[ni]; {
	case f.is(fStandard):
		return domain.Standard
	case f.is(fPreemptible):
		return domain.Preemptible
	}
	return p.s.Nodes[ni].Class
}

// free: not out of service, no active node, nobody waiting for it.
func (p *planner) free(mi int32) bool {
	return p.occ[mi] < 0 && p.claim[mi] < 0 && !p.s.Machines[mi].OutOfService
}

// leaving: its active node is on the way out and nobody is waiting for it.
func (p *planner) leaving(mi int32) bool {
	if p.claim[mi] >= 0 || p.s.Machines[mi].OutOfService {
		return false
	}
	o := p.occ[mi]
	return o >= 0 && !p.liveNode(o)
}

func (p *planner) cooling(mi int32) bool {
	if p.s.Machines[mi].CooldownUntil.After(p.now) {
		return true
	}
	o := p.occ[mi]
	return p.cfg.Cooldown > 0 && o >= 0 && !p.liveNode(o) && p.classOf(o) == domain.Standard
}

func (p *planner) deleted() {
	for ci := range p.s.Clusters {
		if !p.s.Clusters[ci].Deleting {
			continue
		}
		for _, ni := range p.nodesOf(int32(ci)) {
			if p.liveNode(ni) {
				p.reclaim(ni, domain.CauseClusterDeleted)
			}
		}
	}
}

func (p *planner) outOfService() {
	for mi := range p.s.Machines {
		if !p.s.Machines[mi].OutOfService {
			continue
		}
		if o := p.occ[mi]; p.liveNode(o) {
			p.reclaim(o, domain.CauseOutOfService)
		}
		if c := p.claim[mi]; c >= 0 && p.liveNode(c) {
			p.reclaim(c, domain.CauseOutOfService)
		}
	}
}

func (p *planner) nodesOf(ci int32) []int32 {
	return p.cNodes[p.cStart[ci]:p.cStart[ci+1]]
}

// victimsOf returns the cluster's live nodes of a class in the order they
// are given up: pending, then provisioning, then ready; youngest first.
func (p *planner) victimsOf(ci int32, class domain.ComputeClass) []int32 {
	p.scratch = p.scratch[:0]
	for _, ni := range p.nodesOf(ci) {
		if p.liveNode(ni) && p.classOf(ni) == class {
			p.scratch = append(p.scratch, ni)
		}
	}
	slices.SortFunc(p.scratch, p.youngerFirst)
	return p.scratch
}

func stateRank(s domain.NodeState) int {
	switch s {
	case domain.NodePending:
		return 0
	case domain.NodeProvisioning:
		return 1
	}
	return 2
}

func (p *planner) youngerFirst(a, b int32) int {
	na, nb := p.s.Nodes[a], p.s.Nodes[b]
	if c := stateRank(na.State) - stateRank(nb.State); c != 0 {
		return c
	}
	if c := nb.CreatedAt.Compare(na.CreatedAt); c != 0 {
		return c
	}
	return cmpString(nb.ID, na.ID)
}

func (p *planner) scaleDown() {
	for ci := range p.s.Clusters {
		c := &p.s.Clusters[ci]
		if c.Deleting {
			continue
		}
		if int(p.stdLive[ci]) > c.NumGPUs {
			for _, ni := range p.victimsOf(int32(ci), domain.Standard) {
				if g := int(p.facts[ni].gpus); int(p.stdLive[ci])-g >= c.NumGPUs {
					p.reclaim(ni, domain.CauseScaledDown)
				}
			}
		}
		gpm := p.partGPM[p.cPart[ci]]
		if int(p.preLive[ci]) > c.DesiredPreemptibleGPUs/gpm {
			for _, ni := range p.victimsOf(int32(ci), domain.Preemptible) {
				if int(p.preLive[ci]) > c.DesiredPreemptibleGPUs/gpm {
					p.reclaim(ni, domain.CauseScaledDown)
				}
			}
		}
	}
}

// eligible reports whether machine mi may serve cluster ci's standard nodes.
func (p *planner) eligible(ci, mi int32) bool {
	c, m := &p.s.Clusters[ci], &p.s.Machines[mi]
	if c.BillingType == domain.BillingReserved {
		return m.ReservationID != "" && p.resProject[m.ReservationID] == c.ProjectID
	}
	return m.ReservationID == ""
}

func (p *planner) provision(ci, mi int32, class domain.ComputeClass, pending bool) {
	m := &p.s.Machines[mi]
	p.out.Provisions = append(p.out.Provisions, Provision{
		ClusterID: p.s.Clusters[ci].ID, MachineID: m.ID, Class: class, GPUs: m.GPUs, Pending: pending,
	})
	ni := int32(len(p.s.Nodes) + len(p.out.Provisions) - 1)
	if pending {
		p.claim[mi] = ni
	} else {
		p.occ[mi] = ni
	}
	if class == domain.Standard {
		p.stdLive[ci] += int32(m.GPUs)
		p.stdWait[ci] = true
	} else {
		p.preLive[ci]++
	}
}

func (p *planner) standard(part int32) {
	for _, ci := range p.partClusters[part] {
		c := &p.s.Clusters[ci]
		if c.Deleting || int(p.stdLive[ci]) >= c.NumGPUs {
			continue
		}
		p.findStandard(part, ci)
		if int(p.stdLive[ci]) < c.NumGPUs {
			p.short[ci] = true
			p.out.Shortfalls = append(p.out.Shortfalls, Shortfall{
				ClusterID: c.ID, Region: c.Region, GPUType: c.GPUType,
				WantGPUs: c.NumGPUs, CanGPUs: int(p.stdLive[ci]),
			})
		}
	}
}

func (p *planner) need(ci int32) bool {
	return int(p.stdLive[ci])+p.partGPM[p.cPart[ci]] <= p.s.Clusters[ci].NumGPUs
}

func (p *planner) findStandard(part, ci int32) {
	c := &p.s.Clusters[ci]
	// 1. Free machines of the cluster's pools.
	for _, pr := range p.poolsFor(part, c) {
		for p.need(ci) && pr.cursor < len(pr.ms) {
			mi := pr.ms[pr.cursor]
			pr.cursor++
			if p.free(mi) {
				p.provision(ci, mi, domain.Standard, false)
			}
		}
		// A machine skipped by the cursor is not free now and cannot
		// become free during this plan.
	}
	if !p.need(ci) {
		return
	}
	// 2. Eligible machines already draining with nobody waiting, then
	// 3. those awaited only by a pending preemptible node.
	for _, mi := range p.partMachines[part] {
		if !p.need(ci) {
			return
		}
		if p.eligible(ci, mi) && p.leaving(mi) {
			p.provision(ci, mi, domain.Standard, true)
		}
	}
	for _, mi := range p.partMachines[part] {
		if !p.need(ci) {
			return
		}
		if cl := p.claim[mi]; int(cl) < len(p.s.Nodes) && p.liveNode(cl) && p.eligible(ci, mi) &&
			!p.s.Machines[mi].OutOfService && p.classOf(cl) == domain.Preemptible {
			p.reclaim(cl, domain.CausePreempted)
			p.provision(ci, mi, domain.Standard, true)
		}
	}
	// 4. Reclaim preemptible nodes on eligible machines.
	cand := p.scratch[:0]
	for _, mi := range p.partMachines[part] {
		o := p.occ[mi]
		if int(o) < len(p.s.Nodes) && p.liveNode(o) && p.claim[mi] < 0 && p.eligible(ci, mi) &&
			p.classOf(o) == domain.Preemptible {
			cand = append(cand, mi)
		}
	}
	for p.need(ci) && len(cand) > 0 {
		best := -1
		for i, mi := range cand {
			if best < 0 || p.betterVictim(p.occ[mi], p.occ[cand[best]]) {
				best = i
			}
		}
		mi := cand[best]
		cand[best] = cand[len(cand)-1]
		cand = cand[:len(cand)-1]
		p.reclaim(p.occ[mi], domain.CausePreempted)
		p.provision(ci, mi, domain.Standard, true)
	}
	p.scratch = cand[:0]
}

// betterVictim: the node whose cluster holds the most preemptible nodes per
// unit of weight (furthest above its fair share), then the youngest node.
func (p *planner) betterVictim(a, b int32) bool {
	ca, cb := p.nCluster[a], p.nCluster[b]
	if ca != cb && ca >= 0 && cb >= 0 {
		// preLive[ca]/w(ca) vs preLive[cb]/w(cb), by cross-multiplication.
		la := int64(p.preLive[ca]) * int64(weight(&p.s.Clusters[cb]))
		lb := int64(p.preLive[cb]) * int64(weight(&p.s.Clusters[ca]))
		if la != lb {
			return la > lb
		}
	}
	return p.youngerFirst(a, b) < 0
}

func weight(c *domain.Cluster) int {
	if c.Weight <= 0 {
		return 1
	}
	return c.Weight
}

// poolsFor returns the pools a cluster's standard nodes may use.
func (p *planner) poolsFor(part int32, c *domain.Cluster) []*poolRange {
	if c.BillingType != domain.BillingReserved {
		if pr := p.pools[poolKey{part, ""}]; pr != nil {
			return []*poolRange{pr}
		}
		return nil
	}
	var out []*poolRange
	for i := range p.s.Reservations {
		r := &p.s.Reservations[i]
		if r.ProjectID == c.ProjectID {
			if pr := p.pools[poolKey{part, r.ID}]; pr != nil {
				out = append(out, pr)
			}
		}
	}
	return out
}

// preemptible shares the partition's spare capacity by weighted max-min
// fairness and moves nodes toward the shares.
func (p *planner) preemptible(part int32) {
	s := p.s
	gpm := p.partGPM[part]
	supply, cooling := 0, 0
	for _, mi := range p.partMachines[part] {
		if s.Machines[mi].OutOfService {
			continue
		}
		o, cl := p.occ[mi], p.claim[mi]
		switch {
		case cl >= 0:
			if p.classOf(cl) == domain.Preemptible {
				supply++
			}
		case (o < 0 || !p.liveNode(o)) && p.cooling(mi):
			cooling++
			if cu := s.Machines[mi].CooldownUntil; cu.After(p.now) && (p.out.NextWake.IsZero() || cu.Before(p.out.NextWake)) {
				p.out.NextWake = cu
			}
		case o < 0 || !p.liveNode(o) || p.classOf(o) == domain.Preemptible:
			supply++
		}
	}

	// Water-filling: clusters sorted by target/weight; those whose target
	// fits under the level get it, the rest share what is left in
	// proportion to their weights.
	order := p.scratch[:0]
	for _, ci := range p.partClusters[part] {
		c := &s.Clusters[ci]
		p.dem[ci], p.fair[ci] = 0, 0
		if !c.Deleting && c.DesiredPreemptibleGPUs > 0 {
			p.dem[ci] = int32(c.DesiredPreemptibleGPUs / gpm)
			order = append(order, ci)
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		x := int64(p.dem[a]) * int64(weight(&s.Clusters[b]))
		y := int64(p.dem[b]) * int64(weight(&s.Clusters[a]))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	R, W := int64(supply), int64(0)
	for _, ci := range order {
		W += int64(weight(&s.Clusters[ci]))
	}
	i := 0
	for ; i < len(order); i++ {
		ci := order[i]
		w := int64(weight(&s.Clusters[ci]))
		if int64(p.dem[ci])*W > R*w {
			break
		}
		p.fair[ci] = p.dem[ci]
		R -= int64(p.dem[ci])
		W -= w
	}
	if rest := order[i:]; len(rest) > 0 {
		left := R
		for _, ci := range rest {
			f := int64(weight(&s.Clusters[ci])) * R / W
			p.fair[ci] = int32(f)
			left -= f
		}
		// The remainder (fewer nodes than clusters here) goes first to
		// clusters holding more than their share, so it moves no node;
		// then to the cluster whose target has been unmet longest, so a
		// freed node reaches every waiting cluster in turn and nobody
		// waits forever behind earlier clusters; then to clusters holding
		// more, then to older ones.
		slices.SortStableFunc(rest, func(a, b int32) int {
			if ka, kb := p.preLive[a] > p.fair[a], p.preLive[b] > p.fair[b]; ka != kb {
				if ka {
					return -1
				}
				return 1
			}
			if c := p.longerUnmet(a, b); c != 0 {
				return c
			}
			if c := int(p.preLive[b]) - int(p.preLive[a]); c != 0 {
				return c
			}
			return p.olderFirst(a, b)
		})
		for j := 0; left > 0 && j < len(rest); j++ {
			if ci := rest[j]; p.fair[ci] < p.dem[ci] {
				p.fair[ci]++
				left--
			}
		}
	}
	p.scratch = order[:0]

	// Clusters above their share give up their youngest nodes.
	for _, ci := range p.partClusters[part] {
		if over := p.preLive[ci] - p.fair[ci]; over > 0 {
			for _, ni := range p.victimsOf(ci, domain.Preemptible) {
				if p.preLive[ci] <= p.fair[ci] {
					break
				}
				p.reclaim(ni, domain.CauseFairShare)
			}
		}
	}

	// Clusters below their share get free machines, then draining ones.
	// Idle reserved machines are lent before on-demand ones: on-demand
	// requests are the more frequent, and each one that finds a free
	// machine is a preemption avoided.
	free, leaving := p.free0[:0], p.leaving0[:0]
	for pass := 0; pass < 2; pass++ {
		for _, mi := range p.partMachines[part] {
			if (s.Machines[mi].ReservationID != "") != (pass == 0) {
				continue
			}
			switch {
			case p.free(mi) && !p.cooling(mi):
				free = append(free, mi)
			case p.leaving(mi) && !p.cooling(mi):
				leaving = append(leaving, mi)
			}
		}
	}
	p.free0, p.leaving0 = free[:0], leaving[:0] // keep the grown buffers
	totalFair := int32(0)
	for _, ci := range p.partClusters[part] {
		totalFair += p.fair[ci]
		for p.preLive[ci] < p.fair[ci] {
			if len(free) > 0 {
				p.provision(ci, free[0], domain.Preemptible, false)
				free = free[1:]
			} else if len(leaving) > 0 {
				p.provision(ci, leaving[0], domain.Preemptible, true)
				leaving = leaving[1:]
			} else {
				break // unreachable while supply is counted right
			}
		}
	}

	if p.msgs == nil {
		p.msgs = make(map[msgKey]string, 8)
	}
	clear(p.msgs)
	for _, ci := range p.partClusters[part] {
		p.reason(ci, gpm, cooling, totalFair)
	}
}

// longerUnmet orders clusters by how long their preemptible target has
// been unmet, longest first; a cluster with no UnmetSince (met, or not
// yet recorded) has waited least.
func (p *planner) longerUnmet(a, b int32) int {
	ua, ub := p.s.Clusters[a].UnmetSince, p.s.Clusters[b].UnmetSince
	switch {
	case ua.Equal(ub):
		return 0
	case ua.IsZero():
		return 1
	case ub.IsZero():
		return -1
	}
	return ua.Compare(ub)
}

// UnmetSince is what a cluster's UnmetSince becomes once its state cs
// from a plan made at now is applied: the time its preemptible target
// became unmet, kept while it stays unmet, zero once it is met. prev is
// the cluster's current UnmetSince. The controller writes it with the
// cluster's status; the next plans use it to give freed nodes to the
// longest waiter.
func UnmetSince(prev time.Time, cs ClusterState, now time.Time) time.Time {
	if cs.Unfulfilled == domain.UnfulfilledNone || cs.Status == domain.StatusDeleting {
		return time.Time{}
	}
	if prev.IsZero() {
		return now
	}
	return prev
}

type msgKey struct {
	reason domain.UnfulfilledReason
	gpus   int
}

// message returns the partition's message for reason and gpus, made by
// f the first time.
func (p *planner) message(reason domain.UnfulfilledReason, gpus int, f func() string) string {
	k := msgKey{reason, gpus}
	if m, ok := p.msgs[k]; ok {
		return m
	}
	m := f()
	p.msgs[k] = m
	return m
}

func (p *planner) olderFirst(a, b int32) int {
	ca, cb := &p.s.Clusters[a], &p.s.Clusters[b]
	if c := ca.CreatedAt.Compare(cb.CreatedAt); c != 0 {
		return c
	}
	return cmpString(ca.ID, cb.ID)
}

// reason records why a cluster's preemptible target is not met, if it is
// not. It is written into the cluster's ClusterState by status.
func (p *planner) reason(ci int32, gpm, cooling int, totalFair int32) {
	c := &p.s.Clusters[ci]
	st := p.state(ci)
	st.FairShareGPUs = int(p.fair[ci]) * gpm
	switch {
	case c.Deleting || int(p.preReady[ci]) >= c.DesiredPreemptibleGPUs:
		return
	case p.fair[ci] < p.dem[ci] && cooling > 0:
		st.Unfulfilled = domain.UnfulfilledCoolingDown
		st.Message = p.message(st.Unfulfilled, cooling*gpm, func() string {
			return fmt.Sprintf("%d %s GPUs in %s were just released by standard nodes and are cooling down before they are lent as preemptible",
				cooling*gpm, c.GPUType, c.Region)
		})
	case p.fair[ci] < p.dem[ci] && totalFair > p.fair[ci]:
		st.Unfulfilled = domain.UnfulfilledFairShare
		st.Message = p.message(st.Unfulfilled, st.FairShareGPUs, func() string {
			return fmt.Sprintf("spare %s capacity in %s is shared with other clusters; this cluster's fair share is %d GPUs",
				c.GPUType, c.Region, st.FairShareGPUs)
		})
	case p.fair[ci] < p.dem[ci] && st.FairShareGPUs == 0:
		st.Unfulfilled = domain.UnfulfilledNoCapacity
		st.Message = p.message(st.Unfulfilled, 0, func() string {
			return fmt.Sprintf("no spare %s capacity in %s right now; the target is kept and filled as capacity returns",
				c.GPUType, c.Region)
		})
	case p.fair[ci] < p.dem[ci]:
		st.Unfulfilled = domain.UnfulfilledNoCapacity
		st.Message = p.message(st.Unfulfilled, st.FairShareGPUs, func() string {
			return fmt.Sprintf("only %d GPUs of spare %s capacity in %s right now; the target is kept and filled as capacity returns",
				st.FairShareGPUs, c.GPUType, c.Region)
		})
	default:
		st.Unfulfilled = domain.UnfulfilledProvisioning
		// Constant text: on a cold start every cluster is here at once.
		st.Message = "capacity found; nodes are being provisioned or wait for a drain to end"
	}
}

// state returns the cluster's entry of out.Clusters, created in cluster
// order on first use.
func (p *planner) state(ci int32) *ClusterState {
	if p.out.Clusters == nil {
		p.out.Clusters = make([]ClusterState, len(p.s.Clusters))
	}
	return &p.out.Clusters[ci]
}

func (p *planner) status() {
	for ci := range p.s.Clusters {
		c := &p.s.Clusters[ci]
		st := p.state(int32(ci))
		st.ClusterID = c.ID
		st.StandardGPUs = int(p.stdLive[ci])
		st.AllocatedPreemptibleGPUs = int(p.preReady[ci])
		waiting := p.stdWait[ci]
		for _, ni := range p.nodesOf(int32(ci)) {
			if f := p.facts[ni]; f.is(fStandard) && p.liveNode(ni) && !f.is(fReady) {
				waiting = true
			}
		}
		switch {
		case c.Deleting:
			st.Status = domain.StatusDeleting
		case p.short[ci] || st.StandardGPUs < c.NumGPUs:
			st.Status = domain.StatusDegraded
		case waiting:
			st.Status = domain.StatusWaiting
		default:
			st.Status = domain.StatusReady
		}
	}
}

// Availability is the capacity of one partition right now, in GPUs.
type Availability struct {
	Region  string
	GPUType string
	Total   int
	// OnDemand is what a new ON_DEMAND standard request could get: on-demand
	// machines that are free, draining, or lent as preemptible.
	OnDemand int
	// Preemptible is the spare capacity preemptible targets share: machines
	// of any pool, idle reservations included, not serving standard nodes,
	// not cooling down and in service.
	Preemptible int
	// Free is what is idle this moment.
	Free             int
	Reserved         int
	InUseStandard    int
	InUsePreemptible int
	OutOfService     int
}

// Available reports each partition's capacity, in the order partitions are
// first met in the snapshot's machines. It uses the same indexes and rules
// as Compute, so what it calls available is what a plan would use.
func Available(s Snapshot, now time.Time, cfg Config) []Availability {
	p := &planner{s: &s, now: now, cfg: cfg}
	p.index(&Planner{})
	out := make([]Availability, len(p.partMachines))
	for part, ms := range p.partMachines {
		a := &out[part]
		for _, mi := range ms {
			m := &s.Machines[mi]
			a.Region, a.GPUType = m.Region, m.GPUType
			a.Total += m.GPUs
			if m.ReservationID != "" {
				a.Reserved += m.GPUs
			}
			if m.OutOfService {
				a.OutOfService += m.GPUs
				continue
			}
			o, cl := p.occ[mi], p.claim[mi]
			held := o
			if cl >= 0 {
				held = cl
			}
			standard := held >= 0 && p.liveNode(held) && p.classOf(held) == domain.Standard
			lent := held >= 0 && p.liveNode(held) && p.classOf(held) == domain.Preemptible
			switch {
			case standard:
				a.InUseStandard += m.GPUs
			case lent:
				a.InUsePreemptible += m.GPUs
			case o < 0:
				a.Free += m.GPUs
			}
			if !standard && m.ReservationID == "" {
				a.OnDemand += m.GPUs
			}
			if !standard && !p.cooling(mi) {
				a.Preemptible += m.GPUs
			}
		}
	}
	return out
}
