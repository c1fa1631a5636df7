package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// RegisterNode does what a kubelet joining a cluster does to its Node
// object: creates it if missing (with labels; an existing node's labels are
// left alone) and reports it Ready.
func RegisterNode(ctx context.Context, c kubernetes.Interface, name string, labels map[string]string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	return SetReady(ctx, c, name, corev1.ConditionTrue)
}

// SetReady sets the node's Ready condition (replacing the one it has) and
// refreshes its heartbeat, as a kubelet posting its status does.
func SetReady(ctx context.Context, c kubernetes.Interface, name string, status corev1.ConditionStatus) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
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
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set node %s Ready=%s: %w", name, status, err)
	}
	return nil
}
