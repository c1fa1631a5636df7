package memstore_test

import (
	"context"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// all are the operations a transaction may draw, each drawing its
// arguments when called. The writes that make rows (and so give the
// others something to find) come up three times as often.
func (g *gen) all() []func() op {
	makers := append(g.nodeWrites(), g.webhookWrites()...)
	return append(append(append(append(g.clusterOps(), g.nodeOps()...), g.ledgerOps()...), g.webhookOps()...),
		append(makers, append(makers, makers...)...)...)
}

var states = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining,
	domain.NodeRemoving, domain.NodeRemoved}

func (g *gen) node() domain.Node {
	n := domain.Node{ID: g.moving("n", 10, 6), ClusterID: g.id("c", 4), MachineID: g.id("m", 21), Name: g.text(),
		Class: domain.Preemptible, GPUs: g.pick(9), State: states[g.pick(len(states))], CreatedAt: g.when(),
		ReadyAt: g.when(), DrainStartedAt: g.when(), Deadline: g.when(), DrainCause: domain.CausePreempted,
		Notified: g.bit(), DrainedAt: g.when(), Outcome: domain.OutcomeEarly, RemovedAt: g.when(), LastError: g.text(),
		CleanupPending: g.pick(4) == 0, ProvisioningAt: g.when(), ClassSince: g.when()}
	if g.bit() {
		n.Class = domain.Standard
	}
	return n
}

func (g *gen) cluster() domain.Cluster {
	c := domain.Cluster{ID: g.id("c", 5), Name: g.text(), ProjectID: g.id("p", 3), Region: "eu-1", GPUType: "H100",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: g.pick(3) * 8,
		DesiredPreemptibleGPUs: g.pick(3) * 8, Weight: 1 + g.pick(3), Status: domain.StatusReady, UnfulfilledMessage: g.text(),
		Deleting: g.bit(), NodeSeq: int64(g.pick(100)), CreatedAt: g.when(), UnmetSince: g.when(), KubeAttachedAt: g.when(),
		StartsAt: g.when(), ActiveAt: g.when()}
	if g.pick(5) == 0 {
		c.DeletedAt = g.when()
	}
	return c
}

func (g *gen) machine() domain.Machine {
	return domain.Machine{ID: g.id("m", 21), Region: "eu-1", GPUType: "H100", GPUs: 8, ReservationID: g.id("r", 2),
		OutOfService: g.bit(), CooldownUntil: g.when(), CreatedAt: g.when(), Failures: g.pick(3), OutOfServiceReason: g.text(),
		MaintenanceAt: g.when(), ClaimedBy: g.text(), PreemptAt: g.when()}
}

func (g *gen) event() domain.Event {
	return domain.Event{ID: g.id("e", 50), ClusterID: g.id("c", 3), NodeID: g.id("n", 4), NodeName: g.text(),
		Reason: []domain.EventReason{domain.ReasonNodeAdded, domain.ReasonNodeDrained}[g.pick(2)], Message: g.text(),
		Timestamp: g.when(), Deadline: g.when()}
}

func (g *gen) usage() domain.UsageRecord {
	return domain.UsageRecord{NodeID: g.moving("n", 10, 6), NodeName: g.text(), ClusterID: g.id("c", 3), ProjectID: g.id("p", 2),
		Class: domain.Preemptible, GPUs: 8, Start: g.when(), End: g.when(), Final: g.pick(3) == 0}
}

// each is op run on each of n values drawn by draw, in one call.
func each[T any](name string, n int, draw func() T, call func(store.Tx) func(context.Context, []T) error) op {
	vs := make([]T, n)
	for i := range vs {
		vs[i] = draw()
	}
	return op{name, func(ctx context.Context, tx store.Tx) any { return res(nil, call(tx)(ctx, vs)) }}
}

// one is op run on one value drawn by draw.
func one[T any](name string, draw func() T, call func(store.Tx) func(context.Context, T) error) op {
	v := draw()
	return op{name, func(ctx context.Context, tx store.Tx) any { return res(nil, call(tx)(ctx, v)) }}
}

