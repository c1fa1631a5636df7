package admission

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
)

// Pods is what the check reads of the cluster's pods (the Kubernetes
// driver's watch).
type Pods interface {
	PodsOnNode(node string) ([]kube.PodUse, error)
	PodsOfWorkload(uid string) ([]kube.PodUse, error)
}

// Input is what one pass of the check decides from.
type Input struct {
	Now time.Time
	// Checks are the names of the AdmissionChecks whose controllerName is
	// ControllerName.
	Checks []string
	// Workloads are the cluster's workloads (those without one of Checks
	// are passed over).
	Workloads []*Workload
	// Flavors are the ResourceFlavors' node labels, by name.
	Flavors map[string]map[string]string
	// View is sparecap's side of the cluster.
	View queues.View
	Pods Pods
	// Tolerations let a pinned pod onto preemptible nodes the operator
	// taints (--preemptible-taint).
	Tolerations []corev1.Toleration
	// RequeueAfter is the requeueAfterSeconds of a Retry.
	RequeueAfter int32
}

// Update is a new state of the check on one workload.
type Update struct {
	Namespace, Name string
	UID             string
	State           CheckState
	// Node is the reclaimed node a Retry is for ("" for other updates).
	Node string
}

// Decide works out the check's state on every workload that carries it:
//
//   - Retry, for a workload holding the check Ready, when a node running
//     its pods is reclaimed (draining, or lost), or when capacity it was
//     counted on went before its pods were placed: Kueue evicts it,
//     suspends it and requeues it after RequeueAfter. Never Rejected,
//     which would deactivate it.
//   - Ready, for a workload whose quota Kueue reserved, when its pods fit
//     the free GPUs of the cluster's ready preemptible nodes, after the
//     workloads already Ready took theirs: with podSetUpdates that pin its
//     pod sets to preemptible nodes and label its pods with its UID.
//   - Pending otherwise, saying what it waits for (a Ready workload not
//     yet admitted goes back to Pending when its capacity went).
//
// Workloads already Ready are counted first, oldest first, so capacity
// is never promised twice; then the pending ones, oldest reservation
// first. Only changes are returned.
func Decide(in Input) ([]Update, error) {
	ready, pending := candidates(in)
	room, err := freeCapacity(in.View, in.Pods)
	if err != nil {
		return nil, err
	}
	d := &decision{in: &in, room: room}
	for _, c := range ready {
		if err := d.recheck(c); err != nil {
			return nil, err
		}
	}
	for _, c := range pending {
		d.admit(c)
	}
	return d.out, nil
}

// candidate is a workload holding one of our checks, and since when it
// waits its turn.
type candidate struct {
	w     *Workload
	check CheckState
	since time.Time
}

// candidates are the workloads holding one of in's checks Ready, oldest
// first, and those holding it Pending whose quota Kueue reserved, oldest
// reservation first.
func candidates(in Input) (ready, pending []candidate) {
	ours := map[string]bool{}
	for _, c := range in.Checks {
		ours[c] = true
	}
	for _, w := range in.Workloads {
		if w.settled() {
			continue
		}
		for _, cs := range w.Status.AdmissionChecks {
			if !ours[cs.Name] {
				continue
			}
			switch cs.State {
			case StateReady:
				ready = append(ready, candidate{w, cs, cs.LastTransitionTime.Time})
			case StatePending:
				if w.Status.Admission == nil || !condTrue(w.Status.Conditions, condQuotaReserved) {
					continue // Kueue has not reserved its quota yet
				}
				q, _ := cond(w.Status.Conditions, condQuotaReserved)
				pending = append(pending, candidate{w, cs, q.LastTransitionTime.Time})
			}
		}
	}
	order := func(a, b candidate) int {
		return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.w.Namespace, b.w.Namespace), cmp.Compare(a.w.Name, b.w.Name))
	}
	slices.SortFunc(ready, order)
	slices.SortFunc(pending, order)
	return ready, pending
}

// decision is one pass of Decide: the capacity not yet promised, and the
// changes so far.
type decision struct {
	in   *Input
	room capacity
	out  []Update
}

