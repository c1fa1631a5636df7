// Package metering cuts usage records from the node lifecycle the store
// records. Every Cut recomputes, for each node that became ready and has no
// final record yet, its record from scratch — ready time, stop point (see
// billing.Stop) or now — and writes it over the old one. Nothing is
// accumulated, so a crash at any moment neither loses nor double-counts a
// second: the next Cut writes the same record again, only longer.
//
// The background loop (Run) writes a running node's record only when what
// is stored lags by Refresh or more, and on the leader reads the ready
// nodes from its in-memory copy (Reads), so its cost per pass follows what
// changed (nodes that became ready or stopped), not the fleet's rows in
// the database; Cut, which usage queries call, brings every record up to
// the second.
package metering

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Meter writes usage records.
type Meter struct {
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	// Reads, if set, is where cuts look up clusters and machines (its
	// Snapshot): the leader's in-memory copy rather than a query per row.
	// A cluster missing from it (deleted) is read from the store.
	Reads interface {
		Snapshot(context.Context) (store.Snapshot, error)
	}
	// Refresh is how far a running node's stored record may lag before
	// the background loop rewrites it (default DefaultRefresh).
	Refresh time.Duration
	// OnBilled, if set, is told how many GPU-seconds each Cut added per
	// compute class (for metrics). Seconds metered before this process
	// started are not reported again.
	OnBilled func(class string, gpuSeconds float64)
	// AfterPass, if set, runs after each pass of the background loop
	// (Run), on the records it wrote: budgets are checked there, so an
	// alert comes within one metering pass of its threshold.
	AfterPass func(ctx context.Context)
	// last is each running node's End as last written: from the store at
	// the first Cut, then from this process's cuts.
	last map[string]time.Time
	// stored is each running node's End as stored.
	stored map[string]time.Time
	loaded bool
	// lookup is the clusters and machines of Reads' snapshot by ID, for
	// the version of it they were worked out from (the leader's copy keeps
	// its slices while nothing is written, so a settled fleet's cuts reuse
	// them rather than hashing the whole fleet every minute).
	lookup lookup
	// follower notes the nodes written since the last pass (follow.go).
	follower follower
	// mu serializes cuts: the background loop and usage queries both cut.
	mu sync.Mutex
}

// New returns a meter.
func New(st store.Store, clk clock.Clock, log *slog.Logger) *Meter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Meter{store: st, clock: clk, log: log, last: map[string]time.Time{}, stored: map[string]time.Time{}}
}

// DefaultRefresh is Meter.Refresh's default: a running node's stored record
// is at most this much (plus a pass) behind. Usage queries on the leader
// cut first and so are exact to the second.
const DefaultRefresh = 15 * time.Minute

// Cut writes the current usage record of every node not yet final, in one
// transaction.
func (m *Meter) Cut(ctx context.Context) error { return m.cut(ctx, true) }

// cut writes the records of nodes that became ready or stopped and, when
// all is set, of every running node; otherwise only those whose stored
// record lags by Refresh.
func (m *Meter) cut(ctx context.Context, all bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if err := m.loadOpen(ctx); err != nil {
		return err
	}
	nodes, snap, err := m.workList(ctx, all)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return nil
	}
	m.lookup.follow(snap)
	recs, writes, err := m.records(ctx, nodes, all, now)
	if err != nil {
		return err
	}
	if len(writes) > 0 {
		err = m.store.Update(ctx, func(tx store.Tx) error { return tx.PutUsages(ctx, writes) })
		if err != nil {
			return fmt.Errorf("meter: write usage: %w", err)
		}
	}
	for _, r := range writes {
		if r.Final {
			delete(m.stored, r.NodeID)
		} else {
			m.stored[r.NodeID] = r.End
		}
	}
	m.report(recs)
	return nil
}

// lookup is a snapshot's clusters and machines by ID.
type lookup struct {
	clusters []domain.Cluster
	machines []domain.Machine
	cByID    map[string]*domain.Cluster
	mByID    map[string]*domain.Machine
}

// loadOpen reads the open records once, for where each node's metering
// stands.
func (m *Meter) loadOpen(ctx context.Context) error {
	if m.loaded {
		return nil
	}
	open, err := m.store.ListUsage(ctx, store.UsageFilter{Open: true})
	if err != nil {
		return fmt.Errorf("meter: read open records: %w", err)
	}
	for _, r := range open {
		m.last[r.NodeID] = r.End
		m.stored[r.NodeID] = r.End
	}
	m.loaded = true
	return nil
}

// follow indexes snap's clusters and machines by ID when they are not the
// rows indexed last.
func (lk *lookup) follow(snap *store.Snapshot) {
	if snap == nil {
		return
	}
	if lk.cByID != nil && store.Same(lk.clusters, snap.Clusters) && store.Same(lk.machines, snap.Machines) {
		return
	}
	lk.clusters, lk.machines = snap.Clusters, snap.Machines
	lk.cByID = make(map[string]*domain.Cluster, len(snap.Clusters))
	for i := range snap.Clusters {
		lk.cByID[snap.Clusters[i].ID] = &snap.Clusters[i]
	}
	lk.mByID = make(map[string]*domain.Machine, len(snap.Machines))
	for i := range snap.Machines {
		lk.mByID[snap.Machines[i].ID] = &snap.Machines[i]
	}
}

