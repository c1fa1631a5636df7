// Package driver defines the two interfaces the controller acts on the
// outside world through: ClusterDriver (a cluster's Kubernetes API) and
// MachineProvider (the machines themselves). Package sim implements both in
// memory; the Kubernetes driver implements ClusterDriver with client-go.
//
// Every method is idempotent: the controller persists its intent first and
// may call a method again after a crash, so a repeated call must succeed and
// change nothing more.
package driver

import (
	"context"
	"errors"
	"fmt"
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
	// Labels include domain.LabelComputeClass.
	Labels map[string]string
}

// Taint on a node.
type Taint struct {
	Key    string
	Value  string
	Effect string // NoSchedule, NoExecute
}

// NodeEvent is a Kubernetes Event posted on a node.
type NodeEvent struct {
	Type    string // Normal or Warning
	Reason  string
	Message string
}

// Pod is a pod bound to a node that has not exited yet.
type Pod struct {
	Namespace string
	Name      string
	// TerminationGracePeriod from the pod spec.
	TerminationGracePeriod time.Duration
	// Terminating: deletion was requested (SIGTERM sent).
	Terminating bool
	// KillAt, for a terminating pod, is when its grace period ends and the
	// kubelet kills it (Kubernetes' deletionTimestamp). A pod whose KillAt
	// is after a drain's deadline is deleted again with a shorter grace.
	KillAt time.Time
	// UID, where the cluster has one, makes deletions precise: a pod
	// recreated under the same name is not deleted in its place.
	UID string
	// DaemonSet: the pod belongs to a DaemonSet. Such pods (log shippers,
	// device plugins) are stopped last, once the workload pods are gone.
	DaemonSet bool
	// ReadsDeadline: the pod can read a deadline annotation while it runs
	// (a Downward API volume of its annotations), so a drain writes its
	// deadline there (domain.AnnotationDeadline) before deleting it. For
	// the others that write would only slow the notice down.
	ReadsDeadline bool
}

// ErrNotReady is returned (wrapped) by AddNode while the node has not
// reported Ready: the caller polls again later. It is not a failure.
var ErrNotReady = errors.New("node is not Ready yet")

// ErrRefused is wrapped by the error of a call the cluster refused (its
// RBAC, an admission policy), or that a driver did not make because the
// cluster refused its permission a moment ago. The driver has reported
// it (AccessReport); callers need not repeat it for every node.
var ErrRefused = errors.New("refused by the cluster")

// ClusterDriver is what the controller does to a cluster's Kubernetes.
//
// Calls on a node the cluster does not have return an error wrapping
// domain.ErrNotFound, except DeletePod and DeleteNode, for which a missing
// object is success.
type ClusterDriver interface {
	// AddNode registers or adopts the node with its labels and returns nil
	// once it is Ready, or an error wrapping ErrNotReady before that.
	AddNode(ctx context.Context, spec NodeSpec) error
	// Cordon marks the node unschedulable.
	Cordon(ctx context.Context, clusterID, nodeName string) error
	// Taint adds the taint unless the node already has it.
	Taint(ctx context.Context, clusterID, nodeName string, t Taint) error
	// Annotate sets an annotation on the node.
	Annotate(ctx context.Context, clusterID, nodeName, key, value string) error
	// PostEvent posts a Kubernetes Event about the node.
	PostEvent(ctx context.Context, clusterID, nodeName string, e NodeEvent) error
	// PostPodEvent posts a Kubernetes Event about a pod on the node, in the
	// pod's namespace, so the tenant sees it beside their workload. Posting
	// the same event again leaves one.
	PostPodEvent(ctx context.Context, clusterID, nodeName string, pod Pod, e NodeEvent) error
	// ListPods lists the pods on the node that have not exited.
	ListPods(ctx context.Context, clusterID, nodeName string) ([]Pod, error)
	// DeletePod deletes a pod with the grace period (0 forces deletion).
	// Deleting a pod that is gone is not an error.
	DeletePod(ctx context.Context, clusterID, nodeName string, pod Pod, grace time.Duration) error
	// DeleteNode removes the node object. Deleting a missing node is not an
	// error.
	DeleteNode(ctx context.Context, clusterID, nodeName string) error
}

