package simulate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// asked is what a run's demand asked of the control plane: GPU-seconds
// of each class within the horizon (a preemptible cluster's standard
// node counts as standard), the GPU types it named, and when its last
// event came.
type asked struct {
	std, pre int64
	types    []string
	last     time.Duration
}

// askedOf sums evs' demand over [0, horizon).
func askedOf(evs []Event, horizon time.Duration) asked {
	type live struct {
		since    time.Duration
		std, pre int
	}
	var a asked
	on := map[string]*live{}
	add := func(l *live, to time.Duration) {
		d := int64((min(to, horizon) - min(l.since, horizon)) / time.Second)
		a.std += int64(l.std) * d
		a.pre += int64(l.pre) * d
	}
	for _, e := range evs {
		a.last = max(a.last, e.At)
		if !slices.Contains(a.types, e.GPUType) {
			a.types = append(a.types, e.GPUType)
		}
		l, ok := on[e.Cluster]
		if !ok {
			l = &live{std: e.Standard}
			on[e.Cluster] = l
		}
		at := max(e.At, e.StartsAt) // a booking asks from its start
		add(l, at)
		l.since = at
		switch {
		case e.GPUs == 0:
			delete(on, e.Cluster)
		case e.Class == domain.Standard:
			l.std = e.GPUs
		default:
			l.pre = e.GPUs
		}
	}
	for _, l := range on {
		add(l, horizon)
	}
	return a
}

// warnings says what a reader must not miss in a run's figures: demand
// mostly refused (for a trace: often a GPU type no pool has), or a
// horizon that ends before the demand does.
func (a asked) warnings(op *Operator, poolTypes []string, horizon time.Duration) []string {
	var ws []string
	if a.std > 0 && op.StandardGPUh*2 < hours(a.std) {
		w := fmt.Sprintf("most of the standard demand was refused: %s of the %s GPU-hours asked were delivered", num(op.StandardGPUh), num(hours(a.std)))
		if missing := absent(a.types, poolTypes); len(missing) > 0 {
			w += fmt.Sprintf("; no pool has the GPU type %s", strings.Join(missing, ", "))
		}
		ws = append(ws, w)
	}
	if op.OnDemandRequests > 0 && op.Refused*2 > op.OnDemandRequests {
		ws = append(ws, fmt.Sprintf("%d of the %d on-demand requests were refused for capacity", op.Refused, op.OnDemandRequests))
	}
	if a.pre > 0 && op.PreemptibleGPUh*10 < hours(a.pre) {
		ws = append(ws, fmt.Sprintf("the preemptible demand got %s of the %s GPU-hours it asked", num(op.PreemptibleGPUh), num(hours(a.pre))))
	}
	if a.last > horizon {
		ws = append(ws, fmt.Sprintf("the demand runs to T+%s, past the horizon of %s: only its first %s is replayed", a.last, horizon, horizon))
	}
	return ws
}

// absent are the types of want that have is missing.
func absent(want, have []string) []string {
	var out []string
	for _, t := range want {
		if !slices.Contains(have, t) {
			out = append(out, t)
		}
	}
	return out
}

// TraceAsk is what a trace's rows ask as they are: their GPU-hours by
// class before they are summed into whole nodes (a row with no end holds
// its GPUs to the trace's last time), over the whole trace, whatever
// the horizon.
type TraceAsk struct {
	Rows            int     `json:"rows_with_gpus"`
	StandardGPUh    float64 `json:"standard_gpu_hours"`
	PreemptibleGPUh float64 `json:"preemptible_gpu_hours"`
}

// askOf is the TraceAsk of a trace's usages.
func askOf(us []usage) *TraceAsk {
	end := math.Inf(-1)
	for _, u := range us {
		end = math.Max(end, math.Max(u.from, u.to))
	}
	var std, pre float64
	for _, u := range us {
		to := u.to
		if to < u.from {
			to = end
		}
		gs := float64(u.gpus) * (to - u.from)
		if u.class == domain.Standard {
			std += gs
		} else {
			pre += gs
		}
	}
	return &TraceAsk{Rows: len(us), StandardGPUh: round(std / 3600), PreemptibleGPUh: round(pre / 3600)}
}
