package apiv1

import "time"

// PreemptionStats are the interruption statistics of preemptible nodes in
// one region and GPU type over a window. See package internal/stats for the
// precise definitions; docs/api.md summarises them.
type PreemptionStats struct {
	Region  string `json:"region"`
	GPUType string `json:"gpu_type"`
	// NodesObserved counts the preemptible nodes that contribute to any of
	// the other fields.
	NodesObserved int `json:"nodes_observed"`
	// PreemptibleNodeHours: hours preemptible nodes served (from ready to
	// the start of their drain or their removal) inside the window.
	PreemptibleNodeHours float64 `json:"preemptible_node_hours"`
	// Preemptions: preemptible nodes whose drain started in the window for
	// a cause the tenant did not ask for (preempted, fair_share,
	// out_of_service).
	Preemptions int `json:"preemptions"`
	// PreemptionsPerNodeHour is Preemptions / PreemptibleNodeHours, or 0
	// when there are no node-hours.
	PreemptionsPerNodeHour float64 `json:"preemptions_per_node_hour"`
	// MedianLifetimeSeconds and P90LifetimeSeconds: nearest-rank
	// percentiles of ready → drain start of the preempted nodes counted in
	// Preemptions; 0 when Preemptions is 0.
	MedianLifetimeSeconds float64 `json:"median_lifetime_seconds"`
	P90LifetimeSeconds    float64 `json:"p90_lifetime_seconds"`
	// DrainsEndedEarly and DrainsEndedAtDeadline count the drains of
	// preempted nodes (same causes as Preemptions) that finished in the
	// window, by outcome.
	DrainsEndedEarly      int `json:"drains_ended_early"`
	DrainsEndedAtDeadline int `json:"drains_ended_at_deadline"`
	// EarlyShare is DrainsEndedEarly over both drain counts, or 0 when no
	// drain finished.
	EarlyShare float64 `json:"early_share"`
}

// PreemptionStatsList is the body of GET /v1/stats/preemptions. Stats has
// one entry per region and GPU type of the fleet (after the filters),
// sorted by region then GPU type. The window is [From, To).
type PreemptionStatsList struct {
	From  time.Time         `json:"from"`
	To    time.Time         `json:"to"`
	Stats []PreemptionStats `json:"stats"`
}