// set records the check cs on w going to state with msg, unless neither
// changes.
func (d *decision) set(w *Workload, cs CheckState, state, msg string, psu []PodSetUpdate, requeue *int32, node string) {
	next := CheckState{Name: cs.Name, State: state, Message: msg, PodSetUpdates: psu, RequeueAfterSeconds: requeue,
		LastTransitionTime: cs.LastTransitionTime}
	if state != cs.State || next.LastTransitionTime.IsZero() {
		next.LastTransitionTime = metav1.NewTime(d.in.Now.Truncate(time.Second))
	}
	if state == cs.State && msg == cs.Message {
		return // nothing to write
	}
	d.out = append(d.out, Update{Namespace: w.Namespace, Name: w.Name, UID: string(w.UID), State: next, Node: node})
}

// recheck counts a Ready workload's pods not yet placed against the
// room, or sends it back: Retry when a node running its pods is
// reclaimed or, once admitted, its capacity went; Pending before.
func (d *decision) recheck(c candidate) error {
	in, w := d.in, c.w
	pods, err := in.Pods.PodsOfWorkload(string(w.UID))
	if err != nil {
		return err
	}
	if node, msg, gone := reclaimed(in.View, pods); gone {
		d.set(w, c.check, StateRetry, msg, nil, &in.RequeueAfter, node)
		return nil
	}
	if free, ok := d.room.pack(unplacedNeeds(needs(w, in.Flavors), pods)); ok {
		d.room.free = free
		return nil
	}
	if w.admitted() {
		d.set(w, c.check, StateRetry, "the preemptible capacity it was admitted onto was taken back before its pods started; "+
			"requeued to run again when capacity is back", nil, &in.RequeueAfter, "")
	} else {
		d.set(w, c.check, StatePending, d.room.waiting(in.View, needs(w, in.Flavors)), nil, nil, "")
	}
	return nil
}

// admit makes a pending workload Ready, pinned to preemptible nodes, if
// its pods fit the room; it stays Pending, saying why, if not.
func (d *decision) admit(c candidate) {
	in, w := d.in, c.w
	need := needs(w, in.Flavors)
	free, ok := d.room.pack(need)
	if !ok {
		d.set(w, c.check, StatePending, d.room.waiting(in.View, need), nil, nil, "")
		return
	}
	d.room.free = free
	d.set(w, c.check, StateReady, fmt.Sprintf("preemptible capacity is there: %d GPUs for %d pods on %d ready preemptible nodes",
		sum(sizes(need)), len(need), len(d.room.nodes)), podSetUpdates(w, in.Flavors, in.Tolerations), nil, "")
}

// capacity is the GPUs free on each ready preemptible node, and its GPU
// type.
type capacity struct {
	nodes []string
	free  []int64
	types []string
}

func freeCapacity(v queues.View, pods Pods) (capacity, error) {
	var c capacity
	for _, n := range v.Preemptible(domain.NodeReady) {
		on, err := pods.PodsOnNode(n.Name)
		if err != nil {
			return c, err
		}
		free := int64(n.GPUs)
		for _, p := range on {
			if !p.Ended {
				free -= p.GPUs
			}
		}
		c.nodes = append(c.nodes, n.Name)
		c.free = append(c.free, max(free, 0))
		c.types = append(c.types, n.GPUType)
	}
	return c, nil
}

// waiting says what a workload needing need waits for.
func (c capacity) waiting(v queues.View, pods []need) string {
	msg := fmt.Sprintf("waiting for preemptible capacity: %d pods need %d GPUs", len(pods), sum(sizes(pods)))
	if t := oneType(pods); t != "" {
		free, nodes := int64(0), 0
		for i, nt := range c.types {
			if nt == t {
				free, nodes = free+c.free[i], nodes+1
			}
		}
		msg += fmt.Sprintf(" of %s; %d GPUs are free on %d ready preemptible %s nodes", t, free, nodes, t)
	} else {
		msg += fmt.Sprintf("; %d GPUs are free on %d ready preemptible nodes", sum(c.free), len(c.nodes))
	}
	cl := v.Cluster
	msg += fmt.Sprintf(" (preemptible target %d GPUs", cl.TargetPreemptibleGPUs())
	if cl.Unfulfilled != "" {
		msg += ", " + string(cl.Unfulfilled)
		if cl.UnfulfilledMessage != "" {
			msg += ": " + cl.UnfulfilledMessage
		}
	}
	return msg + ")"
}

