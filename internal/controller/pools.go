package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/stats"
	"github.com/sparecap/sparecap/internal/store"
)

// What the spread of a target over several GPU types knows of their
// pools (allocator.Faceted's Price, Cap and Reclaims): the preemptible
// price per GPU-hour of a region and type from the price book, as
// billing prices a node (the on-demand rate less the discount in force),
// the cluster's cap, and how often a pool reclaims: its reclaims per
// preemptible node-hour over the last reclaimWindow (stats.Preemptions,
// as GET /v1/stats/preemptions counts them). The book is read from the
// store at most every bookEvery and the reclaims at most every
// reclaimsEvery (and only once a cluster's strategy asks for them),
// before a pass plans, never under the plan lock; a book
// holds the prices to come too, so a change takes effect at its time.

const (
	bookEvery     = time.Minute
	reclaimsEvery = time.Hour
	reclaimWindow = 7 * 24 * time.Hour
)

// poolSignals are the price book and reclaim rates the planner reads.
type poolSignals struct {
	mu       sync.Mutex
	book     *billing.Book
	changes  []time.Time // when each price takes effect, in order
	bookAt   time.Time
	reclaims map[[2]string]float64 // by region and GPU type
	ratesAt  time.Time
	// wanted: a cluster's strategy asked for the reclaims (they are read
	// only then).
	wanted bool
	clock  func() time.Time
}

// wirePools gives c's planner its pools' prices, caps and reclaims.
func (c *Controller) wirePools() {
	p := &c.pools
	p.clock = c.clock.Now
	c.parts.Price, c.parts.Reclaims = p.price, p.reclaimRate
	c.parts.Cap = func(cl *domain.Cluster) uint64 {
		v, err := billing.ParseRate(cl.MaxPreemptiblePrice)
		if err != nil {
			return 0
		}
		return v
	}
}

// refreshPools reads the price book and the reclaim rates when they are
// due; a failed read keeps what was read before.
func (c *Controller) refreshPools(ctx context.Context, now time.Time) {
	c.refreshBook(ctx, now)
	p := &c.pools
	p.mu.Lock()
	due := p.wanted && (p.ratesAt.IsZero() || now.Sub(p.ratesAt) >= reclaimsEvery)
	p.mu.Unlock()
	if !due {
		return
	}
	if rates, err := c.reclaimRates(ctx, now); err == nil {
		p.mu.Lock()
		p.reclaims, p.ratesAt = rates, now
		p.mu.Unlock()
	}
}

// refreshBook reads the price book when it is due (a small table: a
// plan reads it under the plan lock if no pass did yet).
func (c *Controller) refreshBook(ctx context.Context, now time.Time) {
	p := &c.pools
	p.mu.Lock()
	due := p.bookAt.IsZero() || now.Sub(p.bookAt) >= bookEvery
	p.mu.Unlock()
	if !due {
		return
	}
	prices, err := c.store.ListPrices(ctx)
	if err != nil {
		return
	}
	book, err := billing.NewBook(prices)
	if err != nil {
		return
	}
	changes := make([]time.Time, 0, len(prices))
	for _, pr := range prices {
		changes = append(changes, pr.EffectiveFrom)
	}
	slices.SortFunc(changes, time.Time.Compare)
	p.mu.Lock()
	p.book, p.changes, p.bookAt = book, changes, now
	p.mu.Unlock()
}

// reclaimRates are the reclaims per preemptible node-hour of each pool
// over the reclaimWindow before now, and those its bookings will make
// (claimed machines whose notice comes within a day) per node-hour of the
// day ahead: what is certain counts beside what was.
func (c *Controller) reclaimRates(ctx context.Context, now time.Time) (map[[2]string]float64, error) {
	machines, err := c.store.ListMachines(ctx)
	if err != nil {
		return nil, err
	}
	from := now.Add(-reclaimWindow)
	nodes, err := c.store.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true, Class: domain.Preemptible, RemovedSince: from})
	if err != nil {
		return nil, err
	}
	out := map[[2]string]float64{}
	for _, s := range stats.Preemptions(nodes, machines, from, now, now) {
		out[[2]string{s.Region, s.GPUType}] = s.PreemptionsPerNodeHour
	}
	for k, r := range bookedRates(machines, nodes, now) {
		out[k] += r
	}
	return out, nil
}

// bookedRates are, by pool, the reclaims the bookings will make within a
// day (live preemptible nodes on claimed machines) per preemptible
// node-hour of that day.
func bookedRates(machines []domain.Machine, nodes []domain.Node, now time.Time) map[[2]string]float64 {
	const ahead = 24 * time.Hour
	pool := map[string][2]string{}
	claimed := map[string]bool{}
	for _, m := range machines {
		pool[m.ID] = [2]string{m.Region, m.GPUType}
		claimed[m.ID] = !m.PreemptAt.IsZero() && m.PreemptAt.Before(now.Add(ahead))
	}
	live, soon := map[[2]string]int{}, map[[2]string]int{}
	for _, n := range nodes {
		if n.State == domain.NodeRemoved || n.Class != domain.Preemptible {
			continue
		}
		k := pool[n.MachineID]
		live[k]++
		if claimed[n.MachineID] {
			soon[k]++
		}
	}
	out := map[[2]string]float64{}
	for k, s := range soon {
		out[k] = float64(s) / (float64(live[k]) * ahead.Hours())
	}
	return out
}

// price is the preemptible price of a pool at now in micro-dollars per
// GPU-hour (0: the book has none); a zero now is the clock's.
func (p *poolSignals) price(region, gpuType string, now time.Time) uint64 {
	if now.IsZero() && p.clock != nil {
		now = p.clock()
	}
	p.mu.Lock()
	book := p.book
	p.mu.Unlock()
	if book == nil {
		return 0
	}
	od, ok := book.OnDemandRate(region, gpuType, now.Unix())
	if !ok {
		return 0
	}
	return od * (billing.FullBP - book.DiscountBP(now.Unix())) / billing.FullBP
}

func (p *poolSignals) reclaimRate(region, gpuType string) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wanted = true
	return p.reclaims[[2]string{region, gpuType}]
}

// nextPriceChange is when the next price after now takes effect (zero:
// none): the loop wakes then, so that a cap is kept from that moment.
func (c *Controller) nextPriceChange(now time.Time) time.Time {
	p := &c.pools
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.changes, now, func(a, b time.Time) int {
		if !a.After(b) {
			return -1
		}
		return 1
	})
	if i < len(p.changes) {
		return p.changes[i]
	}
	return time.Time{}
}
