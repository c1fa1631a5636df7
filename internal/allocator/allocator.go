package allocator

import (
	"fmt"
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
	// Load, if set, says what a ready node runs, as its cluster's driver
	// knows it. Among the nodes a cluster gives up, ready idle ones go
	// before busy ones, and busy ones by least harm (docs/reclaim.md).
	// It must answer the same for a node throughout one plan.
	Load func(*domain.Node) domain.NodeLoad
	// MinLease, if set, is the minimum lease of a machine's pool: a
	// preemptible node ready for less than it is reclaimed for standard
	// demand only when no other node can serve it, and not at all to
	// give another cluster its fair share (docs/reclaim.md). Zero: none.
	MinLease func(*domain.Machine) time.Duration
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
	// NodeName and NodeState are the node's as the plan saw it (its
	// driver is asked what a ready node runs before the commit).
	NodeName  string
	NodeState domain.NodeState
	Cause     domain.DrainCause
	// Deadline is now + DrainWindow; zero for a pending node, which holds
	// no machine yet and is dropped without a drain.
	Deadline time.Time
	// Why this node rather than another of its cluster; empty when the
	// cause takes every node it can (a deleted cluster, a machine out of
	// service).
	Why string
}

// Provision creates a node of a cluster on a machine.
type Provision struct {
	ClusterID string
	MachineID string
	// GPUType is the machine's: the node's type.
	GPUType string
	Class   domain.ComputeClass
	GPUs    int
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
	mPart  []int32
	oos    []bool  // out of service (the machine layout's)
	oosIdx []int32 // the machines out of service
	occ    []int32 // active node, or -1
	claim  []int32 // pending node, or -1
	pools  map[poolKey]*poolRange

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
	// leaseKept is the earliest end of the leases that kept nodes from a
	// fair share in the partition's preemptible step (zero: none).
	leaseKept time.Time
	// states, if set, is where the clusters' states go (a kept planner's
	// working memory, see Planner.computeKept).
	states *[]ClusterState
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
	if len(p.out.Provisions) == 0 {
		p.out.Provisions = nil // one answer for none, sized or not
	}
	pl.scratch.free, pl.scratch.leaving = p.free0, p.leaving0 // keep the grown buffers
	return p.out
}

func (p *planner) index(pl *Planner) {
	s := p.s
	nm, nc, nn := len(s.Machines), len(s.Clusters), len(s.Nodes)
	ml, cl, nj := pl.layouts(s)

	scr := &pl.scratch
	p.resProject = scr.resProject(s.Reservations)
	p.free0, p.leaving0 = scr.free[:0], scr.leaving[:0]
	if pl.keptStates {
		p.states = &scr.states
	}

	p.mPart = ml.mPart
	p.occ = grow(&scr.occ, 2*nm)
	p.claim = p.occ[nm:]
	p.occ = p.occ[:nm]
	for i := range p.occ {
		p.occ[i], p.claim[i] = -1, -1
	}

	p.cPart = cl.cPart
	ints := grow(&scr.ints, 5*nc)
	p.stdLive, p.preLive, p.preReady = ints[:nc], ints[nc:2*nc], ints[2*nc:3*nc]
	p.fair, p.dem, p.cStart = ints[3*nc:4*nc], ints[4*nc:5*nc], grow(&scr.cStart, nc+1)
	bools := grow(&scr.bools, 2*nc)
	p.stdWait, p.short = bools[:nc], bools[nc:]

	p.nCluster, p.nMachine, p.facts = nj.nCluster, nj.nMachine, nj.facts
	p.joinNodes(scr, nc, nn)

	p.partMachines, p.partClusters, p.partGPM = cl.partMachines, cl.partClusters, cl.partGPM
	p.oos, p.oosIdx = ml.oos, ml.oosIdx

	if !pl.kept {
		p.sizeProvisions()
	}

	// Free machines of a pool are found with a cursor instead of a scan.
	p.pools = scr.poolMap(len(ml.pools))
	ranges := grow(&scr.ranges, len(ml.pools))
	for i, sp := range ml.pools {
		ranges[i].ms = sp.ms
		p.pools[sp.key] = &ranges[i]
	}
}

