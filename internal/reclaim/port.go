package reclaim

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Port is how the reclaim machine reaches the controller that drives it:
// the stored nodes, the plan lock and its group commit, the claims that
// keep one step per node running, and the loop. The controller implements
// it (internal/controller); the spec tests implement it in memory.
type Port interface {
	// Node reads the stored node.
	Node(ctx context.Context, id string) (domain.Node, error)
	// Machine reads a machine.
	Machine(ctx context.Context, id string) (domain.Machine, error)
	// ClusterGone reports whether the cluster is gone (fully deleted):
	// nothing is left to clean up in it, its credentials are gone too.
	ClusterGone(ctx context.Context, id string) (bool, error)
	// ReadyNodes lists the nodes that are ready (for the lost-node
	// sweep), from the leader's memory: shared, not to be modified (a
	// copy of each would cost a million GPUs' sweep 40 MB).
	ReadyNodes(ctx context.Context) ([]*domain.Node, error)
	// Transition applies change to node id if it is still in state from
	// (AnyState: whatever its state), compare-and-set, in one transaction
	// under the plan lock, with the events change returns; it returns the
	// node as written. A node moved on or gone fails with ErrStale.
	Transition(ctx context.Context, id string, from domain.NodeState, change Change) (domain.Node, error)
	// HandOver writes node n, removing and its machine wiped, removed, and
	// in the same transaction hands the machine to the node waiting for it
	// (it starts provisioning) or, for a standard node nobody waits for,
	// starts the machine's cooldown. ErrStale if n is no longer removing.
	HandOver(ctx context.Context, n domain.Node) error
	// Owns checks, under the plan lock, that node n is still removing and
	// is the only node its machine serves (ErrStale otherwise), so a step
	// working from a stale copy never wipes a machine handed on already.
	Owns(ctx context.Context, n domain.Node) error
	// Claim marks work key as running, false if a run of it is going on;
	// Release ends the claim.
	Claim(key string) bool
	Release(key string)
	// Observe reports observations, serialized with the controller's.
	Observe(obs ...Observation)
	// Kick asks the loop for a pass soon (a machine is free).
	Kick()
	// SaveWork records that node id's work reported a checkpoint at at,
	// after its notice: the lost-work ledger's entry of its drain was
	// saved (store.Tx.SaveLostWork).
	SaveWork(ctx context.Context, id string, at time.Time) error
}

// Change changes node n, read in the transition's transaction, at now,
// and returns the events it posts (stamped now unless they carry the time
// of what they report; the node's own unless they name another). It
// returns ErrStale, before changing anything, to drop the transition.
type Change func(n *domain.Node, now time.Time) ([]domain.Event, error)

// AnyState makes a transition apply in whatever state the node is.
const AnyState domain.NodeState = ""

// ErrStale: the node moved on since it was read; the step is dropped.
var ErrStale = domain.ErrStale

// IgnoreStale is err, unless it says the node moved on (nothing to do).
func IgnoreStale(err error) error {
	if errors.Is(err, ErrStale) {
		return nil
	}
	return err
}

// CleanupKey is the work key of node id's cleanup: it runs apart from the
// node's own steps (see Cleanup).
func CleanupKey(id string) string { return cleanupPrefix + id }

const cleanupPrefix = "cleanup/"

// CleanupOf is the node whose cleanup key is key, if key is one.
func CleanupOf(key string) (id string, ok bool) { return strings.CutPrefix(key, cleanupPrefix) }

// ProviderError is a failure of the machine provider (an operator's hook,
// say): it is recorded as a lifecycle event of Reason as well as on the
// node.
type ProviderError struct {
	Reason domain.EventReason
	Err    error
}

func (e *ProviderError) Error() string { return e.Err.Error() }
func (e *ProviderError) Unwrap() error { return e.Err }

// ClusterError is a failure of the tenant's cluster (its API refused or
// did not answer): not the machine's fault.
type ClusterError struct{ Err error }

func (e *ClusterError) Error() string { return e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }
