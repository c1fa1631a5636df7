// Package reclaim is the reclaim step machine: how sparecap takes a node
// back from a tenant's cluster, from the plan's decision (T+0) to the
// machine's return. It is the heart of the product's promise, and this is
// its contract, as the code keeps it.
//
// # The states
//
// A node being taken back moves draining → removing → removed. The T+0
// change (Start) is a pure function of the node, the cause and the time:
// it stores the deadline (T+0 + drain window), the cause and the
// PreemptionNotified (or ScaledDown) lifecycle event, in the same
// transaction as the plan that decided it (the controller's commit). A
// pending node, which never held its machine, is removed at once.
// Everything after that is a step of the stored node and the clock
// (Machine.Step), so no goroutine holds a timer for a drain, and a
// restarted or newly elected controller resumes every drain with its
// original deadline: draining nodes are stepped again, Notified tells
// whether the notice went out, and every driver call is idempotent.
//
// # T+0: the notice (drain.go)
//
// On the first pass of a drain, through the driver:
//
//  1. the node is marked draining with its marks (its cause and its
//     deadline: on Kubernetes the cordon, the taint
//     sparecap.dev/preempted=<cause> and the deadline annotation);
//  2. every unit of the workload on it is notified with grace bounded by
//     the deadline (driver.GraceBy: its own grace, cut to the time left,
//     read by the driver as it acts); support work (DaemonSet pods) is
//     notified once the workload is gone;
//  3. a notice the tenant sees is posted on the node and on each unit of
//     work (Kubernetes Events), after every unit's notice went out.
//
// Only step 2 is essential. The marks and the tenant's notices are
// courtesies: refused (RBAC, an admission policy), failed or slow, they
// are logged (the driver reports a refusal once per cluster, see
// driver.Hooks.Access) and never stand between work and its notice, nor
// keep the node from its early release. The marks go first, so the
// cluster places nothing new on the node, but until the notice is out they
// get at most a second (courtesyWait). One unit's failed notice never
// holds back another's. Notified is stored once every unit of work got
// its notice; until then each pass redoes the essential step.
//
// # While the node drains (drain.go)
//
// Each step (every Config.Poll, and whenever the driver says work ended)
// keeps
// the notice true on a cluster that moves under it: the marks are applied
// again if someone removed them; work that arrived after T+0 gets its own
// notice with grace to the deadline; work already stopping whose kill
// time is after the deadline is notified again with less. A drain's calls
// are cut off at the deadline. A failed step is retried with jittered
// backoff, and a retry never waits past the deadline (Machine.Due sets
// the deadline as the step's By; package steprun keeps it).
//
// # Early release and the deadline (deadline.go, remove.go)
//
// The moment no work is left on the node, its drain ends early; at the
// deadline it ends whatever the work is doing (work gone within the last
// second counts as ended by the deadline: grace periods are whole
// seconds, rounded down). Either way (endDrain) the node is removed and
// its machine taken back now: billing of a reclaimed preemptible node
// stopped at T+0, others stop at this removal, never later than the
// deadline. Nothing is asked of the cluster on the way to the machine's
// return but a cleanup attempt bounded by Config.CleanupBudget (a
// second). The removing step (Remove) checks under the plan lock that the
// node still owns its machine (Port.Owns: a stale copy never wipes a
// machine handed on), wipes it through the machine provider, and hands it
// to the node waiting for it, in the same transaction that writes this
// one removed (Port.HandOver).
//
// # Cleanup (cleanup.go)
//
// What the cluster still holds once the machine is back (work left on the
// node, the node itself) is cleanup: work is ended at once, then the node
// is released whether or not every unit could be ended (Kubernetes' pod
// garbage collector deletes pods bound to a Node that is gone), then the
// notices saying how the node went are posted (a courtesy that never
// keeps cleanup pending). If the cluster does not answer within the
// budget, the node is removed with cleanup_pending, and Cleanup retries
// in the background, apart from the node's own steps (CleanupKey), with
// the controller's backoff, until the cluster answers (CleanupFinished)
// or is deleted. Cleanup never holds a machine.
//
// # Lost nodes (lost.go) and registration timeouts
//
// A ready node the cluster no longer has, or reports not Ready longer
// than Config.NodeLostAfter, is lost (Sweep, Lose): billing stops then,
// its machine goes back through the removing step, its cleanup is
// pending, and the allocator replaces it. A cluster that cannot tell
// (its watch has not synced, its API is down) decides nothing. A node
// that does not register Ready within the controller's registration
// timeout is given up by the controller (it is provisioning's to decide)
// and goes back through the same removing step (Remove), its cleanup
// pending.
//
// # The order of marks, notices and events
//
// Lifecycle events are written in the transaction of the change they
// report: the notice's with T+0, NodeDrained (an early end) and
// NodeRemoved with the drain's end, stamped with the removal, NodeLost
// with the loss, CleanupFinished with the cleanup. In the cluster: marks,
// then the work's notices, then the tenant's notices; at the end, the
// work's forced end, the node's release, then the notices of how it went.
//
// # The port
//
// The machine depends on the domain, the driver interface, the clock and
// the store's types, never on the controller or the allocator. The
// controller drives it through Port: compare-and-set transitions of one
// node under the plan lock (group-committed), the hand-over of a machine,
// the ownership check, claims that keep one run per node, observations
// and a kick of the loop. Each step answers when the node is next due and
// in which worker pool (Machine.Due), and the controller's step runner
// (package steprun) schedules it by that answer: the drains whose notice
// is not out have a pool of their own (Notices), so a burst's notices
// never wait behind other work.
package reclaim