func (g *gen) clusterOps() []func() op {
	return []func() op{
		func() op {
			return one("CreateProject", func() domain.Project { return domain.Project{ID: g.id("p", 4), CreatedAt: g.when()} },
				func(tx store.Tx) func(context.Context, domain.Project) error { return tx.CreateProject })
		},
		func() op {
			return one("UpdateMachine", g.machine, func(tx store.Tx) func(context.Context, domain.Machine) error { return tx.UpdateMachine })
		},
		func() op {
			return one("CreateReservation", func() domain.Reservation {
				return domain.Reservation{ID: g.id("r", 3), ProjectID: g.id("p", 4), CreatedAt: g.when()}
			}, func(tx store.Tx) func(context.Context, domain.Reservation) error { return tx.CreateReservation })
		},
		func() op {
			return one("CreateCluster", g.cluster, func(tx store.Tx) func(context.Context, domain.Cluster) error { return tx.CreateCluster })
		},
		func() op {
			return one("UpdateCluster", g.cluster, func(tx store.Tx) func(context.Context, domain.Cluster) error { return tx.UpdateCluster })
		},
		func() op {
			return each("CreateClusters", 1+g.pick(4), g.cluster,
				func(tx store.Tx) func(context.Context, []domain.Cluster) error { return tx.CreateClusters })
		},
		func() op {
			return each("UpdateClusters", 1+g.pick(4), g.cluster,
				func(tx store.Tx) func(context.Context, []domain.Cluster) error { return tx.UpdateClusters })
		},
		func() op {
			id, k, at := g.id("c", 5), []byte(g.text()), g.when()
			return op{"SetKubeconfig", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.SetKubeconfig(ctx, id, k, at)) }}
		},
		func() op {
			id := g.id("c", 5)
			a := domain.Access{CheckedAt: g.when(), Missing: []domain.MissingPermission{{Permission: g.text(), Detail: g.text(), Since: g.when()}}}
			return op{"SetAccess", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.SetAccess(ctx, id, a)) }}
		},
	}
}

// nodeWrites are the writes of machines and nodes.
func (g *gen) nodeWrites() []func() op {
	return []func() op{
		func() op {
			return one("CreateMachine", g.machine, func(tx store.Tx) func(context.Context, domain.Machine) error { return tx.CreateMachine })
		},
		func() op {
			return one("CreateNode", g.node, func(tx store.Tx) func(context.Context, domain.Node) error { return tx.CreateNode })
		},
		func() op {
			return one("UpdateNode", g.node, func(tx store.Tx) func(context.Context, domain.Node) error { return tx.UpdateNode })
		},
		func() op {
			return each("CreateNodes", 1+g.pick(5), g.node, func(tx store.Tx) func(context.Context, []domain.Node) error { return tx.CreateNodes })
		},
		func() op {
			return each("UpdateNodes", 1+g.pick(5), g.node, func(tx store.Tx) func(context.Context, []domain.Node) error { return tx.UpdateNodes })
		},
	}
}

// nodeOps are the other operations on nodes, events and usage.
func (g *gen) nodeOps() []func() op {
	return []func() op{
		func() op {
			before, limit := g.when(), g.pick(4)-1
			return op{"ArchiveNodes", func(ctx context.Context, tx store.Tx) any { return res(tx.ArchiveNodes(ctx, before, limit)) }}
		},
		func() op {
			e := g.event()
			return op{"AddEvent", func(ctx context.Context, tx store.Tx) any { return res(tx.AddEvent(ctx, e)) }}
		},
		func() op {
			return each("AddEvents", 1+g.pick(4), g.event, func(tx store.Tx) func(context.Context, []domain.Event) error { return tx.AddEvents })
		},
		func() op {
			before := g.when()
			return op{"PruneEvents", func(ctx context.Context, tx store.Tx) any { return res(tx.PruneEvents(ctx, before)) }}
		},
		func() op {
			return one("PutUsage", g.usage, func(tx store.Tx) func(context.Context, domain.UsageRecord) error { return tx.PutUsage })
		},
		func() op {
			return each("PutUsages", 1+g.pick(5), g.usage,
				func(tx store.Tx) func(context.Context, []domain.UsageRecord) error { return tx.PutUsages })
		},
		func() op {
			ids := []string{g.moving("n", 10, 6), g.moving("n", 10, 6), g.moving("n", 10, 6)}
			cs, ms := []string{g.id("c", 5), g.id("c", 5)}, []string{g.id("m", 21), g.id("m", 21)}
			return op{"ByID", func(ctx context.Context, tx store.Tx) any {
				return []any{res(tx.NodesByID(ctx, ids)), res(tx.ClustersByID(ctx, cs)), res(tx.MachinesByID(ctx, ms))}
			}}
		},
		func() op {
			f := g.nodeFilter()
			return op{fmt.Sprintf("ListNodes(%+v) in a tx", f), func(ctx context.Context, tx store.Tx) any { return res(tx.ListNodes(ctx, f)) }}
		},
	}
}

func (g *gen) nodeFilter() store.NodeFilter {
	f := store.NodeFilter{IncludeRemoved: g.bit(), Unmetered: g.pick(4) == 0, UnmeteredStopped: g.pick(5) == 0,
		CleanupPending: g.pick(4) == 0}
	switch g.pick(5) {
	case 0:
		f.ClusterID = g.id("c", 4)
	case 1:
		f.MachineID = g.id("m", 21)
	case 2:
		f.ClusterIDs = []string{g.id("c", 4), g.id("c", 4)}
	}
	if g.pick(3) == 0 {
		f.States = []domain.NodeState{states[g.pick(len(states))], states[g.pick(len(states))]}
	}
	return f
}