// records meters nodes as of now: what each has billed, and the records
// to write (all of them with all; else final ones, new ones and those
// last written a refresh ago).
func (m *Meter) records(ctx context.Context, nodes []*domain.Node, all bool, now time.Time) ([]billed, []domain.UsageRecord, error) {
	// Rows the snapshot lacks (a deleted cluster; every row without Reads,
	// whose lookup stays nil) are read once per cut.
	clusters, machines := map[string]*domain.Cluster{}, map[string]*domain.Machine{}
	lk := &m.lookup
	refresh := cmp.Or(m.Refresh, DefaultRefresh)
	var writes []domain.UsageRecord
	recs := make([]billed, 0, len(nodes))
	for _, n := range nodes {
		c, err := row(ctx, lk.cByID, clusters, n.ClusterID, m.store.GetClusterRecord)
		if err != nil {
			return nil, nil, fmt.Errorf("meter: cluster of node %s: %w", n.ID, err)
		}
		mc, err := row(ctx, lk.mByID, machines, n.MachineID, m.store.GetMachine)
		if err != nil {
			return nil, nil, fmt.Errorf("meter: machine of node %s: %w", n.ID, err)
		}
		r, ok := billing.Record(n, c, mc, now)
		if !ok {
			continue
		}
		recs = append(recs, billed{node: r.NodeID, class: r.Class, gpus: r.GPUs, start: r.Start, end: r.End, final: r.Final})
		if stored, ok := m.stored[r.NodeID]; all || r.Final || !ok || r.End.Sub(stored) >= refresh {
			writes = append(writes, r)
		}
	}
	return recs, writes, nil
}

// report tells OnBilled what was billed as it is metered, written or not:
// a crash loses no second of it, as the next cut recomputes the record.
// It is told once per class, summed.
func (m *Meter) report(recs []billed) {
	gpuSeconds := map[domain.ComputeClass]int64{}
	for _, r := range recs {
		prev, ok := m.last[r.node]
		if !ok {
			prev = r.start // never metered before: all of it is new
		}
		if r.end.After(prev) {
			gpuSeconds[r.class] += (r.end.Unix() - prev.Unix()) * int64(r.gpus)
		}
		if r.final {
			delete(m.last, r.node)
		} else {
			m.last[r.node] = r.end
		}
	}
	if m.OnBilled != nil {
		for _, class := range slices.Sorted(maps.Keys(gpuSeconds)) {
			m.OnBilled(string(class), float64(gpuSeconds[class]))
		}
	}
}

// row is row id from the snapshot's lookup, else from those read in this
// cut, else read from the store (once per cut).
func row[T any](ctx context.Context, lookup, read map[string]*T, id string, get func(context.Context, string) (T, error)) (*T, error) {
	if r, ok := lookup[id]; ok {
		return r, nil
	}
	if r, ok := read[id]; ok {
		return r, nil
	}
	r, err := get(ctx, id)
	if err != nil {
		return nil, err
	}
	read[id] = &r
	return &r, nil
}

// billed is what a cut reports of a record (Meter.OnBilled): a running
// fleet's pass keeps one per node, so it keeps only this of each.
type billed struct {
	node       string
	class      domain.ComputeClass
	gpus       int
	start, end time.Time
	final      bool
}

// workList is every node that became ready and has no final record yet;
// on a pass that need not walk the running ones, of those written since
// the last pass (follow.go).
// Without Reads the store lists them. With Reads, its snapshot (the
// leader's copy, in memory) gives the ready ones, none of which has a final
// record (billing.Stop), and the store only those no longer ready, which
// are few: a pass then reads no more of the database than what stopped.
// A node listed by both, having stopped between the two reads, is taken
// as the store has it.
func (m *Meter) workList(ctx context.Context, all bool) ([]*domain.Node, *store.Snapshot, error) {
	if m.Reads == nil {
		ns, err := m.store.ListNodes(ctx, store.NodeFilter{Unmetered: true})
		if err != nil {
			return nil, nil, fmt.Errorf("meter: list nodes: %w", err)
		}
		return pointers(ns), nil, nil
	}
	ids, ok, err := m.follow(ctx)
	if err != nil {
		return nil, nil, err
	}
	if ok && !all && !m.walking() {
		// Clusters and machines are read by ID: the copy's tables are not
		// rebuilt for a few nodes.
		nodes, err := m.changed(ctx, ids)
		return nodes, nil, err
	}
	snap, err := m.Reads.Snapshot(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("meter: read nodes, clusters and machines: %w", err)
	}
	stopped, err := m.store.ListNodes(ctx, store.NodeFilter{UnmeteredStopped: true})
	if err != nil {
		return nil, nil, fmt.Errorf("meter: list stopped nodes: %w", err)
	}
	seen := make(map[string]bool, len(stopped))
	for _, n := range stopped {
		seen[n.ID] = true
	}
	out := make([]*domain.Node, 0, len(snap.Nodes)+len(stopped))
	for _, n := range snap.Nodes {
		if n.State == domain.NodeReady && !n.ReadyAt.IsZero() && !seen[n.ID] {
			out = append(out, n)
		}
	}
	return append(out, pointers(stopped)...), &snap, nil
}

func pointers(ns []domain.Node) []*domain.Node {
	out := make([]*domain.Node, len(ns))
	for i := range ns {
		out[i] = &ns[i]
	}
	return out
}

// Pass is one of Run's passes: the records of nodes that became ready or
// stopped, and of running nodes whose stored record lags by Refresh. A
// simulation on a virtual clock calls it as Run would.
func (m *Meter) Pass(ctx context.Context) error { return m.cut(ctx, false) }

// Run cuts records every interval of clock time (at least every minute,
// so a running node shows on the bill while it runs) until ctx ends.
func (m *Meter) Run(ctx context.Context, every time.Duration) {
	for {
		if err := m.cut(ctx, false); err != nil && ctx.Err() == nil {
			m.log.Error("metering", "err", err)
		}
		if m.AfterPass != nil && ctx.Err() == nil {
			m.AfterPass(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(every):
		}
	}
}
