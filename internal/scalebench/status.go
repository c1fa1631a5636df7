package scalebench

import (
	"fmt"
	"sort"
	"strings"
)

// Metric names the harness reads (docs/api.md, "Metrics").
const (
	mNodes            = "sparecap_nodes"
	mUnfulfilled      = "sparecap_targets_unfulfilled"
	mDesired          = "sparecap_cluster_desired_preemptible_gpus"
	mAllocated        = "sparecap_cluster_allocated_preemptible_gpus"
	mStoreUp          = "sparecap_store_up"
	mReclaims         = "sparecap_reclaims_started_total"
	mReclaimsFinished = "sparecap_reclaims_finished_total"
	mNoticeFanout     = "sparecap_notice_fanout_seconds"
)

// busyStates are the node states of work in progress.
var busyStates = []string{"pending", "provisioning", "draining", "removing"}

// Status is the fleet's state as one scrape of /metrics tells it.
type Status struct {
	StoreUp bool
	// Nodes by class ("standard", "preemptible") and state.
	Nodes map[string]map[string]int
	// Unfulfilled targets by reason.
	Unfulfilled map[string]int
	// DesiredPreemptibleGPUs and AllocatedPreemptibleGPUs summed over
	// every cluster; Clusters counts the clusters with a target series.
	DesiredPreemptibleGPUs, AllocatedPreemptibleGPUs int
	Clusters                                         int
}

// StatusOf reads the state metrics of a scrape.
func StatusOf(sc Scrape) Status {
	st := Status{Nodes: map[string]map[string]int{}, Unfulfilled: map[string]int{}}
	up, ok := sc.Sum(mStoreUp, nil)
	st.StoreUp = ok && up == 1
	for _, s := range sc {
		switch s.Name {
		case mNodes:
			c := s.Labels["class"]
			if st.Nodes[c] == nil {
				st.Nodes[c] = map[string]int{}
			}
			st.Nodes[c][s.Labels["state"]] += int(s.Value)
		case mUnfulfilled:
			st.Unfulfilled[s.Labels["reason"]] += int(s.Value)
		case mDesired:
			st.DesiredPreemptibleGPUs += int(s.Value)
			st.Clusters++
		case mAllocated:
			st.AllocatedPreemptibleGPUs += int(s.Value)
		}
	}
	return st
}

// Ready counts the ready nodes of class.
func (s Status) Ready(class string) int { return s.Nodes[class]["ready"] }

// Busy counts nodes pending, provisioning, draining or removing.
func (s Status) Busy() int {
	n := 0
	for _, byState := range s.Nodes {
		for _, st := range busyStates {
			n += byState[st]
		}
	}
	return n
}

// Settled says whether the fleet has come to rest with wantStd standard
// nodes ready: nothing in progress, and every unmet target unmet for a
// reason that lasts (not Provisioning, not CoolingDown).
func (s Status) Settled(wantStd int) bool {
	return s.StoreUp && s.Ready("standard") == wantStd && s.Busy() == 0 &&
		s.Unfulfilled["Provisioning"] == 0 && s.Unfulfilled["CoolingDown"] == 0
}

// String is a one-line progress report.
func (s Status) String() string {
	var b strings.Builder
	if !s.StoreUp {
		b.WriteString("store DOWN; ")
	}
	for _, class := range []string{"standard", "preemptible"} {
		fmt.Fprintf(&b, "%s:", class)
		states := make([]string, 0, len(s.Nodes[class]))
		for st, n := range s.Nodes[class] {
			if n > 0 {
				states = append(states, fmt.Sprintf(" %s=%d", st, n))
			}
		}
		sort.Strings(states)
		if len(states) == 0 {
			b.WriteString(" none")
		}
		b.WriteString(strings.Join(states, ""))
		b.WriteString("; ")
	}
	fmt.Fprintf(&b, "preemptible GPUs %d/%d", s.AllocatedPreemptibleGPUs, s.DesiredPreemptibleGPUs)
	var reasons []string
	for r, n := range s.Unfulfilled {
		if n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s=%d", r, n))
		}
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		fmt.Fprintf(&b, "; unfulfilled %s", strings.Join(reasons, " "))
	}
	return b.String()
}

// Reclaims reads sparecap_reclaims_started_total by cause.
func Reclaims(sc Scrape) map[string]float64 { return sc.ByLabel(mReclaims, "cause") }

// sumCauses adds the reclaims of every cause (tenant-initiated ones too).
func sumCauses(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}
