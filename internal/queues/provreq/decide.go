package provreq

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
)

// Defaults of the parameters. The booking window is the cluster
// autoscaler's. A request that cannot be filled fails after two minutes
// of the pool saying no, so that Kueue's retry (with its backoff) frees
// the quota it holds meanwhile.
const (
	DefaultFillTimeout = 2 * time.Minute
	DefaultBooking     = 10 * time.Minute
)

// Input is what one pass decides from.
type Input struct {
	Now time.Time
	// Requests are the cluster's ProvisioningRequests (of any class).
	Requests []*Request
	// Templates are the cluster's PodTemplates, by namespace/name.
	Templates map[string]*corev1.PodTemplate
	View      queues.View
	// Consumed is the GPUs the pods consuming a request use now (pods not
	// ended, kube.AnnotationConsumes).
	Consumed func(namespace, name string) (int64, error)
}

// Output is the pass's answer.
type Output struct {
	// Requested is the GPUs the requests ask for now, to be recorded as
	// the cluster's RequestedPreemptibleGPUs.
	Requested int
	// Updates are the requests whose conditions change.
	Updates []Update
}

// Update is the full set of a request's conditions, as they should be.
type Update struct {
	Namespace, Name, UID string
	Conditions           []metav1.Condition
}

// Decide works out, for the requests of ClassName in creation order, what
// each asks for and its conditions:
//
//   - Failed, for good: its pod templates ask for pods no node of the
//     cluster holds, its parameters do not parse, the cluster has not
//     opted in (max_preemptible_gpus 0), it would take the requests over
//     that maximum, or the pool said no (NoSpareCapacity, FairShare) for
//     its whole fill timeout. A failed request counts for nothing.
//   - Accepted, counted in Requested: its pods packed onto whole nodes.
//   - Provisioned once the cluster's ready preemptible GPUs cover it and
//     every earlier request; until then Provisioned=False with the reason
//     the target is unmet.
//   - BookingExpired its booking window after Provisioned; from then on
//     it counts only the GPUs its pods use (rounded up to nodes), so a
//     request whose work is done stops holding nodes.
func Decide(in Input) (Output, error) {
	var out Output
	reqs := slices.Clone(in.Requests)
	slices.SortFunc(reqs, func(a, b *Request) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	cl := in.View.Cluster
	perNode := int64(cmp.Or(in.View.GPUsPerNode, domain.DefaultGPUsPerMachine))
	var ready int64
	readyOf := map[string]int64{} // by GPU type
	for _, n := range in.View.Preemptible(domain.NodeReady) {
		ready += int64(n.GPUs)
		readyOf[n.GPUType] += int64(n.GPUs)
	}
	var held int64               // what the requests before this one hold
	heldOf := map[string]int64{} // those of one GPU type, by type
	for _, r := range reqs {
		if r.Spec.ProvisioningClassName != ClassName || r.is(CondFailed) {
			continue
		}
		s := state{r: r, now: in.Now}
		gpus, failure, wait := asks(r, in.Templates, perNode)
		typ, terr := typeOf(r, in.Templates, cl)
		fill, booking, perr := params(r)
		switch {
		case wait != "":
			s.set(CondAccepted, false, "PodTemplateNotFound", wait)
		case failure != "":
			s.fail("PodsDoNotFit", failure)
		case terr != nil:
			s.fail("GPUTypeNotTaken", terr.Error())
		case perr != nil:
			s.fail("InvalidParameters", perr.Error())
		case cl.MaxPreemptibleGPUs == 0:
			s.fail("NotEnabled", fmt.Sprintf("cluster %s does not take ProvisioningRequests: its max_preemptible_gpus is 0 (sparecap clusters update %s --max-preemptible-gpus N)", cl.ID, cl.ID))
		default:
			count := gpus
			if r.is(CondBookingExpired) {
				used, err := in.Consumed(r.Namespace, r.Name)
				if err != nil {
					return out, err
				}
				count = min(gpus, (used+perNode-1)/perNode*perNode)
			}
			if !r.is(CondProvisioned) && held+count > int64(cl.MaxPreemptibleGPUs) {
				s.fail("MaximumExceeded", fmt.Sprintf("asks for %d preemptible GPUs; with the %d the cluster's earlier requests hold that is more than its max_preemptible_gpus of %d",
					gpus, held, cl.MaxPreemptibleGPUs))
				break
			}
			s.set(CondAccepted, true, "Accepted", fmt.Sprintf("%d preemptible GPUs (%d nodes) counted in the target of cluster %s", gpus, gpus/perNode, cl.ID))
			held += count
			covered, has := held, ready
			if typ != "" {
				// A request of one GPU type (a Kueue flavor per type) is
				// provisioned once that type's nodes cover it.
				heldOf[typ] += count
				covered, has = heldOf[typ], readyOf[typ]
			}
			s.progress(covered, has, cl, fill, booking)
			if s.failed {
				held -= count
				heldOf[typ] -= count
			}
		}
		if s.changed {
			out.Updates = append(out.Updates, Update{Namespace: r.Namespace, Name: r.Name, UID: string(r.UID), Conditions: s.conds})
		}
	}
	out.Requested = int(held)
	return out, nil
}

// asks returns the GPUs r asks for, on whole nodes; or why it never can
// be (failure); or what it waits for (a pod template not created yet).
func asks(r *Request, templates map[string]*corev1.PodTemplate, perNode int64) (gpus int64, failure, wait string) {
	var pods []int64
	for _, ps := range r.Spec.PodSets {
		t, ok := templates[r.Namespace+"/"+ps.PodTemplateRef.Name]
		if !ok {
			return 0, "", fmt.Sprintf("pod template %s/%s does not exist (yet)", r.Namespace, ps.PodTemplateRef.Name)
		}
		g := kube.PodGPUs(&t.Template.Spec)
		if g > perNode {
			return 0, fmt.Sprintf("pod template %s asks for %d GPUs a pod; a node of this cluster has %d", t.Name, g, perNode), ""
		}
		for range ps.Count {
			pods = append(pods, g)
		}
	}
	nodes, _ := queues.NodesFor(pods, perNode)
	return int64(nodes) * perNode, "", ""
}

// params reads r's fill timeout and booking window.
func params(r *Request) (fill, booking time.Duration, err error) {
	read := func(key string, def time.Duration) (time.Duration, error) {
		v, ok := r.Spec.Parameters[key]
		if !ok {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 7*24*3600 {
			return 0, fmt.Errorf("parameter %s=%q: want a whole number of seconds from 1 to 604800", key, v)
		}
		return time.Duration(n) * time.Second, nil
	}
	if fill, err = read(ParamFillTimeout, DefaultFillTimeout); err != nil {
		return
	}
	booking, err = read(ParamBooking, DefaultBooking)
	return
}

// state is a request's conditions as this pass leaves them.
type state struct {
	r       *Request
	now     time.Time
	conds   []metav1.Condition
	changed bool
	failed  bool
}

// set sets condition t, keeping its transition time when its status does
// not change.
func (s *state) set(t string, status bool, reason, msg string) {
	if s.conds == nil {
		s.conds = slices.Clone(s.r.Status.Conditions)
	}
	st := metav1.ConditionFalse
	if status {
		st = metav1.ConditionTrue
	}
	next := metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(s.now.UTC().Truncate(time.Second)), ObservedGeneration: s.r.Generation}
	for i, c := range s.conds {
		if c.Type != t {
			continue
		}
		if c.Status == st {
			next.LastTransitionTime = c.LastTransitionTime
		}
		if !same(c, next) {
			s.conds[i], s.changed = next, true
		}
		return
	}
	s.conds, s.changed = append(s.conds, next), true
}

func same(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

func (s *state) fail(reason, msg string) {
	s.set(CondFailed, true, reason, msg)
	s.failed = true
}

// progress moves an accepted request on: Provisioned when ready covers
// held (this request and every earlier one), Failed when the pool said
// no for its whole fill timeout, BookingExpired its booking window after
// Provisioned.
func (s *state) progress(held, ready int64, cl domain.Cluster, fill, booking time.Duration) {
	if p, ok := s.r.cond(CondProvisioned); ok && p.Status == metav1.ConditionTrue {
		if !s.r.is(CondBookingExpired) && s.now.Sub(p.LastTransitionTime.Time) >= booking {
			s.set(CondBookingExpired, true, "BookingExpired", fmt.Sprintf("its booking of %s ended: it now holds the capacity its pods use", booking))
		}
		return
	}
	if ready >= held {
		s.set(CondProvisioned, true, "Provisioned", fmt.Sprintf("%d preemptible GPUs are ready in cluster %s", ready, cl.ID))
		return
	}
	reason := cmp.Or(string(cl.Unfulfilled), string(domain.UnfulfilledProvisioning))
	msg := fmt.Sprintf("%d of the %d preemptible GPUs the requests up to this one ask for are ready", ready, held)
	if cl.UnfulfilledMessage != "" {
		msg += ": " + cl.UnfulfilledMessage
	}
	s.set(CondProvisioned, false, reason, msg)
	accepted, _ := s.r.cond(CondAccepted)
	since := accepted.LastTransitionTime.Time
	if accepted.Status != metav1.ConditionTrue {
		since = s.now // accepted in this pass
	}
	noPool := cl.Unfulfilled == domain.UnfulfilledNoCapacity || cl.Unfulfilled == domain.UnfulfilledFairShare
	if noPool && s.now.Sub(since) >= fill {
		s.fail(string(cl.Unfulfilled), fmt.Sprintf("not filled in %s: %s", fill, msg))
	}
}

// typeOf is the GPU type r's pods select (sparecap.dev/gpu-type in their
// templates' node selectors, as a Kueue flavor per GPU type puts there),
// "" for none; an error if they select several, or one the cluster's
// preemptible target does not take. Templates not there yet count as
// none (asks waits for them).
func typeOf(r *Request, templates map[string]*corev1.PodTemplate, cl domain.Cluster) (string, error) {
	typ := ""
	for _, ps := range r.Spec.PodSets {
		t, ok := templates[r.Namespace+"/"+ps.PodTemplateRef.Name]
		if !ok {
			continue
		}
		if x := t.Template.Spec.NodeSelector[domain.LabelGPUType]; x != "" && typ != "" && x != typ {
			return "", fmt.Errorf("its pod sets select GPU types %s and %s; a request is of one type", typ, x)
		} else if x != "" {
			typ = x
		}
	}
	if typ != "" && !slices.Contains(allocator.Types(&cl), typ) {
		return "", fmt.Errorf("its pods select GPU type %s; cluster %s's preemptible nodes are of %s", typ, cl.ID, strings.Join(allocator.Types(&cl), ", "))
	}
	return typ, nil
}
