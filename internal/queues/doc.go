// Package queues makes sparecap a citizen of the batch queues tenants run
// on their Kubernetes clusters: Kueue, and anything that asks for capacity
// with ProvisioningRequests. For every attached cluster whose API serves
// them it runs two controllers, each in a package of its own:
//
//   - admission: Kueue's AdmissionCheck controller sparecap.dev/capacity.
//     A workload whose ClusterQueue carries the check is Ready when
//     preemptible capacity for its pod sets is there, pinned to
//     preemptible nodes; at a reclaim notice on a node running its pods
//     the check goes to Retry, so Kueue evicts, suspends and requeues it
//     at once rather than after waitForPodsReady's recoveryTimeout.
//   - provreq: the ProvisioningRequest class preemptible.sparecap.dev.
//     Requests raise the cluster's preemptible target (within the maximum
//     the tenant set), are Provisioned when the nodes are ready, Failed
//     when the pool cannot fill them, and the target comes down when they
//     are gone.
//
// Both are level-based: every pass reads the cluster's objects from
// watches and sparecap's own view of the cluster (Fleet), decides with a
// pure function, and writes only what differs. Their state lives in the
// tenant's objects and in sparecap's store, so a restart of sparecap or of
// Kueue loses nothing. Neither stands between a pod and its notice: they
// read the reclaim the controller committed, after it, on their own
// goroutines.
//
// Manager starts and stops them as clusters are attached, detached or
// served APIs appear; the leader runs it.
package queues
