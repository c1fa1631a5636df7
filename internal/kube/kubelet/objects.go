package kubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sparecap/sparecap/internal/kube"
)

// RegisterNode does what a kubelet joining the cluster does: it creates the
// Node (unless it exists; labels are then left alone) and reports it Ready.
// It is kube.RegisterNode, which the register provider uses too. Its
// heartbeats carry this host's time, as a kubelet's do.
func RegisterNode(ctx context.Context, c kubernetes.Interface, name string, labels map[string]string) error {
	return kube.RegisterNode(ctx, c, name, labels, time.Now())
}

// MarkReady sets the node's Ready condition to True, refreshing its
// heartbeat.
func MarkReady(ctx context.Context, c kubernetes.Interface, name string) error {
	return kube.SetReady(ctx, c, name, corev1.ConditionTrue, time.Now())
}

// MarkNotReady sets the node's Ready condition to False, as the node
// lifecycle controller would for a kubelet that stopped reporting.
func MarkNotReady(ctx context.Context, c kubernetes.Interface, name string) error {
	return kube.SetReady(ctx, c, name, corev1.ConditionFalse, time.Now())
}

// PodOption changes a pod CreatePods is about to create.
type PodOption func(*corev1.Pod)

// WithLabels adds labels to the pods.
func WithLabels(labels map[string]string) PodOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for k, v := range labels {
			p.Labels[k] = v
		}
	}
}

// CreatePods creates namespace if missing and n pods in it, bound to
// nodeName (as the scheduler would have bound them) with the given
// terminationGracePeriodSeconds. Names are generated from the node's name.
// Nothing runs their container; see Config.RunPods.
func CreatePods(ctx context.Context, c kubernetes.Interface, namespace, nodeName string, n int, grace int64, opts ...PodOption) ([]*corev1.Pod, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kubelet: creating namespace %s: %w", namespace, err)
	}
	pods := make([]*corev1.Pod, 0, n)
	for range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: nodeName + "-", Namespace: namespace},
			Spec: corev1.PodSpec{
				NodeName:                      nodeName,
				TerminationGracePeriodSeconds: new(grace),
				Containers:                    []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		for _, o := range opts {
			o(pod)
		}
		created, err := c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return pods, fmt.Errorf("kubelet: creating pod on %s: %w", nodeName, err)
		}
		pods = append(pods, created)
	}
	return pods, nil
}

// goRun reports a bound Pending pod Running and Ready (Config.RunPods).
func (k *Kubelet) goRun(pod *corev1.Pod) {
	k.mu.Lock()
	seen := k.started[pod.UID]
	k.started[pod.UID] = true
	k.mu.Unlock()
	if seen {
		return
	}
	k.wg.Go(func() {
		for {
			err := k.run(pod)
			if err == nil || apierrors.IsNotFound(err) {
				return
			}
			select {
			case <-k.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			if apierrors.IsConflict(err) {
				fresh, err := k.c.CoreV1().Pods(pod.Namespace).Get(k.ctx, pod.Name, metav1.GetOptions{})
				if err != nil || fresh.UID != pod.UID || fresh.Status.Phase != corev1.PodPending || fresh.DeletionTimestamp != nil {
					return // gone, replaced or moved on: nothing to start
				}
				pod = fresh
			}
		}
	})
}

func (k *Kubelet) run(pod *corev1.Pod) error {
	p := pod.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err := k.c.CoreV1().Pods(p.Namespace).UpdateStatus(k.ctx, p, metav1.UpdateOptions{})
	return err
}
