package lifecycle

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Ready is what one round of a node's step decided, as data: the
// executor applies it in this order (see the package doc):
//
//  1. persist: Write (compare-and-set on From), with Events, the Machine
//     change, the hand-over of the machine (HandOver) or the start of a
//     pending node (Start), in one transaction; SaveWork, a courtesy,
//     after it;
//  2. act: Calls, group by group; their Results go to the next round,
//     which starts in phase Next with Carry;
//  3. tell: Obs to the observers, and Moved wakes the plan.
//
// A Ready without calls ends the turn: the node is due again at Due, and
// Err, if set, is the turn's failure (kept on the node and retried after
// its backoff, never later than Due.By).
type Ready struct {
	Write  *domain.Node
	From   domain.NodeState
	Events []domain.Event
	// Machine changes the node's machine in the same transaction.
	Machine MachineChange
	// HandOver: Write removes the node and frees its machine: the node
	// pending on it starts provisioning in the same transaction or, for a
	// standard node nobody waits for, the machine cools down.
	HandOver bool
	// Start: Write starts a pending node, which the transaction refuses
	// (ErrStale) while another active node holds its machine.
	Start bool
	// SaveWork records, after the write, that the node's work checkpointed
	// at that time within its notice (the lost-work ledger's entry was
	// saved); a courtesy, bounded (SaveWorkWait).
	SaveWork time.Time
	// Forget drops what the executor remembers of the node's provisioning
	// (its first Prepare).
	Forget bool

	// Again: the write moved the node to a state whose step runs at once,
	// in the same turn (a drain's end to its removal, say).
	Again bool

	Calls []Call
	// Hold, while the calls run, claims this key (a drain's end cleans up
	// only while the node's background cleanup does not).
	Hold  string
	Next  Phase
	Carry Carry

	Due Due
	Err error

	Obs   []Observation
	Moved bool
	// Courtesies are failed courtesies, logged (the driver reports a
	// refusal once per cluster, so a refused one is logged quietly).
	Courtesies []Courtesy
}

// AnyState makes Ready.From match whatever state the node is in.
const AnyState domain.NodeState = ""

// MachineChange is what a step changes of its node's machine, applied to
// the machine as the transaction reads it.
type MachineChange struct {
	// ResetFailures: a node registered; the machine's failures were not in
	// a row.
	ResetFailures bool
	// Failed: one more node did not register on it; at MaxFailures in a
	// row it goes out of service with OutOfServiceReason.
	Failed             bool
	MaxFailures        int
	OutOfServiceReason string
}

// Empty: nothing changes.
func (c MachineChange) Empty() bool { return !c.ResetFailures && !c.Failed }

// Courtesy is a courtesy call that failed.
type Courtesy struct {
	What string
	Err  error
}

// Pool is the worker pool a key's turn runs in.
type Pool int

// The worker pools of node turns.
const (
	// Workers run every turn but those below: provisioning, drains whose
	// notice is out, removals, cleanup.
	Workers Pool = iota
	// Notices run the drains whose notice is not out yet: a pool of their
	// own, so a burst's notices never wait behind other turns.
	Notices
)

// Due is when a key's turn runs next, and where.
type Due struct {
	// At: the turn runs then; zero: when the key is woken or added, and at
	// By at the latest.
	At time.Time
	// By: the turn runs by then whatever else happens (a drain's
	// deadline, a registration deadline), and a retry after a failure
	// never waits past it.
	By time.Time
	// Pool the turn runs in.
	Pool Pool
}

// Zero: the key is not due again until it is added.
func (d Due) Zero() bool { return d.At.IsZero() && d.By.IsZero() }

// When is when the turn runs if nothing wakes it: At, else By.
func (d Due) When() time.Time {
	if d.At.IsZero() {
		return d.By
	}
	return d.At
}

// wait is the Due of a step that waits, in pool, for what the driver
// tells (tells: it wakes the key) or else polls every poll, and is due by
// by (zero: nothing bounds it).
func wait(now time.Time, tells bool, poll time.Duration, by time.Time, pool Pool) Due {
	d := Due{By: by, Pool: pool}
	if !tells {
		d.At = now.Add(poll)
		if !by.IsZero() && by.Before(d.At) {
			d.At = by
		}
	}
	return d
}
