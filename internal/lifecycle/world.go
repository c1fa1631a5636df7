package lifecycle

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// World is the control plane as the executor sees it: the stored nodes,
// what it knows beside them, and the commit. The controller implements it
// over its store and plan lock; the spec tests in memory.
type World interface {
	// Node reads node id as stored (domain.ErrNotFound once it is
	// archived: nothing left to do).
	Node(ctx context.Context, id string) (domain.Node, error)
	// Facts fills what the control plane knows beside node n: its
	// machine, its cluster's type and whether the cluster is gone, whether
	// another active node occupies its machine (Facts.Machine,
	// ClusterType, ClusterGone, MachineBusy).
	Facts(ctx context.Context, n domain.Node, f *Facts) error
	// Commit persists r (Write, Events, Machine, HandOver, Start) for
	// node n, read as n: compare-and-set, in one transaction (which may be
	// shared with other nodes' commits), ErrStale if the node is no longer
	// n or not in r.From. It returns the node as written, and hands the
	// nodes it changed besides (a pending node the hand-over started) to
	// the executor.
	Commit(ctx context.Context, n domain.Node, r *Ready) (domain.Node, error)
	// SaveWork records that node id's work checkpointed at at within its
	// notice (store.Tx.SaveLostWork).
	SaveWork(ctx context.Context, id string, at time.Time) error
	// Failed records the error of a node's failed turn on it (empty: it
	// succeeded again), with an event of reason if not empty.
	Failed(ctx context.Context, n domain.Node, msg string, reason domain.EventReason)
	// Observe reports observations of committed writes, in order.
	Observe(obs []Observation)
	// Moved says a node moved (became ready, left, freed its machine): the
	// plan may change.
	Moved()
}
