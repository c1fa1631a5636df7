package admission

import (
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
)

// need is one pod's GPUs, and the GPU type it must run on ("" any): a
// pod set whose template or assigned flavor names one
// (sparecap.dev/gpu-type, as a ResourceFlavor per GPU type of a cluster
// whose preemptible target spans several does).
type need struct {
	gpus int64
	typ  string
}

// sizes are the GPUs of needs.
func sizes(needs []need) []int64 {
	out := make([]int64, len(needs))
	for i, n := range needs {
		out[i] = n.gpus
	}
	return out
}

// gpuTypeOf is the GPU type pod set ps must run on: its template's node
// selector's, else the one every flavor Kueue assigned it names; "" for
// any.
func gpuTypeOf(w *Workload, ps PodSet, flavors map[string]map[string]string) string {
	if t := ps.Template.Spec.NodeSelector[domain.LabelGPUType]; t != "" {
		return t
	}
	a := assignment(w, ps.Name)
	if a == nil {
		return ""
	}
	typ := ""
	for _, f := range a.Flavors {
		t := flavors[f][domain.LabelGPUType]
		if t == "" || (typ != "" && t != typ) {
			return ""
		}
		typ = t
	}
	return typ
}

// pack places needs on the room's free GPUs: the pods of a GPU type on
// that type's nodes only, the others anywhere after them. It returns the
// GPUs left free, and whether every pod found a place.
func (c capacity) pack(needs []need) ([]int64, bool) {
	free := slices.Clone(c.free)
	var types []string
	for _, n := range needs {
		if n.typ != "" && !slices.Contains(types, n.typ) {
			types = append(types, n.typ)
		}
	}
	slices.Sort(types)
	for _, t := range types {
		var idx []int
		var bins, pods []int64
		for i, nt := range c.types {
			if nt == t {
				idx, bins = append(idx, i), append(bins, free[i])
			}
		}
		for _, n := range needs {
			if n.typ == t {
				pods = append(pods, n.gpus)
			}
		}
		left, ok := queues.Pack(bins, pods)
		if !ok {
			return c.free, false
		}
		for k, i := range idx {
			free[i] = left[k]
		}
	}
	var any []int64
	for _, n := range needs {
		if n.typ == "" {
			any = append(any, n.gpus)
		}
	}
	return queues.Pack(free, any)
}

// unplacedNeeds is needs without the pods already running (a pod placed
// stands for one entry of its size).
func unplacedNeeds(needs []need, pods []kube.PodUse) []need {
	rest := slices.Clone(needs)
	for _, p := range pods {
		if p.Ended || p.Node == "" {
			continue
		}
		if i := slices.IndexFunc(rest, func(n need) bool { return n.gpus == p.GPUs }); i >= 0 {
			rest = slices.Delete(rest, i, i+1)
		}
	}
	return rest
}

// oneType is the GPU type every one of needs must run on; "" when they
// name none, or several.
func oneType(needs []need) string {
	if len(needs) == 0 {
		return ""
	}
	t := needs[0].typ
	for _, n := range needs {
		if n.typ != t {
			return ""
		}
	}
	return t
}
