// Package lifecycle is one node's life as data: a step that is a pure
// function of the node, what the control plane knows beside it and the
// time, returning what to do (a Ready), and the executor that does it. It
// holds the provisioning machine (pending → provisioning → ready) and the
// reclaim machine (draining → removing → removed, cleanup, lost nodes),
// which is the heart of the product's promise; this is their contract, as
// the code keeps it.
//
// # A step returns what to do (step.go, ready.go)
//
// Step(cfg, Input) Ready reads only its Input: the node as stored, the
// time, the Facts the executor gathered (the node's machine and cluster,
// whether another node holds the machine, what its driver watches of it,
// the first Prepare this process made of it), and, within a turn, the
// phase the turn is in and the answers of the calls the last round asked
// for. It does no I/O and reads no clock. Its Ready says, as data, in the
// order the executor applies it (as etcd's raft's Ready):
//
//  1. persist: the node's next stored state (compare-and-set: written
//     only onto the node as the step read it, in the state it expects),
//     its lifecycle events, a change of its machine (a failure counted,
//     failures forgotten), the hand-over of a freed machine to the node
//     waiting for it; many nodes' writes share one commit (the
//     controller's group commit);
//  2. act: the driver calls to make, group by group, each cut off at its
//     time (a drain's deadline, the courtesy second, the cleanup budget);
//     their answers are the next round's Results, so one turn of a node is
//     a few rounds of its step (a drain: mark and list its work, then
//     notify it, then record the notice);
//  3. tell: observations for metrics and narration, and whether a node
//     moved (the plan may change).
//
// A Ready without calls ends the turn, saying when the node is due next
// (Due: at a time, or when woken, and by a time at the latest) and, if the
// turn failed, why (kept on the node, retried after a backoff that never
// waits past Due.By).
//
// # The executor (executor.go, act.go, facts.go, runner.go, group.go)
//
// One Executor applies the Readys of every node: its Runner keeps when each
// key is due (a timer queue keyed by node, no goroutine per node), its
// turns read the node and its Facts, run the step, commit through World,
// make the calls and feed the answers back. The same executor runs the
// server on the real clock (Runner.Run: worker pools; a cluster whose API
// is slow only holds its own nodes' turns) and the simulator on a virtual
// one (Runner.RunDue: the turns due now, inline, in a fixed order; the
// simulated fleet answers at once, so nothing is timed). Inline turns run
// as coroutines, one at a time in that order, each parked at its commit
// until all are parked or done; the World then commits them in one
// transaction (Grouper, group.go), as a server's concurrent turns share
// one, and a replay still repeats to the byte. Both ask the same question
// to know when to look again: Runner.Earliest.
//
// # Wakeups by key
//
// Nothing walks every node to find the due ones. A commit that changes a
// node hands it to the runner; a step's answer schedules its own node; and
// what a driver observes (a pod gone, a node registered or lost, a
// machine prepared) wakes the node it concerns, and no other
// (driver.Hooks.Wake). A driver that tells (Teller: the Kubernetes
// driver's watches, the Slurm driver's own poll, the simulated fleet,
// which even says when its next change will be) spares the steps any poll;
// for one that cannot tell, a step looks again every Config.Poll.
//
// # The states
//
// A node taken back moves draining → removing → removed. The T+0 change
// (Start) is a pure function of the node, the cause and the time: it
// stores the deadline (T+0 + drain window), the cause and the
// PreemptionNotified (or ScaledDown) event, in the same transaction as
// the plan that decided it. A pending node, which never held its machine,
// is removed at once. Everything after that is a step of the stored node
// and the clock, so no goroutine holds a timer for a drain, and a
// restarted or newly elected controller resumes every drain with its
// original deadline: Notified tells whether the notice went out, and every
// driver call is idempotent.
//
// T+0 (drain.go): the node is marked draining (on Kubernetes the cordon,
// the taint sparecap.dev/preempted=<cause> and the deadline annotation);
// every unit of its workload gets its notice with grace bounded by the
// deadline (driver.GraceBy, read by the driver as it acts); support work
// (DaemonSet pods) once the workload is gone; then the notices the tenant
// reads (Kubernetes Events). Only the work's notices are essential. The
// marks and the tenant's notices are courtesies: refused, failed or slow,
// they are logged (the driver reports a refusal once per cluster) and
// never stand between work and its notice, nor keep the node from its
// early release. The marks go first, but until the notice is out they get
// at most a second. Notified is stored once every unit of work got its
// notice. While the node drains, each turn (when its driver says work
// ended, a pod was bound to it or its marks were removed, else every Poll)
// keeps the notice true on a cluster that moves under it.
//
// The end (end.go, cleanup.go): the moment no work is left, the drain ends
// early; at the deadline it ends whatever the work is doing (work gone in
// the last second counts as ended by the deadline: grace periods are whole
// seconds, rounded down). Either way the node is removed and its machine
// taken back now: billing of a reclaimed preemptible node stopped at T+0,
// others stop at this removal, never later than the deadline. Nothing is
// asked of the cluster on the way but a cleanup attempt bounded by
// Config.CleanupBudget; what it leaves is cleanup, retried under the
// node's CleanupKey with backoff until the cluster answers or is deleted.
// The removing step (remove.go) never wipes a machine another node holds,
// wipes it through the machine provider, and hands it to the node waiting
// for it in the transaction that writes this one removed.
//
// Provisioning (provision.go): a provisioning node's machine is prepared,
// then the node added to its cluster until it is Ready; a node not Ready
// within Config.RegisterTimeout (counted from the first Prepare this
// process made) goes back through the removing step, its machine blamed
// unless the cluster's API was failing, and out of service after
// MaxFailures in a row.
//
// Lost nodes (lost.go): a ready node its cluster no longer has, or reports
// not Ready longer than Config.NodeLostAfter, is lost: billing stops, its
// machine goes back, the allocator replaces it. A cluster that cannot tell
// decides nothing.
//
// Lifecycle events are written in the transaction of the change they
// report; in the cluster: marks, then the work's notices, then the
// tenant's notices; at the end, the work's forced end, the node's
// release, then the notices of how it went.
package lifecycle
