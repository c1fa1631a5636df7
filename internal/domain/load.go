package domain

import "time"

// NodeLoad is what a ready node runs, as its cluster's driver sees it
// from what it already watches. The allocator weighs it when it chooses
// which of a cluster's nodes to take back: a preference among the nodes
// that must go, never a veto (see docs/reclaim.md).
type NodeLoad struct {
	// Known is false when the driver cannot tell now; the node is then
	// taken as busy with work of its own of unknown cost.
	Known bool
	// Idle: the node runs none of the tenant's work (support work such as
	// DaemonSet pods aside).
	Idle bool
	// Gang names the gang the node's work belongs to (the pods of one
	// indexed Job, JobSet, LeaderWorkerSet, PodGroup...; one multi-node
	// Slurm job), unique within its cluster. Taking one member stops the
	// whole gang. Empty: the work is the node's own.
	Gang string
	// GangMin is how many members the gang needs to keep running; members
	// above it are its surplus, which can go without stopping it. Zero:
	// it needs every member.
	GangMin int
	// LostGPUSeconds is the work that stops with the node's work: its GPUs
	// times the seconds since the work's last checkpoint (since it started
	// when it reports none), plus what the tenant says its work costs to
	// stop (a pod deletion cost).
	LostGPUSeconds int64
	// WorkGPUSeconds is the work part of LostGPUSeconds: GPUs times the
	// seconds since the last checkpoint, without what the tenant says
	// stopping it costs. The lost-work ledger records it at a notice.
	WorkGPUSeconds int64
	// Protected: the tenant asked that this work be disrupted last (a
	// do-not-disrupt annotation, a disruption budget with no headroom).
	Protected bool
	// Priority is the highest priority of the node's work (a pod's, a
	// Slurm job's): the nodes that must go are taken so that the highest
	// priority of the work stopped is as low as it can be.
	Priority int64
	// LastCheckpoint is the latest checkpoint the node's work reported
	// (zero: none). One after a drain's notice means the work at risk at
	// the notice was saved (LostWork.SavedAt).
	LastCheckpoint time.Time
}

// Pod annotations a tenant's work sets to tell sparecap what stopping it
// would lose (docs/reclaim.md).
const (
	// AnnotationLastCheckpoint: when the pod's work last saved a
	// checkpoint (RFC 3339); `sparecap run` and the SDKs write it.
	AnnotationLastCheckpoint = "sparecap.dev/last-checkpoint"
	// AnnotationGangMin: how many pods of the pod's gang must keep running
	// for it to go on (an elastic job's minimum); the rest are surplus.
	AnnotationGangMin = "sparecap.dev/gang-min"
	// AnnotationDoNotDisrupt ("true"): reclaim this pod's node last.
	// Karpenter's karpenter.sh/do-not-disrupt is honoured the same way.
	AnnotationDoNotDisrupt = "sparecap.dev/do-not-disrupt"
	// AnnotationProgress: the units of work (epochs, steps) the pod's job
	// has completed, a decimal count; the SDKs write it. Cost allocation
	// divides a job's cost by the most it reached.
	AnnotationProgress = "sparecap.dev/progress"
)
