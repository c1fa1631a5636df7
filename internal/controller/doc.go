// Package controller drives the fleet toward the desired state. It is the
// only writer of nodes: requests change clusters, the controller plans with
// the pure allocator, writes the plan's intents to the store, then acts on
// the outside world through the drivers and records what it observed.
//
// Its files are its jobs:
//
//   - loop.go: the Run loop and its passes: plan, sweep for lost nodes,
//     finish deleted clusters, prune old events; Reconcile, one pass that
//     also runs every step due (tests and tools);
//   - step.go: the step runner's step (package steprun owns when each
//     node's step runs): the node read once, then provisioning's or
//     reclaim's step by its state; what is due, and the nodes a commit
//     hands the runner;
//   - requests.go: the cluster requests (create, update, weight, delete),
//     planned and committed at once; creates that arrive together share
//     one plan and one commit;
//   - plan.go and commit.go: replanning, and the commit that writes a
//     plan's drains (the T+0 change is reclaim.Start), new nodes, cluster
//     states and events in one transaction;
//   - transition.go: compare-and-set node transitions under the plan lock,
//     group-committed (many nodes' steps share one transaction);
//   - port.go: the controller as the port of the step machines: pending
//     and provisioning nodes are package provision's, draining and
//     removing nodes, cleanup and lost nodes package reclaim's; each doc
//     states its contract;
//   - access.go: what drivers learn of clusters' permissions, recorded
//     once per cluster;
//   - retry.go: a failed step's backoff policy and its error on the node.
//
// # Concurrency
//
// One lock (planLock) serializes planning and plan commits, so a create
// request's capacity check and the periodic reconcile never hand the same
// machine out twice. Driver calls happen outside it; their results are
// written with a compare-and-set on the node's state, so a node reclaimed
// while it was being provisioned is not marked ready afterwards.
package controller
