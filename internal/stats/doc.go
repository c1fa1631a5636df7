// Package stats computes interruption statistics of preemptible capacity
// from the recorded node lifecycle. It is pure: no I/O and no clock; the
// caller passes the nodes, the machines and the time.
//
// # Scope
//
// Only preemptible nodes that became ready (ReadyAt set) count. A node
// reclaimed before it ever joined its cluster ran no work, so it was not
// interrupted: it adds nothing to any field. Standard nodes never count.
//
// Statistics are grouped by the region and GPU type of the node's machine
// (machines are never deleted, so every node has one). There is one entry
// per region and GPU type of the machines passed in, even when nothing
// happened there, sorted by region then GPU type. Nodes whose machine is not
// among those passed are left out, which is how a caller restricts the
// result to some regions or GPU types.
//
// # The window
//
// The window is the half-open interval [from, to). An instant belongs to it
// when from <= t < to. now is the time of the computation: it ends the
// service of nodes still serving. A window reaching past now therefore
// counts no future hours.
//
// # Definitions
//
// A node's service is the interval [ReadyAt, end), where end is
// DrainStartedAt if its drain has started (it is draining, being removed or
// removed), else RemovedAt if it was removed without a drain, else now. The
// drain notice ends service: from then on the node is cordoned and its pods
// are asked to leave.
//
//   - preemptible_node_hours: the sum over nodes of the length of
//     service ∩ window, in hours (computed in whole microseconds, the
//     store's precision, so the sum is exact and order-independent).
//   - preemptions: the nodes whose drain started in the window with a cause
//     the tenant did not ask for, that is a cause for which
//     domain.DrainCause.TenantInitiated is false: preempted (capacity needed
//     for standard nodes), fair_share (spare capacity rebalanced) and
//     out_of_service (the operator took the machine away). Drains for
//     scaled_down and cluster_deleted are the tenant's own doing and are not
//     preemptions.
//   - preemptions_per_node_hour: preemptions / preemptible_node_hours. When
//     there are no node-hours the rate is 0, even if preemptions is not (a
//     node whose service ended exactly at from can be preempted in a window
//     it served no time of). It is never infinite or NaN.
//   - lifetime of a preempted node: DrainStartedAt − ReadyAt, for each node
//     counted in preemptions (whenever its service began, even before from).
//   - median_lifetime_seconds, p90_lifetime_seconds: nearest-rank
//     percentiles of those lifetimes. With the N lifetimes sorted ascending
//     as x[1] ≤ … ≤ x[N], the p-th percentile is x[⌈p·N/100⌉]. It is always
//     one of the observed values, never an interpolation; for even N the
//     median is the lower of the two middle values. Both are 0 when
//     preemptions is 0 (no lifetime was observed).
//   - drains_ended_early, drains_ended_at_deadline: drains of preempted
//     nodes — the same causes as preemptions, tenant-initiated drains
//     excluded — that finished (DrainedAt) in the window, by outcome. A
//     drain may start in one window and finish in the next, so these need
//     not add up to preemptions.
//   - early_share: drains_ended_early / (drains_ended_early +
//     drains_ended_at_deadline), or 0 when no drain finished in the window.
//     It measures how often work left on its own within the notice when the
//     platform reclaimed a node.
//   - nodes_observed: the nodes that contribute to at least one of the
//     fields above (served some time in the window, were preempted in it, or
//     had a preemption drain finish in it). Each node counts once.
package stats