// joinNodes places each node on its machine (claimed or occupied), counts
// the live ones of each cluster and groups node indexes by cluster.
func (p *planner) joinNodes(scr *scratch, nc, nn int) {
	p.cNodes = grow(&scr.cNodes, nn)
	p.gone = grow(&scr.gone, nn)
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
	fill := grow(&scr.fill, nc)
	copy(fill, p.cStart[:nc])
	for i := range nn {
		if ci := p.nCluster[i]; ci >= 0 {
			p.cNodes[fill[ci]] = int32(i)
			fill[ci]++
		}
	}
}

// sizeProvisions sizes Provisions for the free or draining machines,
// where new nodes mostly go (at most one each): that spares the slice its
// growth copies (a plan from nothing places thousands; a plan of what
// moved mostly none).
func (p *planner) sizeProvisions() {
	open := 16
	for mi := range p.claim {
		if p.claim[mi] < 0 && !p.oos[mi] && (p.occ[mi] < 0 || !p.facts[p.occ[mi]].is(fLive)) {
			open++
		}
	}
	p.out.Provisions = make([]Provision, 0, open)
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
func (p *planner) reclaim(ni int32, cause domain.DrainCause, why string) {
	if p.gone[ni] {
		return
	}
	n := p.s.Nodes[ni]
	p.gone[ni] = true
	if ci := p.nCluster[ni]; ci >= 0 {
		p.count(ci, p.facts[ni], -1)
	}
	r := Reclaim{NodeID: n.ID, ClusterID: n.ClusterID, MachineID: n.MachineID, NodeName: n.Name, NodeState: n.State, Cause: cause, Why: why}
	if n.State == domain.NodePending {
		if mi := p.nMachine[ni]; mi >= 0 && p.claim[mi] == ni {
			p.claim[mi] = -1
		}
	} else {
		r.Deadline = p.now.Add(p.cfg.DrainWindow)
	}
	p.out.Reclaims = append(p.out.Reclaims, r)
}

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
	return p.occ[mi] < 0 && p.claim[mi] < 0 && !p.oos[mi]
}

// leaving: its active node is on the way out and nobody is waiting for it.
func (p *planner) leaving(mi int32) bool {
	if p.claim[mi] >= 0 || p.oos[mi] {
		return false
	}
	o := p.occ[mi]
	return o >= 0 && !p.liveNode(o)
}

func (p *planner) cooling(mi int32) bool {
	if p.s.Machines[mi].CooldownUntil.After(p.now) || p.leasedPastClaim(mi) {
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
				p.reclaim(ni, domain.CauseClusterDeleted, "")
			}
		}
	}
}

func (p *planner) outOfService() {
	for _, mi := range p.oosIdx {
		if o := p.occ[mi]; p.liveNode(o) {
			p.reclaim(o, domain.CauseOutOfService, "")
		}
		if c := p.claim[mi]; c >= 0 && p.liveNode(c) {
			p.reclaim(c, domain.CauseOutOfService, "")
		}
	}
}

func (p *planner) nodesOf(ci int32) []int32 {
	return p.cNodes[p.cStart[ci]:p.cStart[ci+1]]
}

// victimsOf chooses k of the cluster's live nodes of a class to give up
// (victims); with keepLeased, none inside its minimum lease, whose end is
// then a wake-up of the plan.
func (p *planner) victimsOf(ci int32, class domain.ComputeClass, k int, keepLeased bool) []victim {
	if k <= 0 {
		return nil
	}
	p.scratch = p.scratch[:0]
	for _, ni := range p.nodesOf(ci) {
		if !p.liveNode(ni) || p.classOf(ni) != class {
			continue
		}
		if end, ok := p.leaseEnd(ni); keepLeased && ok {
			p.keepLeased(end)
			continue
		}
		p.scratch = append(p.scratch, ni)
	}
	return p.victims(ci, p.scratch, k)
}

