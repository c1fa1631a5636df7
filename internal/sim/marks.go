package sim

// What the drain writes on a simulated node and its pods: the marks
// (cordon, taint, annotations) and the notice as Events.

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// MarkDraining cordons the node, taints it domain.TaintPreempted=<cause>
// (NoSchedule) and annotates its deadline in one write, as the Kubernetes
// driver does with one patch. A taint with the same key and effect is
// Kubernetes' notion of the same taint: one with another value is updated
// in place, never duplicated.
func (f *Fleet) MarkDraining(ctx context.Context, clusterID, nodeName string, m driver.Marks) error {
	t := Taint{Key: domain.TaintPreempted, Value: string(m.Cause), Effect: "NoSchedule"}
	deadline := m.Deadline.UTC().Format(time.RFC3339)
	return f.changeNode(ctx, "mark", clusterID, nodeName, func(n *node) bool {
		changed := cordon(n)
		changed = taint(n, t) || changed
		return annotate(n, domain.AnnotationDeadline, deadline) || changed
	})
}

// changeNode applies apply to the node under the lock and saves it if
// apply reports that anything changed.
func (f *Fleet) changeNode(ctx context.Context, op, clusterID, nodeName string, apply func(*node) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup(op, clusterID, nodeName)
	if err != nil {
		return err
	}
	return f.finish(ctx, changedNode(n, apply(n)))
}

// cordon, taint and annotate change n (under f.mu) and report whether
// anything changed.
func cordon(n *node) bool {
	changed := !n.Unschedulable
	n.Unschedulable = true
	return changed
}

func taint(n *node, t Taint) bool {
	for i, have := range n.Taints {
		if have.Key == t.Key && have.Effect == t.Effect {
			if have == t {
				return false
			}
			n.Taints[i] = t
			return true
		}
	}
	n.Taints = append(n.Taints, t)
	return true
}

func annotate(n *node, key, value string) bool {
	if have, ok := n.Annotations[key]; ok && have == value {
		return false
	}
	n.Annotations[key] = value
	return true
}

// PostNotice posts an event about the node, or about a pod on it when w is
// not nil (the pod need not exist any more: it may have exited since).
// Like Kubernetes' event aggregation, posting an event identical (object,
// type, reason, message) to one the node already has bumps that event's
// count and last-seen time instead of adding another, so a repeated call
// after a crash leaves one event.
func (f *Fleet) PostNotice(ctx context.Context, clusterID, nodeName string, w *driver.Work, e driver.Notice) error {
	podKey := ""
	if w != nil {
		podKey = cmp.Or(w.Namespace, "default") + "/" + w.Name
	}
	typ := "Normal"
	if e.Warning {
		typ = "Warning"
	}
	return f.postEvent(ctx, clusterID, nodeName, podKey, typ, e)
}

func (f *Fleet) postEvent(ctx context.Context, clusterID, nodeName, podKey, typ string, e driver.Notice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("post event on", clusterID, nodeName)
	if err != nil {
		return err
	}
	now := f.clock.Now()
	for _, have := range n.Events {
		if have.Pod == podKey && have.Type == typ && have.Reason == e.Reason && have.Message == e.Message {
			have.Count++
			have.LastAt = now
			c := changedNode(n, true)
			if i, ok := slices.BinarySearchFunc(f.st.Events, have.Seq, func(ev *event, seq int64) int {
				return cmp.Compare(ev.Seq, seq)
			}); ok {
				f.st.Events[i].Count, f.st.Events[i].LastAt = have.Count, now
				c.Events = []*event{f.st.Events[i]}
			}
			return f.finish(ctx, c)
		}
	}
	f.st.EventSeq++
	ev := event{
		Seq:       f.st.EventSeq,
		ClusterID: clusterID,
		NodeName:  nodeName,
		Pod:       podKey,
		Type:      typ,
		Reason:    e.Reason,
		Message:   e.Message,
		FirstAt:   now,
		LastAt:    now,
		Count:     1,
	}
	n.Events = append(n.Events, &ev)
	logged := ev
	f.st.Events = append(f.st.Events, &logged)
	if over := len(f.st.Events) - maxLogEvents; over > 0 {
		f.st.Events = slices.Delete(f.st.Events, 0, over)
	}
	return f.finish(ctx, change{Nodes: []*node{n}, Events: []*event{&logged}})
}
