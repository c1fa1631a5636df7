package stats

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// lc is a hand-built node lifecycle. Times are offsets from base; a nil
// offset leaves the time unset. Class defaults to preemptible, machine to m1.
type lc struct {
	machine  string
	class    domain.ComputeClass
	ready    *time.Duration
	drain    *time.Duration
	cause    domain.DrainCause
	drained  *time.Duration
	outcome  domain.DrainOutcome
	removed  *time.Duration
	nodeName string
}

func d(v time.Duration) *time.Duration { return &v }

func (l lc) node() domain.Node {
	n := domain.Node{ID: "n-" + l.nodeName, Name: l.nodeName, MachineID: l.machine, Class: l.class, GPUs: 8, State: domain.NodeReady}
	if n.MachineID == "" {
		n.MachineID = "m1"
	}
	if n.Class == "" {
		n.Class = domain.Preemptible
	}
	set := func(p *time.Duration) time.Time {
		if p == nil {
			return time.Time{}
		}
		return at(*p)
	}
	n.ReadyAt, n.DrainStartedAt, n.DrainedAt, n.RemovedAt = set(l.ready), set(l.drain), set(l.drained), set(l.removed)
	n.DrainCause, n.Outcome = l.cause, l.outcome
	switch {
	case !n.RemovedAt.IsZero():
		n.State = domain.NodeRemoved
	case !n.DrainedAt.IsZero():
		n.State = domain.NodeRemoving
	case !n.DrainStartedAt.IsZero():
		n.State, n.Deadline = domain.NodeDraining, n.DrainStartedAt.Add(domain.DefaultDrainWindow)
	}
	return n
}

var h100 = []domain.Machine{
	{ID: "m1", Region: "us-central-2", GPUType: "H100", GPUs: 8},
	{ID: "m2", Region: "us-central-2", GPUType: "H100", GPUs: 8},
}