// reclaimed reports whether a node running one of pods is being taken
// back (draining, or removing after it was lost): which, and what to say.
func reclaimed(v queues.View, pods []kube.PodUse) (node, msg string, gone bool) {
	for _, p := range pods {
		if p.Ended || p.Node == "" {
			continue
		}
		n, ok := v.Node(p.Node)
		if !ok {
			continue
		}
		switch n.State {
		case domain.NodeDraining:
			return n.Name, fmt.Sprintf("node %s is reclaimed (%s): its pods got SIGTERM and it goes by %s; "+
				"requeued to run again when preemptible capacity is back", n.Name, n.DrainCause,
				n.Deadline.UTC().Format(time.RFC3339)), true
		case domain.NodeRemoving, domain.NodeRemoved:
			return n.Name, fmt.Sprintf("node %s is gone (%s); requeued to run again when preemptible capacity is back",
				n.Name, cmp.Or(string(n.Outcome), "removed")), true
		}
	}
	return "", "", false
}

// needs lists the GPUs (and GPU type) of each pod of w's pod sets that
// run on preemptible nodes (those not kept on standard ones; see
// standard).
func needs(w *Workload, flavors map[string]map[string]string) []need {
	var out []need
	for _, ps := range w.Spec.PodSets {
		if standard(w, ps, flavors) {
			continue
		}
		count := ps.Count
		if a := assignment(w, ps.Name); a != nil && a.Count != nil {
			count = *a.Count // partial admission
		}
		n := need{gpus: kube.PodGPUs(&ps.Template.Spec), typ: gpuTypeOf(w, ps, flavors)}
		for range count {
			out = append(out, n)
		}
	}
	return out
}

// standard reports whether pod set ps is kept off preemptible nodes: its
// template selects standard nodes, or every flavor Kueue assigned it
// stands for standard nodes (a Ray head, a launcher, on the flavor of the
// standard nodes). Such a pod set is neither counted nor pinned.
func standard(w *Workload, ps PodSet, flavors map[string]map[string]string) bool {
	if ps.Template.Spec.NodeSelector[domain.LabelComputeClass] == string(domain.Standard) {
		return true
	}
	a := assignment(w, ps.Name)
	if a == nil || len(a.Flavors) == 0 {
		return false
	}
	for _, f := range a.Flavors {
		if flavors[f][domain.LabelComputeClass] != string(domain.Standard) {
			return false
		}
	}
	return true
}

func assignment(w *Workload, podSet string) *PodSetAssignment {
	if w.Status.Admission == nil {
		return nil
	}
	for i := range w.Status.Admission.PodSetAssignments {
		if strings.EqualFold(w.Status.Admission.PodSetAssignments[i].Name, podSet) {
			return &w.Status.Admission.PodSetAssignments[i]
		}
	}
	return nil
}

// podSetUpdates pin w's preemptible pod sets to preemptible nodes
// (node selector, the operator's tolerations) and label every pod with
// w's UID, so the pods on a reclaimed node lead back to w.
func podSetUpdates(w *Workload, flavors map[string]map[string]string, tolerations []corev1.Toleration) []PodSetUpdate {
	out := make([]PodSetUpdate, 0, len(w.Spec.PodSets))
	for _, ps := range w.Spec.PodSets {
		u := PodSetUpdate{Name: ps.Name, Labels: map[string]string{domain.LabelKueueWorkload: string(w.UID)}}
		if !standard(w, ps, flavors) {
			u.NodeSelector = map[string]string{domain.LabelComputeClass: string(domain.Preemptible)}
			u.Tolerations = slices.Clone(tolerations)
		}
		out = append(out, u)
	}
	return out
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
