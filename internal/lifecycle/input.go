package lifecycle

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Input is everything one round of a node's step decides from: the node
// as stored, the time, what the control plane knows beside it (Facts),
// and, within a turn, where the turn is (Phase, Carry) and what the calls
// of the last round answered (Results). Step reads nothing else.
type Input struct {
	Node domain.Node
	Now  time.Time
	// Cleanup: this is the step of the node's cleanup key (CleanupKey),
	// which runs apart from the node's own steps.
	Cleanup bool
	Facts   Facts
	// Phase is zero at the start of a turn; a Ready with calls names the
	// phase the next round starts in.
	Phase Phase
	Carry Carry
	// Results answer the last round's calls, in the order they were asked.
	Results []Result
}

// Facts are what the executor gathers for a node's step beside the node:
// from the control plane's memory (its machine, its cluster, the other
// nodes on its machine), from what the drivers already watch (no call out:
// its load, its health) and from the executor's own memory of the turns
// before (the first Prepare, the last error, a checkpoint recorded).
type Facts struct {
	// Machine is the node's machine.
	Machine domain.Machine
	// ClusterType is the node's cluster's type; ClusterGone says the
	// cluster is fully deleted (its credentials went with it).
	ClusterType domain.ClusterType
	ClusterGone bool
	// MachineBusy: another active node (provisioning, ready, draining,
	// removing) occupies the node's machine.
	MachineBusy bool
	// Load is what the node runs, as its driver watches it (a draining
	// node's checkpoint within the notice).
	Load domain.NodeLoad
	// Health is what the node's cluster says of it (for a ready node),
	// HealthKnown false when the driver cannot tell now.
	Health      driver.NodeHealth
	HealthKnown bool
	// Tells: the node's cluster driver wakes the node when what its step
	// waits for may have changed (work ended, the node registered), so the
	// step need not poll; ProviderTells the same of its machine provider
	// (a machine prepared or wiped).
	Tells, ProviderTells bool
	// FirstPrepare is when this process's first Prepare of the node was
	// accepted (zero: none yet).
	FirstPrepare time.Time
	// LastErr is the error of the node's last failed turn, if any.
	LastErr error
	// Saved: a checkpoint within the node's notice is recorded already.
	Saved bool
}

// Phase is where a turn is, within a state's step.
type Phase uint8

// The phases of the steps. A turn starts at PhaseStart; each Ready with
// calls names the phase its answers are read in.
const (
	PhaseStart Phase = iota
	// provisioning
	PhasePrepared
	PhaseAdded
	// draining
	PhaseLooked
	PhaseNotified
	PhaseTold
	// a cleanup (at a drain's end, or the cleanup key's)
	PhaseCleanListed
	PhaseCleanEnded
	PhaseCleanTold
	// removing
	PhaseWiped
	// ready
	PhaseClassSet
)

// Carry is what the rounds of one turn pass on: the work listed, and the
// state of a cleanup under way.
type Carry struct {
	// Work is the work the node had when the turn listed it.
	Work []driver.Work
	// Gone: the node was gone from its cluster when it was marked.
	Gone bool
	// Late: the node's registration deadline passed before it was asked.
	Late bool
	// EndAt is when the drain ended (the removal), Outcome how.
	EndAt   time.Time
	Outcome domain.DrainOutcome
	// CleanBy cuts off a drain's end's cleanup attempt; Cleaned is what
	// the cleanup did.
	CleanBy time.Time
	Cleaned Cleaned
}

// Cleaned is what deleting a removed node's objects from its cluster did.
type Cleaned struct {
	// Pods force-deleted; -1 when they could not be listed.
	Pods int
	Err  error
}
