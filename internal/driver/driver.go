// Package driver defines the two interfaces sparecap acts on the outside
// world through: ClusterDriver (a tenant's cluster: its Kubernetes API in
// internal/kube, or the simulation in internal/sim) and MachineProvider
// (the machines themselves). The reclaim steps are named by what they mean
// on any platform: mark the node draining with its deadline, list the work
// on it, notify a unit of work with a grace bounded by the deadline, post
// a notice the tenant sees, release the node.
//
// Every method is idempotent: the controller persists its intent first and
// may call a method again after a crash, so a repeated call must succeed and
// change nothing more.
package driver

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// NodeSpec describes a node to add to a cluster.
type NodeSpec struct {
	ClusterID string
	NodeName  string
	MachineID string
	Class     domain.ComputeClass
	GPUs      int
	// GPUType is the machine's (empty: not known, a node of before).
	GPUType string
	// Labels include domain.LabelComputeClass, and domain.LabelGPUType
	// where the type is a valid label value.
	Labels map[string]string
	// Platform is the cluster's type (KUBERNETES or SLURM), for the
	// machine provider: what the machine starts to join (a kubelet, a
	// slurmd).
	Platform domain.ClusterType
}

// Spec is what the drivers are told of node n: its labels name its class
// and sparecap node, not its machine (a borrower would learn whose
// reservation it runs on from the machine's ID).
func Spec(n domain.Node) NodeSpec {
	sp := NodeSpec{
		ClusterID: n.ClusterID, NodeName: n.Name, MachineID: n.MachineID, Class: n.Class, GPUs: n.GPUs, GPUType: n.GPUType,
		Labels: map[string]string{
			domain.LabelComputeClass: string(n.Class),
			domain.LabelNodeID:       n.ID,
		},
	}
	if labelValue.MatchString(n.GPUType) {
		sp.Labels[domain.LabelGPUType] = n.GPUType
	}
	return sp
}

// labelValue is a Kubernetes label value that is not empty; a GPU type
// (domain.ValidName) is one unless it ends in '-', '_' or '.'.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)

// Marks are what a draining node carries from T+0 until it goes: why it
// drains and its deadline. On Kubernetes: the cordon, the taint
// domain.TaintPreempted=<cause> and the annotation domain.AnnotationDeadline.
type Marks struct {
	Cause    domain.DrainCause
	Deadline time.Time
}

// Work is a unit of the tenant's work that has not ended on a node: a pod
// on Kubernetes.
type Work struct {
	// Namespace and Name identify it in its cluster.
	Namespace string
	Name      string
	// UID, where the cluster has one, tells it from another unit of work
	// of the same name (a pod recreated under its name): a notice reaches
	// this one only.
	UID string
	// Grace is how long it asks for between its notice and its kill (a
	// pod's terminationGracePeriodSeconds).
	Grace time.Duration
	// Stopping: it has had its notice. KillAt is then when it is killed
	// if it has not ended (a pod's deletionTimestamp): work whose KillAt
	// is after a drain's deadline is notified again, with less grace.
	Stopping bool
	KillAt   time.Time
	// Support: it serves the node, not the tenant's workload (a DaemonSet
	// pod: log shippers, device plugins). It gets its notice once the
	// workload is gone.
	Support bool
	// ReadsDeadline: it can read a deadline written on it while it runs
	// (a pod with a Downward API volume of its annotations), so a notice
	// writes the deadline there first (domain.AnnotationDeadline). For the
	// others that write would only slow the notice down.
	ReadsDeadline bool
}

// Notice is what the tenant sees of a step beside their work: a
// Kubernetes Event.
type Notice struct {
	// Warning: the tenant did not ask for it (Kubernetes' type Warning;
	// Normal otherwise).
	Warning bool
	Reason  string
	Message string
}

// ErrNotReady is returned (wrapped) by AddNode while the node has not
// reported Ready: the caller polls again later. It is not a failure.
var ErrNotReady = errors.New("node is not Ready yet")

