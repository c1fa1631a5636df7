package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RegisterNode does what a kubelet joining a cluster does to its Node
// object: creates it if missing (with labels) and reports it Ready.
func RegisterNode(ctx context.Context, c kubernetes.Interface, name string, labels map[string]string) error {
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			n, err = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	if Ready(n) {
		return nil
	}
	now := metav1.Now()
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "registered by sparecap", LastHeartbeatTime: now, LastTransitionTime: now,
	})
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("mark node %s Ready: %w", name, err)
	}
	return nil
}