// Marker is implemented by drivers that can apply the T+0 marks of a
// drain in one write: cordon, the taint and the annotations. The
// controller uses it when the driver has it (fewer calls before the
// SIGTERMs of a mass reclaim), and Cordon, Taint and Annotate otherwise.
// The result is the same. A missing node is an error wrapping
// domain.ErrNotFound.
type Marker interface {
	MarkDraining(ctx context.Context, clusterID, nodeName string, t Taint, annotations map[string]string) error
}

// DeadlineDeleter is implemented by drivers that bound a pod's grace by a
// deadline at the moment they delete it: grace = GraceBy(pod, by, now).
// The controller prefers it, so time spent waiting for a turn (a lock, a
// rate limiter, a slot) never stretches a pod past its drain's deadline.
// A zero or past by forces the deletion.
type DeadlineDeleter interface {
	DeletePodBy(ctx context.Context, clusterID, nodeName string, pod Pod, by time.Time) error
}

// MarkDraining applies the T+0 marks with d: in one write when d is a
// Marker, else with Cordon, Taint and Annotate (in that order).
func MarkDraining(ctx context.Context, d ClusterDriver, clusterID, nodeName string, t Taint, annotations map[string]string) error {
	if m, ok := d.(Marker); ok {
		return m.MarkDraining(ctx, clusterID, nodeName, t, annotations)
	}
	if err := d.Cordon(ctx, clusterID, nodeName); err != nil {
		return fmt.Errorf("cordon: %w", err)
	}
	if err := d.Taint(ctx, clusterID, nodeName, t); err != nil {
		return fmt.Errorf("taint: %w", err)
	}
	for k, v := range annotations {
		if err := d.Annotate(ctx, clusterID, nodeName, k, v); err != nil {
			return fmt.Errorf("annotate: %w", err)
		}
	}
	return nil
}

// DeletePodBy deletes the pod with d so that it is gone by by: with the
// driver's own DeletePodBy when it is a DeadlineDeleter, else with the
// grace left at now().
func DeletePodBy(ctx context.Context, d ClusterDriver, clusterID, nodeName string, p Pod, by time.Time, now func() time.Time) error {
	if dd, ok := d.(DeadlineDeleter); ok {
		return dd.DeletePodBy(ctx, clusterID, nodeName, p, by)
	}
	return d.DeletePod(ctx, clusterID, nodeName, p, GraceBy(p, by, now()))
}

// GraceBy is the grace a pod may have at now to be gone by by: its own
// terminationGracePeriod, cut to the time left, in whole seconds rounded
// down (as Kubernetes counts them), never negative.
func GraceBy(p Pod, by, now time.Time) time.Duration {
	return max(min(p.TerminationGracePeriod, by.Sub(now)), 0).Truncate(time.Second)
}

// NodeHealth is what a cluster says about one of its nodes.
type NodeHealth struct {
	// Gone: the cluster has no Node object of that name.
	Gone bool
	// NotReadySince is when the node's Ready condition last left True
	// (zero while it is Ready).
	NotReadySince time.Time
}

// NodeWatcher is implemented by drivers that watch their clusters' Node
// objects. Health answers from that watch; an error means the driver
// cannot tell now (the watch has not synced, the API is unreachable), and
// nothing is decided from it.
type NodeWatcher interface {
	Health(ctx context.Context, clusterID, nodeName string) (NodeHealth, error)
}

// NodeChangeNotifier is implemented by drivers that report, through the
// callback, a managed Node deleted or changing readiness, so the
// controller checks for lost nodes at once rather than at its backstop
// sweep. The callback must not block or call the driver.
type NodeChangeNotifier interface {
	SetOnNodeChange(func())
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