func TestSinglePartition(t *testing.T) {
	const H, M = time.Hour, time.Minute
	win := func(from, to, now time.Duration) [3]time.Time { return [3]time.Time{at(from), at(to), at(now)} }
	std := win(0, 10*H, 12*H)     // [base, base+10h), now = base+12h
	hours119 := float64(119) / 60 // 1h59m, computed at run time like the code does
	row := func(s apiv1.PreemptionStats) apiv1.PreemptionStats {
		s.Region, s.GPUType = "us-central-2", "H100"
		return s
	}
	cases := []struct {
		name  string
		nodes []lc
		win   [3]time.Time
		want  apiv1.PreemptionStats
	}{
		{"nothing", nil, std, row(apiv1.PreemptionStats{})},
		{"live node clipped to the window",
			[]lc{{ready: d(-2 * H)}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: 10})},
		{"live node: a window past now counts no future hours",
			[]lc{{ready: d(2 * H)}}, win(0, 24*H, 12*H),
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: 10})},
		{"preempted inside the window, drain ended early",
			[]lc{{ready: d(1 * H), drain: d(4 * H), cause: domain.CausePreempted, drained: d(4*H + 2*M), outcome: domain.OutcomeEarly, removed: d(4*H + 2*M)}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: 3, Preemptions: 1, PreemptionsPerNodeHour: 1.0 / 3,
				MedianLifetimeSeconds: 3 * 3600, P90LifetimeSeconds: 3 * 3600, DrainsEndedEarly: 1, EarlyShare: 1})},
		{"still draining: service ends at the notice",
			[]lc{{ready: d(30 * M), drain: d(9*H + 30*M), cause: domain.CauseFairShare}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: 9, Preemptions: 1, PreemptionsPerNodeHour: 1.0 / 9,
				MedianLifetimeSeconds: 9 * 3600, P90LifetimeSeconds: 9 * 3600})},
		{"tenant-initiated drains are neither preemptions nor counted drains",
			[]lc{
				{ready: d(1 * H), drain: d(3 * H), cause: domain.CauseScaledDown, drained: d(3*H + M), outcome: domain.OutcomeEarly, removed: d(3*H + M)},
				{ready: d(1 * H), drain: d(2 * H), cause: domain.CauseClusterDeleted, drained: d(2*H + 5*M), outcome: domain.OutcomeDeadline, removed: d(2*H + 5*M), nodeName: "b"},
			}, std,
			row(apiv1.PreemptionStats{NodesObserved: 2, PreemptibleNodeHours: 3})},
		{"out_of_service is a preemption",
			[]lc{{ready: d(2 * H), drain: d(3 * H), cause: domain.CauseOutOfService, drained: d(3*H + 5*M), outcome: domain.OutcomeDeadline}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: 1, Preemptions: 1, PreemptionsPerNodeHour: 1,
				MedianLifetimeSeconds: 3600, P90LifetimeSeconds: 3600, DrainsEndedAtDeadline: 1})},
		{"drain started before the window and ended in it",
			[]lc{{ready: d(-3 * H), drain: d(-2 * M), cause: domain.CauseFairShare, drained: d(3 * M), outcome: domain.OutcomeDeadline, removed: d(3 * M)}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, DrainsEndedAtDeadline: 1})},
		{"drain started in the window and ended after it",
			[]lc{{ready: d(8 * H), drain: d(10*H - M), cause: domain.CausePreempted, drained: d(10*H + M), outcome: domain.OutcomeEarly, removed: d(10*H + M)}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: hours119, Preemptions: 1, PreemptionsPerNodeHour: 1 / hours119,
				MedianLifetimeSeconds: 2*3600 - 60, P90LifetimeSeconds: 2*3600 - 60})},
		{"a drain starting at from is in, one at to is out; zero node-hours give rate 0",
			[]lc{
				{ready: d(-1 * H), drain: d(0), cause: domain.CausePreempted},
				{ready: d(11 * H), drain: d(10 * H), cause: domain.CausePreempted, nodeName: "b"}, // impossible order: clamps, adds nothing
				{ready: d(9 * H), drain: d(10 * H), cause: domain.CausePreempted, nodeName: "c"},
			}, win(0, 10*H, 12*H),
			row(apiv1.PreemptionStats{NodesObserved: 2, PreemptibleNodeHours: 1, Preemptions: 1, PreemptionsPerNodeHour: 1,
				MedianLifetimeSeconds: 3600, P90LifetimeSeconds: 3600})},
		{"preemption with no node-hours in the window: rate 0, never Inf",
			[]lc{{ready: d(-1 * H), drain: d(0), cause: domain.CausePreempted}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, Preemptions: 1, MedianLifetimeSeconds: 3600, P90LifetimeSeconds: 3600})},
		{"removed without a drain: service ends at removal",
			[]lc{{ready: d(1 * H), removed: d(2*H + 30*M)}}, std,
			row(apiv1.PreemptionStats{NodesObserved: 1, PreemptibleNodeHours: 1.5})},
		{"never ready: reclaimed before it joined, not an interruption",
			[]lc{{drain: d(2 * H), cause: domain.CausePreempted, removed: d(2 * H)}}, std,
			row(apiv1.PreemptionStats{})},
		{"standard nodes and unknown machines are left out",
			[]lc{
				{class: domain.Standard, ready: d(0), drain: d(H), cause: domain.CausePreempted},
				{machine: "m-gone", ready: d(0), drain: d(H), cause: domain.CausePreempted, nodeName: "b"},
			}, std,
			row(apiv1.PreemptionStats{})},
		{"entirely before the window",
			[]lc{{ready: d(-5 * H), drain: d(-4 * H), cause: domain.CausePreempted, drained: d(-4*H + M), outcome: domain.OutcomeEarly, removed: d(-4*H + M)}}, std,
			row(apiv1.PreemptionStats{})},
		{"early share over both outcomes",
			[]lc{
				{ready: d(0), drain: d(1 * H), cause: domain.CausePreempted, drained: d(1*H + M), outcome: domain.OutcomeEarly, nodeName: "a"},
				{ready: d(0), drain: d(2 * H), cause: domain.CausePreempted, drained: d(2*H + M), outcome: domain.OutcomeEarly, nodeName: "b"},
				{ready: d(0), drain: d(3 * H), cause: domain.CausePreempted, drained: d(3*H + M), outcome: domain.OutcomeEarly, nodeName: "c"},
				{ready: d(0), drain: d(4 * H), cause: domain.CausePreempted, drained: d(4*H + 5*M), outcome: domain.OutcomeDeadline, nodeName: "d"},
			}, std,
			row(apiv1.PreemptionStats{NodesObserved: 4, PreemptibleNodeHours: 10, Preemptions: 4, PreemptionsPerNodeHour: 0.4,
				MedianLifetimeSeconds: 2 * 3600, P90LifetimeSeconds: 4 * 3600, DrainsEndedEarly: 3, DrainsEndedAtDeadline: 1, EarlyShare: 0.75})},
		{"empty window",
			[]lc{{ready: d(0), drain: d(H), cause: domain.CausePreempted}}, win(H, H, 12*H),
			row(apiv1.PreemptionStats{})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []domain.Node
			for i, l := range tc.nodes {
				if l.nodeName == "" {
					l.nodeName = string(rune('a' + i))
				}
				nodes = append(nodes, l.node())
			}
			got := Preemptions(nodes, h100, tc.win[0], tc.win[1], tc.win[2])
			if len(got) != 1 {
				t.Fatalf("want one partition, got %+v", got)
			}
			if !reflect.DeepEqual(got[0], tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got[0], tc.want)
			}
			checkFinite(t, got[0])
		})
	}
}

