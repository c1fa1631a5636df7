package domain

import "time"

// Running is a unit of a tenant's work that a driver sees on a node now:
// a pod on Kubernetes, a job on Slurm. Cost allocation splits the node's
// priced usage among the units that ran on it, by GPUs and time.
type Running struct {
	// Key tells it from every other unit that ran on the node: a pod's UID,
	// a Slurm job's ID and restart count (a requeued job runs again).
	Key string
	// Namespace is a pod's namespace (empty on Slurm).
	Namespace string
	// Name is a pod's name or a Slurm job's name.
	Name string
	// Job is the run it belongs to, one across its reclaims and reruns: a
	// Job's, JobSet's or other gang's name on Kubernetes (empty for a pod
	// of its own), the job ID on Slurm (kept when requeued).
	Job string
	// Account is a Slurm job's account (empty on Kubernetes).
	Account string
	// Labels are a pod's labels (at most MaxWorkLabels), or on Slurm the
	// job's user under "user".
	Labels map[string]string
	// GPUs it holds on the node; 0 when the driver cannot tell, which
	// counts as the whole node.
	GPUs int
	// Start is when it started on the node (zero: unknown, taken as when
	// it was first seen).
	Start time.Time
	// Progress is the units of work (epochs, steps) its job reported
	// completed, 0 when it reports none.
	Progress int64
}

// MaxProgress bounds a reported progress: tenant input.
const MaxProgress = 1 << 50

// MaxWorkLabels bounds the labels kept of a unit of work: a tenant's.
const MaxWorkLabels = 32

// WorkSpan is a unit of work on a node over [Start, End): End is zero
// while it runs (was last seen running).
type WorkSpan struct {
	ID                   int64
	ProjectID, ClusterID string
	NodeID               string
	Running
	End time.Time
}
