// Package allocator decides which machine serves which cluster. It is pure:
// Compute reads a Snapshot and the time it is given and returns a Plan value;
// it does no I/O, reads no clock and keeps no state between calls. The same
// function answers a create request's capacity check, the controller's
// periodic reconcile, and benchmarks and property tests. A Planner makes
// the same plans and keeps, between calls, only the indexes it built from
// tables that did not change: that makes a plan faster, never different
// (the property tests compare the two on every plan).
//
// # Model
//
// The fleet is split into partitions, one per (region, GPU type); machines
// never serve clusters of another partition, so every partition is planned
// on its own. Each machine belongs to a pool: the on-demand pool, or a
// reservation held by one project. A machine is occupied by at most one
// active node (provisioning, ready, draining or removing) and claimed by at
// most one pending node, which starts provisioning once the occupant has
// been removed.
//
// # Steps, per partition, in this order
//
//  1. Deleted clusters: every live node is reclaimed (pending ones are
//     cancelled).
//  2. Nodes on machines taken out of service are reclaimed.
//  3. Scale-down: standard nodes above num_gpus and preemptible nodes above
//     the target are reclaimed, not-yet-ready nodes first, then ready ones
//     running none of the tenant's work (Config.Idle), then the youngest.
//  4. Standard demand, oldest cluster first. Sources, in order: free machines
//     of the cluster's pool (RESERVED clusters use their project's
//     reservations, ON_DEMAND ones the on-demand pool); machines of that pool
//     already draining with nobody waiting; machines claimed only by a
//     pending preemptible node (cancelled); machines running a preemptible
//     node, which is reclaimed. Victims: the cluster holding the most
//     preemptible nodes per unit of weight first (the one furthest above its
//     fair share), then its idle nodes before busy ones, then its youngest.
//     Standard nodes are never taken.
//     What cannot be found is reported as a Shortfall.
//  5. Preemptible demand. Supply is every machine of the partition, of any
//     pool, that is neither out of service, nor serving or awaited by a
//     standard node, nor cooling down. It is shared by weighted max-min
//     fairness: a cluster's share is min(target, level·weight); the integer
//     remainder goes one node at a time to clusters already holding more
//     than their share (so it moves no node), then to the cluster whose
//     target has been unmet longest (Cluster.UnmetSince), then to clusters
//     holding more, then to older clusters. Equal-weight shares of unmet
//     clusters differ by at most one node, and a freed node goes to the
//     longest waiter, so no cluster waits forever behind earlier ones
//     (nothing is reclaimed just to rotate). Clusters above their share
//     lose their idle, then youngest, nodes (cause fair_share); clusters
//     below it get free machines first, then machines that are draining.
//
// # Applying a plan
//
// The fields of Plan are meant to be applied in this order, in one store
// transaction: Reclaims (drains start, with the deadline already computed;
// cancelled pending nodes are removed), then Provisions (new nodes, pending
// when their machine is still occupied), then Clusters (status, allocated,
// unfulfilled reason). Shortfalls are not applied: a create or scale request
// whose cluster appears there is refused and the plan is dropped.
package allocator
