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

// CheckpointAdvice is the body of GET /v1/advice/checkpoint: the
// checkpoint interval for a job in a region and GPU type, from the
// preemption rate measured there (GET /v1/stats/preemptions' figures over
// the same window).
type CheckpointAdvice struct {
	Region            string    `json:"region"`
	GPUType           string    `json:"gpu_type"`
	CheckpointSeconds float64   `json:"checkpoint_seconds"`
	From              time.Time `json:"from"`
	To                time.Time `json:"to"`
	// Preemptions and PreemptibleNodeHours are the measurement.
	Preemptions          int     `json:"preemptions"`
	PreemptibleNodeHours float64 `json:"preemptible_node_hours"`
	// PreemptionRatePercentPerHour is the rate used: Preemptions over
	// the node-hours (in percent of nodes an hour), or, with no
	// preemption seen, at most one in the node-hours observed
	// (RateBasis "upper_bound"); 0 with no node-hours ("none").
	PreemptionRatePercentPerHour float64 `json:"preemption_rate_percent_per_hour"`
	RateBasis                    string  `json:"rate_basis"`
	// MTBFSeconds is the mean time between preemptions of one node.
	MTBFSeconds float64 `json:"mtbf_seconds"`
	// Formula names how the interval was worked out: "daly" (Daly's
	// refinement of Young's √(2δM)); YoungIntervalSeconds is Young's.
	Formula                    string  `json:"formula"`
	RecommendedIntervalSeconds float64 `json:"recommended_interval_seconds"`
	YoungIntervalSeconds       float64 `json:"young_interval_seconds"`
	// ExpectedOverheadPercent is the share of time spent checkpointing
	// and redoing work lost to preemptions; ExpectedLostSecondsPerPreemption
	// the work a preemption loses when no checkpoint is taken on its notice
	// (with one that completes before the deadline: none).
	ExpectedOverheadPercent          float64 `json:"expected_overhead_percent"`
	ExpectedLostSecondsPerPreemption float64 `json:"expected_lost_seconds_per_preemption"`
	Note                             string  `json:"note,omitempty"`
}
