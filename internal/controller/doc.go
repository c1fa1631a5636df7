// Package controller drives the fleet toward the desired state. It is the
// only writer of nodes: requests change clusters, the controller plans with
// the pure allocator, writes the plan's intents to the store, then acts on
// the outside world through the drivers and records what it observed.
//
// # Reclaim is a persisted state machine
//
// A node being taken back moves ready → draining → removing → removed. The
// transition to draining stores the deadline (T+0 + drain window) together
// with the PreemptionNotified lifecycle event, in the same transaction as
// the plan that decided it. Everything after that is a step function of the
// stored node and the clock:
//
//   - draining, not yet notified: cordon, taint, annotate the deadline, post
//     the Kubernetes Event, delete every pod with grace min(its
//     terminationGracePeriodSeconds, time left). These calls are idempotent;
//     Notified is stored only once all have succeeded, so a crash redoes
//     them.
//   - draining, notified: no pods left → NodeDrained, removing (outcome
//     early); deadline reached → force-delete the pods, removing (outcome
//     deadline).
//   - removing: delete the node object (NodeRemoved), wipe the machine, then
//     removed; a node waiting for the machine starts provisioning in the same
//     transaction.
//
// No goroutine holds a timer for a drain: after a restart the next
// reconcile finds every draining node with its original deadline. The Run
// loop sleeps until the earliest deadline or the next interval, whichever
// comes first.
//
// # Concurrency
//
// One mutex serializes planning and plan commits, so a create request's
// capacity check and the periodic reconcile never hand the same machine out
// twice. Driver calls happen outside it; their results are written with a
// compare-and-set on the node's state, so a node reclaimed while it was
// being provisioned is not marked ready afterwards.
package controller
