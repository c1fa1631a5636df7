package kube

import (
	"context"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/driver"
)

// eventName names an Event after what it is about and says, so posting it
// again (after a crash) finds it there instead of adding another.
func eventName(object, typ string, e driver.Notice) string {
	h := fnv.New64a()
	h.Write([]byte(typ + "\x00" + e.Reason + "\x00" + e.Message))
	return fmt.Sprintf("%s.sparecap-%016x", object, h.Sum64())
}

func (c *Cluster) postEvent(ctx context.Context, node string, ref corev1.ObjectReference, e driver.Notice) error {
	now := metav1.NewTime(c.opts.Clock.Now())
	typ := corev1.EventTypeNormal
	if e.Warning {
		typ = corev1.EventTypeWarning
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(ref.Name, typ, e), Namespace: ref.Namespace},
		InvolvedObject:      ref,
		Type:                typ,
		Reason:              e.Reason,
		Message:             e.Message,
		Source:              corev1.EventSource{Component: "sparecap", Host: c.opts.Instance},
		ReportingController: "sparecap.dev/controller",
		ReportingInstance:   c.opts.Instance,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault // where kubectl looks for node events
	}
	if !c.may(permEvents) {
		return refused(permEvents)
	}
	ctx, cancel := c.eventCall(ctx)
	defer cancel()
	_, err := c.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	switch {
	case err == nil || apierrors.IsAlreadyExists(err):
		c.granted(permEvents)
		return nil
	case c.refusal(permEvents, node, err):
		return fmt.Errorf("%w: %w", driver.ErrRefused, err)
	}
	return err
}

// PostNotice posts an Event involving the node, or the pod w in its
// namespace (where the tenant looks beside their workload).
func (c *Cluster) PostNotice(ctx context.Context, clusterID, nodeName string, w *driver.Work, e driver.Notice) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	ref := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeName, UID: types.UID(nodeName)}
	if w != nil {
		ref = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: w.Namespace, Name: w.Name, UID: types.UID(w.UID)}
	}
	return c.postEvent(ctx, nodeName, ref, e)
}
