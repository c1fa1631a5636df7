package reclaim

import (
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/domain"
)

// Pool is the worker pool a node's step runs in.
type Pool int

const (
	// Workers run every step but those below: provisioning, drains whose
	// notice is out, removals, cleanup.
	Workers Pool = iota
	// Notices run the drains whose notice is not out yet: a pool of their
	// own, so a burst's notices never wait behind other steps.
	Notices
)

// Retry is a failed run's backoff (see backoff.Keyed).
type Retry = backoff.Retry

// Due is when a node's step is due and where it runs.
type Due struct {
	// NotBefore: the step waits until then (a failed run's backoff).
	NotBefore time.Time
	// Wake: the loop must run the step by then even if nothing wakes it
	// (a drain's deadline, a registration timeout); zero: the next pass
	// will do (a pass runs every in-flight node's step).
	Wake time.Time
	Pool Pool
}

// When is when node n's step is next due: the one answer the loop
// schedules by. registerBy is when a provisioning node must be ready by
// (the controller's registration window); r is its last run's backoff. A
// retry of a drain that failed before its deadline never waits past it:
// the deadline step does not wait for the failures of the notice.
func When(n domain.Node, registerBy time.Time, r Retry) Due {
	d := Due{NotBefore: r.At}
	switch n.State {
	case domain.NodeDraining:
		d.Wake = n.Deadline
		if !n.Notified {
			d.Pool = Notices
		}
		if r.FailedAt.Before(n.Deadline) && r.At.After(n.Deadline) {
			d.NotBefore = n.Deadline
		}
	case domain.NodeProvisioning:
		d.Wake = registerBy
	}
	return d
}

// WhenCleanup is when a removed node's cleanup is next due: after its
// backoff, in the workers' pool; nothing is timed.
func WhenCleanup(r Retry) Due { return Due{NotBefore: r.At} }
