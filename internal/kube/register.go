package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// LabelRegistered marks the Nodes the register provider created: it posts
// their heartbeats, as their kubelet would.
const LabelRegistered = "sparecap.dev/registered"

// ResourceGPU is the extended resource GPUs are scheduled by (NVIDIA's
// device plugin advertises it).
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Capacity is what a node registered by the register provider offers a
// scheduler: 110 pods (the kubelet's default), the machine's GPUs as
// nvidia.com/gpu, and stand-in figures for CPU and memory (64 cores,
// 512 GiB), which sparecap's fleet does not record.
func Capacity(gpus int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourcePods:   resource.MustParse("110"),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		ResourceGPU:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
}

// RegisterNode does what a kubelet joining a cluster does to its Node
// object: creates it if missing (with labels; an existing node's labels are
// left alone) and reports it Ready, with a heartbeat at now (the
// kubelet's wall time).
func RegisterNode(ctx context.Context, c kubernetes.Interface, name string, labels map[string]string, now time.Time) error {
	return registerNode(ctx, c, name, labels, nil, now)
}

func registerNode(ctx context.Context, c kubernetes.Interface, name string, labels map[string]string, capacity corev1.ResourceList, now time.Time) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	return setStatus(ctx, c, name, corev1.ConditionTrue, capacity, now)
}

// SetReady sets the node's Ready condition (replacing the one it has) and
// refreshes its heartbeat to now, as a kubelet posting its status does.
func SetReady(ctx context.Context, c kubernetes.Interface, name string, status corev1.ConditionStatus, now time.Time) error {
	return setStatus(ctx, c, name, status, nil, now)
}

// setStatus posts the node's status: its Ready condition with a heartbeat
// at now (wall time, as a kubelet reports it) and, if given, its capacity
// (allocatable the same).
func setStatus(ctx context.Context, c kubernetes.Interface, name string, status corev1.ConditionStatus, capacity corev1.ResourceList, at time.Time) error {
	now := metav1.NewTime(at)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: now, LastTransitionTime: now,
			Reason: "KubeletReady", Message: "kubelet is posting ready status"}
		if status != corev1.ConditionTrue {
			cond.Reason, cond.Message = "KubeletNotReady", "kubelet is not ready"
		}
		found := false
		for i, old := range node.Status.Conditions {
			if old.Type == corev1.NodeReady {
				if old.Status == status {
					cond.LastTransitionTime = old.LastTransitionTime
				}
				node.Status.Conditions[i], found = cond, true
			}
		}
		if !found {
			node.Status.Conditions = append(node.Status.Conditions, cond)
		}
		if capacity != nil {
			node.Status.Capacity, node.Status.Allocatable = capacity.DeepCopy(), capacity.DeepCopy()
		}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set node %s Ready=%s: %w", name, status, err)
	}
	return nil
}

// heartbeat posts the status of every Node the register provider made in
// the cluster (what the node watch shows), so a node lifecycle controller
// does not take them for dead kubelets.
func (c *Cluster) heartbeat(ctx context.Context) error {
	if !c.nodes.HasSynced() {
		return nil
	}
	var errs []error
	for _, obj := range c.nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		if n.Labels[LabelRegistered] != "true" {
			continue
		}
		// The capacity set at registration stays; the Ready condition's
		// heartbeat is refreshed.
		cctx, cancel := c.call(ctx)
		err := setStatus(cctx, c.client, n.Name, corev1.ConditionTrue, nil, c.opts.Wall.Now())
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("heartbeat of cluster %s: %w (and %d more)", c.id, errs[0], len(errs)-1)
	}
	return nil
}

// HeartbeatEvery is how often the register provider posts its nodes'
// status: well inside the node lifecycle controller's default grace
// period (50 s).
const HeartbeatEvery = 10 * time.Second