// ErrRefused is wrapped by the error of a call the cluster refused (its
// RBAC, an admission policy), or that a driver did not make because the
// cluster refused its permission a moment ago. The driver has reported
// it (Hooks.Access); callers need not repeat it for every node.
var ErrRefused = errors.New("refused by the cluster")

// ClusterDriver is what sparecap does to a tenant's cluster.
//
// Calls on a node the cluster does not have return an error wrapping
// domain.ErrNotFound, except Notify and Release, for which missing work
// or a missing node is success.
type ClusterDriver interface {
	// AddNode registers or adopts the node with its labels and returns nil
	// once it is Ready, or an error wrapping ErrNotReady before that.
	AddNode(ctx context.Context, spec NodeSpec) error
	// MarkDraining marks the node draining with its marks. It is called
	// on every pass of a drain, so marks someone removed come back; on a
	// node already marked it should cost nothing.
	MarkDraining(ctx context.Context, clusterID, nodeName string, m Marks) error
	// ListWork lists the work on the node that has not ended.
	ListWork(ctx context.Context, clusterID, nodeName string) ([]Work, error)
	// Notify gives w its notice so that it is gone by by: grace
	// GraceBy(w, by, now), read as the driver acts, so time spent waiting
	// for a turn (a lock, a rate limiter) never stretches work past its
	// drain's deadline. A zero or past by ends it at once.
	Notify(ctx context.Context, clusterID, nodeName string, w Work, by time.Time) error
	// PostNotice posts n where the tenant sees it: about the node, or
	// about w when w is not nil. Posting the same notice again leaves one.
	PostNotice(ctx context.Context, clusterID, nodeName string, w *Work, n Notice) error
	// Release removes the node from the cluster (a Kubernetes Node
	// object). A missing node is not an error.
	Release(ctx context.Context, clusterID, nodeName string) error
	// SetClass marks the node with spec.Class in place, its tenant having
	// converted it: its class label (spec.Labels) and the class's taints
	// on Kubernetes, its class feature on Slurm. Its work is untouched:
	// nothing is drained, stopped or rescheduled.
	SetClass(ctx context.Context, spec NodeSpec) error
	// Health reports what the cluster says of the node, from a watch; an
	// error means the driver cannot tell now (the watch has not synced,
	// the API is unreachable), and nothing is decided from it.
	Health(ctx context.Context, clusterID, nodeName string) (NodeHealth, error)
	// Load says, from what the driver already watches (no call out, no
	// wait), what the node runs: whether it runs none of its tenant's
	// work (support work such as DaemonSet pods does not count), the gang
	// of its work and what stopping it would lose. Known is false when it
	// cannot tell now, or cannot at all (NoLoad). The allocator gives up
	// idle nodes first and busy ones by least harm when it scales a
	// cluster down or takes preemptible nodes back.
	Load(clusterID, nodeName string) domain.NodeLoad
	// Running lists, from what the driver already watches (no call out,
	// no wait), the tenant's work on the node now, support work aside
	// (DaemonSet pods); known is false when the driver cannot tell now.
	// Cost allocation records it.
	Running(clusterID, nodeName string) (work []domain.Running, known bool)
	// SetHooks sets how the driver tells the controller what it sees,
	// before the first call.
	SetHooks(h Hooks)
}

// NoLoad is the Load of a driver that cannot tell what a node runs.
type NoLoad struct{}

// Load never knows.
func (NoLoad) Load(clusterID, nodeName string) domain.NodeLoad { return domain.NodeLoad{} }

// Running never knows.
func (NoLoad) Running(clusterID, nodeName string) ([]domain.Running, bool) { return nil, false }

// Hooks are how a driver tells the controller of changes it sees. Each may
// be nil; none may block or call the driver.
type Hooks struct {
	// Wake: something a node's step waits for changed for the node named
	// nodeName in cluster clusterID (its last work ended, it registered,
	// it was deleted, it changed readiness, its machine is ready), or will
	// at at (not zero: the simulated fleet knows when a pod exits or a
	// machine is ready): that node's turn runs then, and no other's.
	Wake func(clusterID, nodeName string, at time.Time)
	// Access: what the driver learned of the cluster's permissions.
	Access func(AccessReport)
	// Note: something about a node the operator should read in its
	// lifecycle events (a drain reason someone else set, kept). Drivers
	// report each once.
	Note func(NodeNote)
}

