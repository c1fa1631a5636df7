// Package sim is a simulated world for sparecap: a Fleet implements both
// driver.ClusterDriver (the Kubernetes API of every tenant cluster) and
// driver.MachineProvider (the GPU machines), entirely in memory. The embedded
// default server, the demo and the tests run the controller against it.
//
// Time is an input. Nothing in the package sleeps, starts goroutines or reads
// the wall clock; every answer is computed from Config.Clock at the moment it
// is asked. Prepare reports done once Config.ProvisionTime has passed since
// its first call for that machine and node, Wipe likewise with WipeTime, and
// a pod's exit is a timestamp fixed when it is deleted. Stepping a
// clock.Fake therefore runs a five-minute drain in microseconds, and a
// clock.Scaled makes a demo run N times faster with no change here.
//
// Pods behave like Kubernetes pods. Every new node starts with pods made from
// pod templates: Config.Pods if set, otherwise one of three default profiles
// chosen by a hash of (Config.Seed, cluster ID, node name), so the same node
// always gets the same workload. Deleting a running pod with grace g sends
// SIGTERM now; the pod exits on its own after its template's ExitAfter, and
// the kubelet kills it at SIGTERM+g if it has not (a pod with ExitAfter < 0
// ignores SIGTERM and lives until then). As in the API server, a later delete
// may only shorten the grace period, measured from the original SIGTERM, and
// grace 0 removes the pod at once. Two of the default profiles exit well
// within the five-minute drain window; the third runs a trainer that ignores
// SIGTERM and has a ten-minute grace period, so its drain lasts until the
// deadline.
//
// Every call is idempotent, as package driver demands: adding a node twice,
// tainting twice or re-posting an identical event (which, like Kubernetes
// event aggregation, only bumps its count) changes nothing more. Calls that
// name a node that does not exist fail with an error wrapping ErrNoNode
// (which itself wraps domain.ErrNotFound), except ListPods, DeletePod and
// DeleteNode, for which a missing node simply has no pods left to act on.
//
// With Config.StatePath set, the whole world — nodes, labels, taints,
// annotations, cordons, events, pods with their SIGTERM times and grace
// periods, and machine provisioning and wipe start times — is persisted and
// read back by New: a JSON snapshot at StatePath, replaced atomically (temp
// file, fsync, rename) when the log is compacted, and a log at
// StatePath + ".log" to which each change appends one line holding the new
// state of what it touched, fsynced before the call returns. A change
// therefore costs the size of what it touched, not of the world; New
// ignores a torn last line (see persist.go). This models the outside world
// surviving a crash of the control plane: a server killed mid-drain and
// restarted finds its pods still terminating and exiting at exactly the
// times they would have.
//
// Inspection methods (Node, Nodes, Events, Machine, Machines) return copies
// for tests, the demo narration and the console.
package sim
