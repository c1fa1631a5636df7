// Package controller drives the fleet toward the desired state. It is the
// only writer of nodes: requests change clusters, the controller plans with
// the pure allocator, writes the plan's intents to the store, then acts on
// the outside world through the drivers and records what it observed.
//
// Its files are its jobs:
//
//   - loop.go: the Run loop and its passes: plan, start every node's step
//     when it is due (reclaim.When), sweep for lost nodes, finish deleted
//     clusters, prune old events;
//   - requests.go: the cluster requests (create, update, weight, delete),
//     planned and committed at once; creates that arrive together share
//     one plan and one commit;
//   - plan.go and commit.go: replanning, and the commit that writes a
//     plan's drains (the T+0 change is reclaim.Start), new nodes, cluster
//     states and events in one transaction;
//   - transition.go: compare-and-set node transitions under the plan lock,
//     group-committed (many nodes' steps share one transaction);
//   - provision.go and registration.go: pending and provisioning nodes,
//     and the registration timeout;
//   - port.go: the controller as the reclaim machine's Port. Draining and
//     removing nodes, cleanup and lost nodes are package reclaim's, whose
//     doc states the reclaim contract;
//   - access.go: what drivers learn of clusters' permissions, recorded
//     once per cluster;
//   - retry.go: a failed step's backoff and its error on the node.
//
// # Concurrency
//
// One lock (planLock) serializes planning and plan commits, so a create
// request's capacity check and the periodic reconcile never hand the same
// machine out twice. Driver calls happen outside it; their results are
// written with a compare-and-set on the node's state, so a node reclaimed
// while it was being provisioned is not marked ready afterwards.
package controller