// Announcer is a cluster driver that can put a node's coming notice where
// its work reads it ahead (a booking claimed its machine): the annotation
// domain.AnnotationPreemptAt on a Kubernetes node and its pods, the Slurm
// node's Extra. A zero at takes the announcement away. It is a courtesy:
// the notice itself comes at its time whatever this did. Called again,
// it puts the annotation on work that came since and costs nothing else.
type Announcer interface {
	Announce(ctx context.Context, clusterID, nodeName string, at time.Time) error
}

// Announce announces at on the node through d, if d can; ok is false
// when it cannot.
func Announce(ctx context.Context, d any, clusterID, nodeName string, at time.Time) (ok bool, err error) {
	a, ok := d.(Announcer)
	if !ok {
		return false, nil
	}
	return true, a.Announce(ctx, clusterID, nodeName, at)
}

// LeadTeller is a machine provider that knows how long a machine of a
// pool takes to provision (the simulated fleet's provision time): a
// booking's nodes are planned that long, and a drain window, before its
// start. ok is false when it does not know.
type LeadTeller interface {
	ProvisionLead(region, gpuType string) (d time.Duration, ok bool)
}

// Teller is a cluster driver or machine provider that wakes a node
// (Hooks.Wake) whenever what its step waits for may have changed (its
// work ended, it registered, its machine is ready): a step waiting on it
// needs no poll.
type Teller interface {
	Tells(clusterID string) bool
}

// Tells reports whether d tells of cluster clusterID's nodes.
func Tells(d any, clusterID string) bool {
	t, ok := d.(Teller)
	return ok && t.Tells(clusterID)
}

// NodeNote is a lifecycle event a driver asks the controller to record.
type NodeNote struct {
	ClusterID, NodeName string
	Reason              domain.EventReason
	Message             string
}

// GraceBy is the grace w may have at now to be gone by by: its own, cut
// to the time left, in whole seconds rounded down (as Kubernetes counts
// them), never negative.
func GraceBy(w Work, by, now time.Time) time.Duration {
	return max(min(w.Grace, by.Sub(now)), 0).Truncate(time.Second)
}

// NodeHealth is what a cluster says about one of its nodes.
type NodeHealth struct {
	// Gone: the cluster has no node of that name.
	Gone bool
	// NotReadySince is when the node last stopped being Ready (zero while
	// it is Ready).
	NotReadySince time.Time
	// Class is the class the node is marked with in its cluster (its
	// label on Kubernetes, its feature on Slurm); empty when the driver
	// cannot tell. One that differs from the node's is marked again
	// (SetClass).
	Class domain.ComputeClass
	// Lost, when not empty, says why the driver found the node lost
	// already (a Slurm node whose slurmd stopped answering, which the
	// driver set DOWN so its jobs are requeued now): it is lost at once,
	// without waiting for NodeLostAfter.
	Lost string
}

// AccessReport is what a driver learned of the permissions a cluster's
// API grants sparecap: the answer of a permission check (Checked: Missing
// is all that is missing, replacing what was known), or one permission a
// call was refused, on the way to a node's notice or cleanup (NodeName).
// Drivers report a refusal once, not once per pod: they remember it and
// skip the calls that need it for a while.
type AccessReport struct {
	ClusterID string
	NodeName  string
	Checked   bool
	Missing   []domain.MissingPermission
}

// MachineProvider prepares machines for clusters and wipes them afterwards.
// Both calls are polled: they start the work on the first call and report
// done=true once it has finished.
type MachineProvider interface {
	Prepare(ctx context.Context, m domain.Machine, spec NodeSpec) (done bool, err error)
	Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (done bool, err error)
}
