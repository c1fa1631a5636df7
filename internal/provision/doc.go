// Package provision is the provisioning step machine, the peer of package
// reclaim: it moves a node from pending to ready. A pending node starts
// provisioning once its machine serves no other node (Port.Start; the
// removal that frees a machine normally starts its waiting node in the
// same transaction). A provisioning node's machine is prepared through
// the machine provider, then the node is added to its cluster, and once
// the cluster reports it Ready it is ready (Port.Registered) and its
// machine's run of failures is forgotten.
//
// A node that is not Ready within Config.RegisterTimeout is given back
// (registration failure): its machine is blamed unless the cluster's API
// was failing, and after Config.MaxFailures such failures in a row it is
// taken out of service; the node goes through reclaim's removing step and
// the allocator replaces it. The window counts from the first Prepare
// this process made (a new leader gives every machine still preparing one
// fresh window, which never fails a node for time it spent queued), or
// from when the node was planned.
//
// Like reclaim, it depends on the domain, the driver interfaces, the
// clock and steprun's Due, never on the controller: the controller drives
// it through Port, and schedules each node by the Due its step answers.
package provision