// leaseEnd is when node ni's minimum lease ends, if it is inside it: a
// ready preemptible node on a machine whose pool has one.
func (p *planner) leaseEnd(ni int32) (time.Time, bool) {
	if p.cfg.MinLease == nil || int(ni) >= len(p.s.Nodes) {
		return time.Time{}, false
	}
	n, mi := p.s.Nodes[ni], p.nMachine[ni]
	if n.Class != domain.Preemptible || n.State != domain.NodeReady || mi < 0 {
		return time.Time{}, false
	}
	end := n.LeaseEnd(p.cfg.MinLease(&p.s.Machines[mi]))
	return end, p.now.Before(end)
}

// wake makes t the plan's NextWake if it comes first.
func (p *planner) wake(t time.Time) {
	if t.After(p.now) && (p.out.NextWake.IsZero() || t.Before(p.out.NextWake)) {
		p.out.NextWake = t
	}
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

// youngerFirst orders nodes as they are given up when nothing is known
// of their work: pending, then provisioning, then ready ones idle
// (Config.Load) before busy; youngest first within each.
func (p *planner) youngerFirst(a, b int32) int {
	na, nb := p.s.Nodes[a], p.s.Nodes[b]
	if c := stateRank(na.State) - stateRank(nb.State); c != 0 {
		return c
	}
	if c := p.busyRank(na) - p.busyRank(nb); c != 0 {
		return c
	}
	if c := nb.CreatedAt.Compare(na.CreatedAt); c != 0 {
		return c
	}
	return cmpString(nb.ID, na.ID)
}

// busyRank is 0 for a ready node known idle, 1 for any other.
func (p *planner) busyRank(n *domain.Node) int {
	if p.cfg.Load != nil && n.State == domain.NodeReady && p.cfg.Load(n).Idle {
		return 0
	}
	return 1
}

func (p *planner) scaleDown() {
	for ci := range p.s.Clusters {
		c := &p.s.Clusters[ci]
		if c.Deleting {
			continue
		}
		gpm := p.partGPM[p.cPart[ci]]
		for _, v := range p.victimsOf(int32(ci), domain.Standard, (int(p.stdLive[ci])-p.stdWant(int32(ci)))/gpm, false) {
			p.reclaim(v.ni, domain.CauseScaledDown, v.why)
		}
		// The tenant's own scale-down may end its leases.
		for _, v := range p.victimsOf(int32(ci), domain.Preemptible, int(p.preLive[ci])-c.TargetPreemptibleGPUs()/gpm, false) {
			p.reclaim(v.ni, domain.CauseScaledDown, v.why)
		}
	}
}

// eligible reports whether machine mi may serve cluster ci's standard nodes.
func (p *planner) eligible(ci, mi int32) bool {
	m := &p.s.Machines[mi]
	return ServesStandard(&p.s.Clusters[ci], m, p.resProject[m.ReservationID])
}

// ServesStandard reports whether machine m may serve cluster c's standard
// nodes, resProject being the project of m's reservation (if any): a
// reserved cluster's come from its project's reservations, an on-demand
// cluster's from machines in none.
func ServesStandard(c *domain.Cluster, m *domain.Machine, resProject string) bool {
	if c.BillingType == domain.BillingReserved {
		return m.ReservationID != "" && resProject == c.ProjectID
	}
	return m.ReservationID == ""
}

func (p *planner) provision(ci, mi int32, class domain.ComputeClass, pending bool) {
	m := &p.s.Machines[mi]
	p.out.Provisions = append(p.out.Provisions, Provision{
		ClusterID: p.s.Clusters[ci].ID, MachineID: m.ID, GPUType: m.GPUType, Class: class, GPUs: m.GPUs, Pending: pending,
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

type msgKey struct {
	reason domain.UnfulfilledReason
	gpus   int
}

func (p *planner) olderFirst(a, b int32) int {
	ca, cb := &p.s.Clusters[a], &p.s.Clusters[b]
	if c := ca.CreatedAt.Compare(cb.CreatedAt); c != 0 {
		return c
	}
	return cmpString(ca.ID, cb.ID)
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