func checkFinite(t *testing.T, s apiv1.PreemptionStats) {
	t.Helper()
	for _, f := range []float64{s.PreemptibleNodeHours, s.PreemptionsPerNodeHour, s.MedianLifetimeSeconds, s.P90LifetimeSeconds, s.EarlyShare} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("non-finite value in %+v", s)
		}
	}
}

func TestPartitionsAndOrder(t *testing.T) {
	machines := []domain.Machine{
		{ID: "m-us-h1", Region: "us-central-2", GPUType: "H100"},
		{ID: "m-eu", Region: "eu-west-1", GPUType: "L40S"},
		{ID: "m-us-a", Region: "us-central-2", GPUType: "A100"},
		{ID: "m-us-h2", Region: "us-central-2", GPUType: "H100"},
		{ID: "m-ap", Region: "ap-south-1", GPUType: "L40S"},
	}
	nodes := []domain.Node{
		lc{machine: "m-us-h1", ready: d(0), drain: d(2 * time.Hour), cause: domain.CausePreempted}.node(),
		lc{machine: "m-us-h2", ready: d(0), nodeName: "b"}.node(),
		lc{machine: "m-eu", ready: d(0), drain: d(time.Hour), cause: domain.CauseScaledDown, nodeName: "c"}.node(),
	}
	got := Preemptions(nodes, machines, at(0), at(4*time.Hour), at(4*time.Hour))
	want := []apiv1.PreemptionStats{
		{Region: "ap-south-1", GPUType: "L40S"},
		{Region: "eu-west-1", GPUType: "L40S", NodesObserved: 1, PreemptibleNodeHours: 1},
		{Region: "us-central-2", GPUType: "A100"},
		{Region: "us-central-2", GPUType: "H100", NodesObserved: 2, PreemptibleNodeHours: 6, Preemptions: 1, PreemptionsPerNodeHour: 1.0 / 6,
			MedianLifetimeSeconds: 7200, P90LifetimeSeconds: 7200},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got := Preemptions(nodes, nil, at(0), at(time.Hour), at(time.Hour)); len(got) != 0 {
		t.Fatalf("no machines: %+v", got)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	seq := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * time.Second
		}
		return out
	}
	cases := []struct {
		n, p int
		want time.Duration // rank ⌈p·n/100⌉ of 1s, 2s, …
	}{
		{1, 50, 1 * time.Second},
		{1, 90, 1 * time.Second},
		{2, 50, 1 * time.Second}, // the lower middle value, no interpolation
		{3, 50, 2 * time.Second},
		{4, 50, 2 * time.Second},
		{5, 90, 5 * time.Second},
		{10, 50, 5 * time.Second},
		{10, 90, 9 * time.Second},
		{11, 90, 10 * time.Second},
		{20, 90, 18 * time.Second},
		{100, 90, 90 * time.Second},
		{10, 100, 10 * time.Second},
	}
	for _, tc := range cases {
		if got := Percentile(seq(tc.n), tc.p); got != tc.want {
			t.Errorf("p%d of 1..%d s = %v, want %v", tc.p, tc.n, got, tc.want)
		}
	}
}

func TestLifetimePercentilesFromNodes(t *testing.T) {
	// Ten preemptions with lifetimes 1..10 minutes, given out of order.
	var nodes []domain.Node
	for i, m := range []int{7, 3, 10, 1, 5, 9, 2, 8, 4, 6} {
		nodes = append(nodes, lc{ready: d(0), drain: d(time.Duration(m) * time.Minute), cause: domain.CausePreempted, nodeName: string(rune('a' + i))}.node())
	}
	got := Preemptions(nodes, h100, at(0), at(time.Hour), at(time.Hour))[0]
	if got.Preemptions != 10 || got.MedianLifetimeSeconds != 5*60 || got.P90LifetimeSeconds != 9*60 {
		t.Fatalf("%+v", got)
	}
	// 55 node-minutes in total. (Computed at run time: Go's exact constant
	// arithmetic would round 10/(55/60) once instead of twice.)
	hours := float64(55) / 60
	if got.PreemptibleNodeHours != hours || got.PreemptionsPerNodeHour != 10/hours {
		t.Fatalf("%+v", got)
	}
}

func TestInputsNotModified(t *testing.T) {
	nodes := []domain.Node{
		lc{ready: d(0), drain: d(3 * time.Minute), cause: domain.CausePreempted, nodeName: "a"}.node(),
		lc{ready: d(0), drain: d(1 * time.Minute), cause: domain.CausePreempted, nodeName: "b"}.node(),
	}
	before := append([]domain.Node(nil), nodes...)
	a := Preemptions(nodes, h100, at(0), at(time.Hour), at(time.Hour))
	b := Preemptions(nodes, h100, at(0), at(time.Hour), at(time.Hour))
	if !reflect.DeepEqual(nodes, before) || !reflect.DeepEqual(a, b) {
		t.Fatal("Preemptions changed its input or is not deterministic")
	}
}
